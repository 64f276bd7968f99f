"""Item 3: one damaged file never takes the audit catalog down; item 9: `audit sql` is read-only."""

import duckdb
import polars as pl
import pytest

from cli import main
from storage.artifacts import write_version
from storage.audit import AuditQueryError, audit_query, list_views, open_audit

pytestmark = pytest.mark.integration  # real processes, servers or files under stress


@pytest.fixture
def catalog(isolated_home):
    good = write_version(pl.DataFrame({"db_id": ["a"], "n": [1]}), "seed_databases", "a")
    bad = write_version(pl.DataFrame({"x": list(range(100))}), "candidates", "a")
    other = write_version(pl.DataFrame({"x": [7]}), "candidates", "b")
    return good, bad, other


def test_truncated_parquet_is_skipped_with_a_warning(catalog, capsys):
    good, bad, other = catalog
    bad.path.write_bytes(bad.path.read_bytes()[:40])
    warnings = []
    con = open_audit(warn=warnings.append)
    assert {"seed_databases", "candidates"} <= set(list_views(con))
    assert con.execute("SELECT x FROM candidates").fetchall() == [(7,)]  # the good partition stays
    assert len(warnings) == 1 and str(bad.path) in warnings[0]
    # through the CLI: exit 0, one warning line naming the file, no traceback
    assert main(["audit", "views"]) == 0
    captured = capsys.readouterr()
    lines = [ln for ln in captured.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("warning:") and str(bad.path) in lines[0]
    assert "seed_databases" in captured.out and "Traceback" not in captured.err


def test_damaged_call_log_is_skipped(catalog, isolated_home, capsys):
    (isolated_home / "llm_calls.sqlite").write_bytes(b"SQLite format 3\x00" + b"\x07" * 3000)
    assert main(["audit", "sql", "SELECT count(*) AS c FROM seed_databases", "--format", "csv"]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip().splitlines() == ["c", "1"]
    assert "llm_calls.sqlite" in captured.err and "Traceback" not in captured.err


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM read_csv('/etc/passwd')",
        "COPY seed_databases TO '{home}/leak.csv'",
        "COPY (SELECT 1) TO '{artifact}' (FORMAT parquet, USE_TMP_FILE false)",
        "ATTACH '{home}/x.duckdb' AS x",
        "CREATE TABLE t AS SELECT 1",
        "SET enable_external_access = true",
        "INSTALL httpfs",
    ],
)
def test_audit_sql_cannot_touch_files(catalog, isolated_home, sql, capsys):
    good = catalog[0]
    before = good.path.read_bytes()
    query = sql.format(home=isolated_home, artifact=good.path)
    assert main(["audit", "sql", query]) == 1
    assert "Traceback" not in capsys.readouterr().err
    assert good.path.read_bytes() == before
    assert not (isolated_home / "leak.csv").exists() and not (isolated_home / "x.duckdb").exists()


def test_read_only_catalog_still_reads_views(catalog):
    con = open_audit()
    with pytest.raises(duckdb.PermissionException):  # external access is off, not any error
        con.execute("SELECT * FROM read_csv('/etc/passwd')").fetchall()
    assert con.execute("SELECT n FROM seed_databases").fetchall() == [(1,)]
    with pytest.raises(AuditQueryError):
        audit_query(con, "SELECT 1; SELECT 2")
