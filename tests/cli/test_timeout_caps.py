"""`--timeout` beyond the stated maximum is refused in one line (issue 34 item 4): `1e308` (and from
about 4e9) crashed `sql`, `equiv`, `audit sql` with an OverflowError and `aisql run` with
"timestamp out of range"."""

import subprocess
import sys

import pytest

from resources.sql import MAX_TIMEOUT_S, check_timeout
from tests.sql.hostile_sql import REPO_ROOT

CLI = "import sys; from cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.mark.parametrize("value", [1e308, 4e9, MAX_TIMEOUT_S + 1, "1e308"])
def test_check_timeout_refuses_values_beyond_the_maximum(value):
    with pytest.raises(ValueError, match="at most 86400 seconds"):
        check_timeout(value)


def test_the_maximum_itself_is_accepted():
    assert check_timeout(MAX_TIMEOUT_S) == MAX_TIMEOUT_S


@pytest.mark.parametrize(
    "args",
    [
        ["sql", "{db}", "SELECT 1"],
        ["equiv", "{db}", "SELECT 1", "SELECT 1"],
        ["audit", "sql", "SELECT 1"],
        ["aisql", "run", "movie", "SELECT 1"],
    ],
    ids=["sql", "equiv", "audit-sql", "aisql-run"],
)
def test_commands_refuse_a_huge_timeout_in_one_line(args, demo_db_path, tmp_path):
    argv = [a.replace("{db}", str(demo_db_path)) for a in args] + ["--timeout", "1e308"]
    r = subprocess.run(
        [sys.executable, "-c", CLI, *argv],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=180,
        env={**__import__("os").environ, "QUANDARY_HOME": str(tmp_path / "home")},
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "at most 86400 seconds" in r.stderr and "Traceback" not in r.stderr
    assert "OverflowError" not in r.stderr and "out of range" not in r.stderr
