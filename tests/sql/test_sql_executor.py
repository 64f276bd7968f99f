import hashlib
import sqlite3
import time

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from resources.sql import FailureKind, execute_sql


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def small_sqlite(tmp_path):
    path = tmp_path / "small.sqlite"
    con = sqlite3.connect(path)
    con.executescript(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL);"
        "INSERT INTO t VALUES (1,'a',1.5),(2,'b',NULL),(3,'c',3.0);"
    )
    con.commit()
    con.close()
    return path


@pytest.fixture
def small_duckdb(tmp_path):
    path = tmp_path / "small.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t AS SELECT range AS id, 'n' || range AS name FROM range(5)")
    con.close()
    return path


def test_select_returns_typed_rows(small_sqlite):
    r = execute_sql(small_sqlite, "SELECT id, name FROM t ORDER BY id")
    assert r.ok and r.columns == ["id", "name"]
    assert r.rows == [(1, "a"), (2, "b"), (3, "c")]


@pytest.mark.parametrize(
    "sql, kind",
    [
        ("SELECT 1; SELECT 2", FailureKind.FORBIDDEN),
        ("ATTACH DATABASE ':memory:' AS x", FailureKind.FORBIDDEN),
        ("CREATE TEMP TABLE x(a)", FailureKind.FORBIDDEN),
        ("CREATE TABLE x(a)", FailureKind.FORBIDDEN),
        ("INSERT INTO t VALUES (9,'z',0)", FailureKind.FORBIDDEN),
        ("UPDATE t SET name='x'", FailureKind.FORBIDDEN),
        ("DELETE FROM t", FailureKind.FORBIDDEN),
        ("DROP TABLE t", FailureKind.FORBIDDEN),
        ("PRAGMA query_only = OFF", FailureKind.FORBIDDEN),
        ("PRAGMA table_info(t)", FailureKind.FORBIDDEN),
        ("VACUUM INTO '/tmp/quandary_vacuum_copy.db'", FailureKind.FORBIDDEN),
        ("SELECT load_extension('/tmp/evil')", FailureKind.FORBIDDEN),
        ("SELEC 1", FailureKind.SYNTAX),
        ("SELECT * FROM missing_table", FailureKind.RUNTIME),
        ("", FailureKind.SYNTAX),
    ],
)
def test_sqlite_refusals_are_typed_and_file_unchanged(small_sqlite, sql, kind):
    before = sha(small_sqlite)
    r = execute_sql(small_sqlite, sql)
    assert not r.ok
    assert r.kind is kind, r.message
    assert r.message
    assert sha(small_sqlite) == before


def test_timeout_really_interrupts_runaway_query(small_sqlite):
    runaway = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    start = time.monotonic()
    r = execute_sql(small_sqlite, runaway, timeout_s=0.3)
    assert not r.ok and r.kind is FailureKind.TIMEOUT
    assert time.monotonic() - start < 3


def test_row_cap(small_sqlite):
    r = execute_sql(small_sqlite, "SELECT * FROM t", max_rows=2)
    assert not r.ok and r.kind is FailureKind.TOO_MANY_ROWS
    assert execute_sql(small_sqlite, "SELECT * FROM t", max_rows=3).ok


def test_missing_file_is_a_runtime_failure(tmp_path):
    r = execute_sql(tmp_path / "nope.sqlite", "SELECT 1")
    assert not r.ok and r.kind is FailureKind.RUNTIME


@pytest.mark.parametrize(
    "sql, kind",
    [
        ("SELECT * FROM read_csv('/etc/passwd')", FailureKind.FORBIDDEN),
        ("COPY t TO '/tmp/quandary_copy.csv'", FailureKind.FORBIDDEN),
        ("INSTALL httpfs", FailureKind.FORBIDDEN),
        ("LOAD httpfs", FailureKind.FORBIDDEN),
        ("ATTACH '/tmp/quandary_other.duckdb'", FailureKind.FORBIDDEN),
        ("CREATE TEMP TABLE z AS SELECT 1", FailureKind.FORBIDDEN),
        ("SELECT 1; SELECT 2", FailureKind.FORBIDDEN),
        ("SET enable_external_access = true", FailureKind.FORBIDDEN),
        ("SELEC 1", FailureKind.SYNTAX),
    ],
)
def test_duckdb_refusals(small_duckdb, sql, kind):
    before = sha(small_duckdb)
    r = execute_sql(small_duckdb, sql)
    assert not r.ok and r.kind is kind, getattr(r, "message", r)
    assert sha(small_duckdb) == before


def test_duckdb_select_and_timeout(small_duckdb):
    assert execute_sql(small_duckdb, "SELECT count(*) FROM t").rows == [(5,)]
    r = execute_sql(small_duckdb, "SELECT count(*) FROM range(10000000000000) a", timeout_s=0.3)
    assert not r.ok and r.kind is FailureKind.TIMEOUT


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.one_of(
        st.text(max_size=80),
        st.builds(
            lambda verb, rest: f"{verb} {rest}",
            st.sampled_from(["SELECT", "INSERT", "ATTACH", "PRAGMA", "WITH", "DROP", "VACUUM", "CREATE"]),
            st.text(alphabet="abct*(),;'= 0123456789", max_size=40),
        ),
    )
)
def test_fuzzed_sql_never_raises_and_never_writes(small_sqlite, sql):
    before = sha(small_sqlite)
    r = execute_sql(small_sqlite, sql, timeout_s=0.5)
    assert r.ok in (True, False)
    if not r.ok:
        assert isinstance(r.kind, FailureKind)
    assert sha(small_sqlite) == before
