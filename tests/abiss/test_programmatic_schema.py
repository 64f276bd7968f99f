"""Schema analysis, the CLI, and robustness on databases with odd identifiers."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli import main
from pipelines.abiss.demo_db import write_demo_db
from pipelines.abiss.programmatic import generate_candidates
from pipelines.abiss.programmatic.schema_analysis import (
    CATEGORICAL,
    IDENTIFIER,
    NUMERIC,
    TEMPORAL,
    TEXT,
    analyze,
    quote_ident,
    sql_literal,
)
from resources.sql import execute_sql


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    return write_demo_db(tmp_path_factory.mktemp("demo") / "university.sqlite")


def test_column_roles(demo):
    a = analyze(demo)
    students = a.table("students")
    role = {c.name: c.role for c in students.columns}
    assert role["student_id"] == IDENTIFIER and role["department_id"] == IDENTIFIER
    assert role["credits"] == NUMERIC
    assert role["enrollment_date"] == TEMPORAL
    assert role["personal_email"] == TEXT
    assert a.table("courses").column("semester").role == CATEGORICAL
    assert a.table("courses").column("semester").values[:2] in (["Fall", "Spring"], ["Spring", "Fall"])
    assert a.table("departments").label == "name" and a.table("courses").label == "title"


def test_join_graph(demo):
    a = analyze(demo)
    assert [b for b, _, _ in a.bridges()] == ["student_courses"]
    path = a.path("students", "courses")
    assert [step[2] for step in path] == ["student_courses", "courses"]
    assert a.related("students", "courses")
    assert a.related("students", "departments")
    assert not a.related("professors", "courses")  # only siblings under departments
    assert not a.related("professors", "students")
    assert a.connected("professors", "courses")
    assert a.components() == [sorted(t.name for t in a.tables)]


def test_lexical_groups(demo):
    a = analyze(demo)
    heads = {(t, h): sorted(c.name for c in cols) for t, h, cols in a.head_noun_groups()}
    assert heads[("students", "email")] == ["institutional_email", "personal_email"]
    same = {(x.qualified, y.qualified) for x, y in a.same_named_columns()}
    assert ("student_courses.enrollment_date", "students.enrollment_date") in same


def test_quoting():
    assert quote_ident('we"ird') == '"we""ird"'
    assert sql_literal("O'Brien") == "'O''Brien'"
    assert sql_literal(None) == "NULL" and sql_literal(2) == "2"


def test_cli_json_lines(demo, capsys):
    rc = main(["generate", "programmatic", str(demo), "--json", "--per-subcategory", "1", "--seed", "7"])
    assert rc == 0
    lines = capsys.readouterr().out.strip().splitlines()
    records = [json.loads(line) for line in lines]
    assert {r["subcategory"] for r in records} == {
        "answerable",
        "answerable_with_evidence",
        "scope_ambiguity",
        "attachment_ambiguity",
        "lexical_overlap",
        "entity_ambiguity",
        "lexical_vagueness",
        "missing_user_knowledge",
        "conflicting_knowledge",
        "missing_entity",
        "missing_relationship",
        "missing_external_knowledge",
        "improper_question",
    }
    for r in records:
        assert r["generator"] == "programmatic" and r["seed"] == 7
        assert {"question", "style", "evidence", "sql", "hidden_knowledge", "feedback", "group_id"} <= set(r)


def test_cli_table_and_errors(demo, capsys, tmp_path):
    assert main(["generate", "programmatic", str(demo), "--per-subcategory", "1", "--style", "formal"]) == 0
    out = capsys.readouterr().out
    assert "13/13 subcategories" in out and "question" in out
    assert main(["generate", "programmatic", str(tmp_path / "missing.sqlite")]) == 2
    assert "error" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["generate"])  # the generator is required


_names = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\x00"), min_size=1, max_size=12
).filter(lambda s: s.strip() and not s.lower().startswith("sqlite_"))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=_names, parent=_names, cols=st.lists(_names, min_size=3, max_size=3, unique_by=str.lower))
def test_odd_identifiers_are_quoted(tmp_path_factory, table, parent, cols):
    """Arbitrary table/column names: every emitted SQL still executes (identifiers quoted)."""
    if table.lower() == parent.lower():
        return
    db = tmp_path_factory.mktemp("odd") / "odd.sqlite"
    con = sqlite3.connect(db)
    q = quote_ident
    con.execute(f"CREATE TABLE {q(parent)} (pid INTEGER PRIMARY KEY, {q(cols[0])} TEXT)")
    con.execute(
        f"CREATE TABLE {q(table)} (id INTEGER PRIMARY KEY, {q(cols[1])} TEXT, {q(cols[2])} INTEGER, "
        f"pid INTEGER REFERENCES {q(parent)}(pid))"
    )
    con.executemany(f"INSERT INTO {q(parent)} VALUES (?, ?)", [(i, f"p'{i}") for i in range(1, 5)])
    con.executemany(
        f"INSERT INTO {q(table)} VALUES (?, ?, ?, ?)",
        [(i, ["x", "y", 'z"q'][i % 3], i * 7 % 23, 1 + i % 4) for i in range(1, 31)],
    )
    con.commit()
    con.close()
    report = generate_candidates(db, per_subcategory=1, seed=0)
    for c in report.candidates:
        if c.sql:
            res = execute_sql(db, c.sql)
            assert res.ok and res.rows, (c.sql, res)
    assert not any("builder error" in why for why in report.skipped.values()), report.skipped
