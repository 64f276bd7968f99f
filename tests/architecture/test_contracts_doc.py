"""docs/architecture.md describes the import contracts pyproject.toml declares (issue 28 item 6)."""

from tests.architecture.contracts_doc import DOC, current, render


def test_the_architecture_page_lists_the_contracts_lint_imports_enforces():
    block = current(DOC.read_text())
    assert block is not None, f"{DOC} lost its generated contracts block"
    assert block == render(), (
        "docs/architecture.md's contracts differ from pyproject.toml: run "
        "`.venv/bin/python -m tests.architecture.contracts_doc --write`"
    )


def test_the_page_states_no_package_count_outside_the_generated_block():
    text = DOC.read_text().replace(current(DOC.read_text()) or "", "")
    for word in ("six", "seven", "eight"):
        assert f" {word} packages" not in text.lower() and f"{word} top-level packages" not in text.lower(), word
