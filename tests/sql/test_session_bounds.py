"""Issue 23 item 2 (part): AI-operator SQL runs in a DuckDBSession; its deadline cannot be switched
off (nan/inf/0/-1 refused in the session and at the command line) and a runaway query is stopped
within 1.25x its budget with a typed failure."""

import subprocess
import sys
import time

import duckdb
import pytest

from resources.sql import DuckDBSession, FailureKind, QueryFailure


@pytest.fixture
def duck(tmp_path):
    path = tmp_path / "s.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t AS SELECT range AS id FROM range(10)")
    con.close()
    return path


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 0, -1])
def test_session_refuses_timeouts_that_switch_the_deadline_off(duck, bad):
    with DuckDBSession(duck, threads=1) as s:
        with pytest.raises(ValueError):
            s.execute("SELECT 1", timeout_s=bad)


def test_session_stops_a_runaway_query_within_the_budget(duck):
    with DuckDBSession(duck, threads=1) as s:
        t0 = time.monotonic()
        out = s.execute("SELECT count(*) FROM range(1000000000000) a WHERE a.range % 7 = 3", timeout_s=1.0)
        took = time.monotonic() - t0
    assert isinstance(out, QueryFailure) and out.kind is FailureKind.TIMEOUT, out
    assert took < 1.25 * 1.0 + 1.0, took  # 1.25x plus scheduling slack on a loaded 2-core machine


@pytest.mark.integration
@pytest.mark.parametrize("bad", ["nan", "inf", "0", "-1"])
def test_aisql_run_refuses_bad_timeout_at_the_command_line(bad):
    cli = [sys.executable, "-c", "import sys; from cli import main; sys.exit(main(sys.argv[1:]))"]
    r = subprocess.run(cli + ["aisql", "run", "movie", "SELECT 1", "--timeout", bad], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and "timeout must be a finite number" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
