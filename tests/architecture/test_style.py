"""The code style is a check, not a habit: `ruff check` (the rule set in pyproject.toml,
``[tool.ruff.lint]``) and `ruff format --check` must pass on the whole checkout. A failure prints
ruff's own report; `.venv/bin/ruff check --fix . && .venv/bin/ruff format .` fixes most of it."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUFF = Path(sys.executable).with_name("ruff")

pytestmark = pytest.mark.unit


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(RUFF), *args, "--no-cache", "."], cwd=REPO, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("args", [("check",), ("format", "--check")], ids=["lint", "format"])
def test_ruff_passes(args):
    assert RUFF.is_file(), f"{RUFF} is missing: install the test extra (pip install -e '.[test]')"
    result = _ruff(*args)
    assert result.returncode == 0, f"ruff {' '.join(args)} .\n{result.stdout[-6000:]}{result.stderr[-2000:]}"
