"""SQLite's own parser as the fast syntax check of imported gold SQL (issue 23 item 9): it agrees
with sqlglot on real gold queries, refuses broken ones, and compiling never runs a statement."""

import json
from pathlib import Path

import pytest
import sqlglot

from pipelines.sqltools.syntax import sqlite_parses

SPIDER = Path(__file__).resolve().parents[3] / "shared" / "data" / "spider" / "dev.json"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT count(*) FROM singer",
        "SELECT T1.a FROM t AS T1 JOIN u AS T2 ON T1.id = T2.id WHERE T2.x > 3",
        "WITH c AS (SELECT 1 AS x) SELECT x FROM c",
        "SELECT a FROM t EXCEPT SELECT b FROM u;",
        "SELECT upper(name) FROM t -- a comment",
        "SELECT no_such_function(1)",
    ],
)
def test_valid_statements_parse_whatever_their_names(sql):
    assert sqlite_parses(sql)


@pytest.mark.parametrize(
    "sql",
    [
        "SELEC name FROM t",
        "SELECT a FROM t WHERE",
        "SELECT (SELECT x FROM t) FROM u WHERE ((",
        "SELECT * FROM t WHERE a = 'x",
        "SELECT 1; SELECT 2",
        "",
        "SELECT 1\x00",
    ],
)
def test_broken_or_several_statements_do_not(sql):
    assert not sqlite_parses(sql)


def test_compiling_never_runs_or_writes(tmp_path):
    target = tmp_path / "attached.db"
    for sql in (f"ATTACH '{target}' AS x", "PRAGMA writable_schema = 1", "CREATE TABLE t (a)"):
        assert not sqlite_parses(sql), sql  # not a read: the caller decides another way (sqlglot)
    for sql in (f"VACUUM INTO '{target}'", f"SELECT writefile('{target}', 'x')", "SELECT load_extension('x')"):
        sqlite_parses(sql)  # may parse: they are compiled (EXPLAIN), never run
    assert not target.exists()
    assert sqlite_parses("SELECT 1")  # the shared connection is still usable


@pytest.mark.skipif(not SPIDER.is_file(), reason="needs ../shared/data (Spider dev)")
def test_agrees_with_sqlglot_on_spider_gold():
    for rec in json.loads(SPIDER.read_text())[:300]:
        sqlglot.parse_one(rec["query"], read="sqlite")
        assert sqlite_parses(rec["query"]), rec["query"]
