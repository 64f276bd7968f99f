import sqlite3

import polars as pl
import pytest

from cli import main
from storage.artifacts import content_hash, latest_path, read_latest, write_version
from storage.audit import list_views, open_audit


def test_versions_are_immutable_and_content_addressed(isolated_home):
    v1 = write_version(pl.DataFrame({"a": [1, 2]}), "thing", "db1")
    v2 = write_version(pl.DataFrame({"a": [1, 2, 3]}), "thing", "db1")
    assert v1.path != v2.path and v1.path.exists() and v2.path.exists()
    assert v1.content_hash == content_hash(pl.DataFrame({"a": [1, 2]}))
    assert read_latest("thing", "db1").height == 3
    # writing v1's content again reuses the same file and makes it latest again
    v3 = write_version(pl.DataFrame({"a": [1, 2]}), "thing", "db1")
    assert v3.path == v1.path and latest_path("thing", "db1") == v1.path
    history = (v1.path.parent / "versions.jsonl").read_text().splitlines()
    assert len(history) == 3


def test_read_latest_missing_is_clear(isolated_home):
    with pytest.raises(FileNotFoundError, match="materialize it first"):
        read_latest("nothing", "db")


def test_audit_views_union_partitions_and_llm_calls(isolated_home):
    write_version(pl.DataFrame({"db_id": ["a"], "n": [1]}), "seed_databases", "a")
    write_version(pl.DataFrame({"db_id": ["b"], "n": [2], "extra": ["x"]}), "seed_databases", "b")
    con = sqlite3.connect(isolated_home / "llm_calls.sqlite")
    con.execute("CREATE TABLE llm_calls(call_id TEXT PRIMARY KEY, member TEXT, latency_ms REAL)")
    con.execute("INSERT INTO llm_calls VALUES ('k1', 'm', 12.5)")
    con.commit()
    con.close()
    audit = open_audit()
    assert {"seed_databases", "llm_calls"} <= set(list_views(audit))
    rows = audit.execute("SELECT db_id, n, extra FROM seed_databases ORDER BY db_id").fetchall()
    assert rows == [("a", 1, None), ("b", 2, "x")]
    assert audit.execute("SELECT call_id FROM llm_calls").fetchall() == [("k1",)]


def test_cli_audit_sql_formats(isolated_home, capsys):
    write_version(pl.DataFrame({"db_id": ["a", "b"], "n": [1, 2]}), "seed_databases", "x")
    assert main(["audit", "sql", "SELECT db_id, n FROM seed_databases ORDER BY db_id", "--format", "csv"]) == 0
    assert capsys.readouterr().out.strip().splitlines() == ["db_id,n", "a,1", "b,2"]
    assert main(["audit", "sql", "SELECT count(*) AS c FROM seed_databases", "--format", "json"]) == 0
    assert '"c": 2' in capsys.readouterr().out
    assert main(["audit", "sql", "SELECT * FROM nope"]) == 1
    err = capsys.readouterr().err
    assert "query failed" in err and "seed_databases" in err
