"""The ``quandary`` command line.

Each module in this package that defines ``register(subparsers)`` adds its subcommands; the
handler is stored as ``func`` on the parsed args and returns the process exit code.
"""

import argparse
import importlib
import pkgutil
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="quandary",
        description="Benchmarks of answerable, ambiguous and unanswerable text-to-SQL questions.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code = args.func(args)
    except BrokenPipeError:  # e.g. `quandary ... | head`
        return 0
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
