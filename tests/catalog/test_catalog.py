import sqlite3

import duckdb
import pytest

from pipelines.sqltools.schema_context import render_schema_context
from resources.catalog import BadDatabaseError, Catalog, discover, inspect_database


def make_sqlite(path, ddl="CREATE TABLE a(id INTEGER PRIMARY KEY, x TEXT); INSERT INTO a VALUES (1,'one');"):
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    con.executescript(ddl)
    con.commit()
    con.close()
    return path


def test_demo_db_schema_keys_and_counts(demo_db_path):
    info = inspect_database(demo_db_path)
    assert info.db_id == "university" and info.engine == "sqlite"
    names = {t.name for t in info.tables}
    assert names == {"departments", "students", "professors", "courses", "student_courses"}
    sc = info.table("student_courses")
    assert sc.primary_key == ["student_id", "course_id"]
    assert {(f.column, f.ref_table, f.ref_column) for f in sc.foreign_keys} == {
        ("student_id", "students", "student_id"),
        ("course_id", "courses", "course_id"),
    }
    assert info.table("students").row_count == 300
    assert info.table("students").column("credits").type == "INTEGER"
    assert len(info.sha256) == 64


def test_schema_context_has_ddl_then_five_sample_rows(demo_db_path):
    text = render_schema_context(inspect_database(demo_db_path))
    for table in ("departments", "students", "professors", "courses", "student_courses"):
        assert f"CREATE TABLE {table}" in text
        assert f"/* 5 sample rows from {table}:" in text
    block = text.split("/* 5 sample rows from students:")[1].split("*/")[0].strip().splitlines()
    assert block[0].startswith("student_id | first_name")
    assert len(block) == 1 + 5


def test_discover_spider_layout_and_reports_broken(tmp_path):
    root = tmp_path / "dbs"
    make_sqlite(root / "good_one" / "good_one.sqlite")
    make_sqlite(root / "other" / "other.sqlite", "CREATE TABLE b(y INT);")
    (root / "text").mkdir()
    (root / "text" / "text.sqlite").write_text("this is not a database")
    (root / "empty").mkdir()
    (root / "empty" / "empty.sqlite").write_bytes(b"")
    (root / "notables").mkdir()
    sqlite3.connect(root / "notables" / "notables.sqlite").close()  # 0 bytes -> empty
    corrupt = root / "corrupt" / "corrupt.sqlite"
    corrupt.parent.mkdir()
    corrupt.write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    (root / "readme.txt").write_text("ignored")

    found, skipped = discover(root)
    assert sorted(i.db_id for i in found) == ["good_one", "other"]
    reasons = {s.path.split("/")[-1]: s.reason for s in skipped}
    assert set(reasons) == {"text.sqlite", "empty.sqlite", "notables.sqlite", "corrupt.sqlite"}
    assert "not a SQLite database" in reasons["text.sqlite"]
    assert "empty" in reasons["empty.sqlite"]
    assert reasons["corrupt.sqlite"]


def test_discover_real_spider(spider_dbs):
    root = spider_dbs[0].parent.parent
    found, skipped = discover(root)
    assert len(found) == len(spider_dbs)
    assert all(i.tables for i in found)
    assert {i.db_id for i in found} >= {"concert_singer", "world_1"}


def test_duckdb_inspection(tmp_path):
    path = tmp_path / "shop.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE c(id INTEGER PRIMARY KEY, name VARCHAR)")
    con.execute("CREATE TABLE o(id INTEGER PRIMARY KEY, c_id INTEGER REFERENCES c(id), total DOUBLE)")
    con.execute("INSERT INTO c VALUES (1,'x'),(2,'y')")
    con.execute("INSERT INTO o VALUES (1,1,9.5)")
    con.close()
    info = inspect_database(path)
    assert info.engine == "duckdb"
    assert info.table("o").foreign_keys[0].ref_table == "c"
    assert info.table("c").primary_key == ["id"] and info.table("c").row_count == 2
    assert "CREATE TABLE c" in render_schema_context(info)


def test_bad_database_errors(tmp_path):
    with pytest.raises(BadDatabaseError, match="not a file"):
        inspect_database(tmp_path / "missing.sqlite")
    empty = tmp_path / "e.sqlite"
    empty.write_bytes(b"")
    with pytest.raises(BadDatabaseError, match="empty"):
        inspect_database(empty)


def test_catalog_register_persists_and_errors_clearly(tmp_path):
    db = make_sqlite(tmp_path / "x" / "My DB.sqlite")
    cat = Catalog(tmp_path / "catalog.json")
    info = cat.register(db)
    assert info.db_id == "My_DB"  # sanitized partition key
    assert Catalog(tmp_path / "catalog.json").get("My_DB").path == str(db.resolve())
    with pytest.raises(KeyError, match="not registered"):
        cat.get("nope")
    cat.remove("My_DB")
    assert cat.ids() == []
