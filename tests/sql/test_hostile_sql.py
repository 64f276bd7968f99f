"""Item 1: untrusted SQL has bounded memory and a deadline that holds even for single huge values."""

import math
import subprocess
import sys

import pytest

from resources.sql import FailureKind, check_timeout, execute_sql
from resources.sql import pool as sql_executor
from tests.sql.hostile_sql import CORPUS, REPO_ROOT, make_databases, run_in_child

pytestmark = pytest.mark.integration  # real processes, servers or files under stress

BUDGET_S = 1.0


@pytest.fixture(scope="module")
def hostile_dbs(tmp_path_factory):
    return make_databases(tmp_path_factory.mktemp("hostile"))


@pytest.mark.parametrize("name, engine, sql, kinds", CORPUS, ids=[c[0] for c in CORPUS])
def test_hostile_query_is_a_typed_failure(hostile_dbs, name, engine, sql, kinds):
    # In a child with a 3 GB address cap, so an unbounded executor fails here instead of the machine.
    out = run_in_child(hostile_dbs[engine], sql, BUDGET_S)
    assert out["kind"] in kinds, out
    # Generous wall bound (bench/README.md has the measured ratios): only "it never ends" fails.
    assert out["elapsed_s"] < BUDGET_S * 1.5 + 10, out


def test_bounded_results_still_work(hostile_dbs):
    # Bounds must not break ordinary queries: a few MB of results is fine for both engines.
    r = execute_sql(hostile_dbs["sqlite"], "SELECT zeroblob(1000000) FROM (VALUES(1),(2))")
    assert r.ok and [len(v[0]) for v in r.rows] == [1000000, 1000000]
    r = execute_sql(hostile_dbs["duckdb"], "SELECT repeat('x', 1000000) AS s FROM range(3)")
    assert r.ok and r.row_count == 3 and len(r.rows[0][0]) == 1000000


def test_result_byte_cap(hostile_dbs):
    r = execute_sql(hostile_dbs["duckdb"], "SELECT repeat('x', 100000) FROM range(100)", max_bytes=1 << 20)
    assert not r.ok and r.kind is FailureKind.TOO_LARGE


def test_sandbox_survives_a_killed_worker(hostile_dbs):
    assert execute_sql(hostile_dbs["sqlite"], "SELECT 1").ok
    for w in list(sql_executor._POOL._idle):
        w.proc.kill()
        w.proc.wait()
    r = execute_sql(hostile_dbs["sqlite"], "SELECT 2")
    assert r.ok and r.rows == [(2,)]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 0, -1, "nan", "soon"])
def test_non_finite_timeouts_are_refused(hostile_dbs, bad):
    with pytest.raises(ValueError, match="finite|number"):
        check_timeout(bad)
    with pytest.raises(ValueError):
        execute_sql(hostile_dbs["sqlite"], "SELECT 1", timeout_s=bad)


@pytest.mark.parametrize("cmd", ["sql", "equiv"])
@pytest.mark.parametrize("value", ["nan", "inf"])
def test_cli_refuses_nan_and_inf_timeout(hostile_dbs, cmd, value):
    db = str(hostile_dbs["sqlite"])
    args = [db, "SELECT 1"] + (["SELECT 1"] if cmd == "equiv" else [])
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from cli import main; sys.exit(main())", cmd, *args, "--timeout", value],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "finite" in proc.stderr and "Traceback" not in proc.stderr
