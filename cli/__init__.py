"""The ``quandary`` command line.

Each module in ``cli.commands`` that defines ``register(subparsers)`` adds its subcommands; the
handler is stored as ``func`` on the parsed args and returns the process exit code. Command modules
never import each other: what two commands share lives beside them in ``cli/`` (``runs``: the
Dagster run service; ``run_output``: how a finished run is reported; ``output``: tables).
"""

import argparse
import importlib
import pkgutil
import sys

from cli import commands
from storage.faults import StorageError


class OneLineParser(argparse.ArgumentParser):
    """argparse with one-line errors (#42 item 1): the problem and where the help is, not the
    4-10 line usage block argparse prints first. Sub-command parsers are of the same class
    (``add_subparsers`` makes them with ``type(self)``)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="quandary",
        description="Benchmarks of answerable, ambiguous and unanswerable text-to-SQL questions.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


# Paths the CLI hands to other processes (Dagster run workers, the SQL worker) through the
# environment: a relative one means the caller's working directory (issue 23 item 3). The council
# file is not among them: it is resolved once (resources.llm.config.resolve_council_path, absolute)
# and handed to runs in their run config (#28 item 2).
PATH_ENV = ("QUANDARY_HOME", "DAGSTER_HOME")


def _absolute_path_env() -> None:
    import os

    for name in PATH_ENV:
        value = os.environ.get(name)
        if value and not os.path.isabs(os.path.expanduser(value)):
            os.environ[name] = os.path.abspath(os.path.expanduser(value))


def main(argv: list[str] | None = None) -> int:
    from cli.run_output import TerminateAsInterrupt

    try:
        parser = build_parser()  # imports every command (seconds): a Ctrl-C there is one line too
    except KeyboardInterrupt:
        print("\ninterrupted: quandary stopped", file=sys.stderr)
        return 130
    args = parser.parse_args(argv)
    _absolute_path_env()
    # every command ends on Ctrl-C or SIGTERM with one line (#31 item 6); a command that runs a job
    # says more (the run kept, the resume command) and returns 130 itself
    with TerminateAsInterrupt():
        try:
            code = args.func(args)
        except BrokenPipeError:  # e.g. `quandary ... | head`
            return 0
        except KeyboardInterrupt:
            print(f"\ninterrupted: quandary {args.command} stopped", file=sys.stderr)
            return 130
        except StorageError as exc:  # full, read-only, damaged: one line naming the file and the fix (#34 item 6)
            if getattr(args, "verbose", False):
                raise
            print(str(exc), file=sys.stderr)
            return 1
    return int(code or 0)


def run() -> None:
    """The console script: ``main`` and then exit. After an interrupt (exit 130) the process ends
    at once with ``os._exit``: what the run completed is already stored (steps, LLM calls, the
    CANCELED mark), while interpreter teardown would run the embedded model's C++ destructor, which
    joins server threads still waiting on requests nobody reads and hung the process for minutes
    (#42 item 4, 1 demo in 2 under test). The sandbox workers end by themselves with this process.
    Tests call ``main`` and keep their interpreter."""
    import logging
    import os

    code = main()
    if code == 130:
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # `quandary … | tee`: the Ctrl-C ended the reader too
                pass
        os._exit(130)
    sys.exit(code)


if __name__ == "__main__":
    run()
