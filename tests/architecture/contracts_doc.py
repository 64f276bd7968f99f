"""The contracts section of docs/architecture.md, generated from pyproject.toml (issue 28 item 6),
so the page cannot drift from what `lint-imports` enforces.

    .venv/bin/python -m tests.architecture.contracts_doc --write   # after changing a contract

tests/architecture/test_contracts_doc.py fails when the page and the contracts differ.
"""

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- contracts:begin (generated from pyproject.toml) -->", "<!-- contracts:end -->"
NUMBERS = {2: "Two", 3: "Three", 4: "Four", 5: "Five", 6: "Six", 7: "Seven", 8: "Eight", 9: "Nine", 10: "Ten"}


def _code(names) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _keeps(c: dict) -> str:
    kind = c["type"]
    if kind == "layers":
        return "top to bottom: " + " → ".join(_code(layer.split(" | ")).replace(", ", " \\| ") for layer in c["layers"])
    if kind == "forbidden":
        indirect = " directly" if c.get("allow_indirect_imports") else ""
        return f"{_code(c['source_modules'])} never import{indirect} {_code(c['forbidden_modules'])}"
    if kind == "independence":
        return f"{_code(c['modules'])} never import each other"
    if kind == "acyclic_siblings":
        return f"no cycle between the sibling packages under each of {_code(c['ancestors'])}"
    return kind


def render(pyproject: Path = ROOT / "pyproject.toml") -> str:
    linter = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]
    contracts = linter["contracts"]
    roots = linter["root_packages"]
    count = NUMBERS.get(len(roots), str(len(roots)))
    lines = [
        BEGIN,
        f"{count} top-level packages are checked ({_code(roots)}); {len(contracts)} contracts:",
        "",
        "| contract | kind | what it keeps |",
        "|---|---|---|",
        *(f"| {c['name'].replace('|', chr(92) + '|')} | `{c['type']}` | {_keeps(c)} |" for c in contracts),
        "",
        f"`lint-imports` ends with `Contracts: {len(contracts)} kept, 0 broken.`",
        END,
    ]
    return "\n".join(lines)


def current(doc: str) -> str | None:
    m = re.search(re.escape(BEGIN) + r".*?" + re.escape(END), doc, flags=re.S)
    return m.group(0) if m else None


def write() -> None:
    doc = DOC.read_text()
    old = current(doc)
    if old is None:
        raise SystemExit(f"{DOC}: no '{BEGIN}' … '{END}' block to replace")
    DOC.write_text(doc.replace(old, render()))


if __name__ == "__main__":
    if "--write" in sys.argv:
        write()
    print(render())
