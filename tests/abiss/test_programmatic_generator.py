"""Programmatic candidate generator (issue 4): verification, coverage and determinism.

Runs on the embedded demo database (built in tmp_path), on every Spider dev database under
``../shared/data/spider/database`` and on BIRD ``superhero``; the shared-data tests skip with a
reason when the data is absent.
"""

from __future__ import annotations

import json
import random
import sqlite3
from collections import Counter, defaultdict, deque
from pathlib import Path

import pytest

from pipelines.abiss.demo_db import DDL, build_rows, write_demo_db
from pipelines.abiss.programmatic import GENERATOR, Candidate, difficulty_of, generate_candidates
from pipelines.abiss.programmatic.builders.base import Absence, BuildContext, Draft, Reading
from pipelines.abiss.programmatic.generator import _verify
from pipelines.abiss.programmatic.schema_analysis import analyze
from pipelines.abiss.taxonomy import DIFFICULTY_BY_ID, STYLE_BY_ID, SUBCATEGORIES, SUBCATEGORY_BY_ID
from pipelines.sqltools.difficulty import relabel_difficulty
from resources.catalog import inspect_database
from resources.sql import execute_sql

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
SPIDER_DBS = sorted((SHARED / "spider" / "database").glob("*/*.sqlite"))
SUPERHERO = SHARED / "bird" / "dev_databases" / "superhero" / "superhero.sqlite"
SHARED_DBS = SPIDER_DBS + ([SUPERHERO] if SUPERHERO.is_file() else [])
ALL_IDS = [s.id for s in SUBCATEGORIES]


def _multiset(rows):
    return Counter(tuple(repr(v) for v in r) for r in rows)


def _fk_edges(db_path) -> list[tuple[str, str]]:
    info = inspect_database(db_path)
    names = {t.name.lower(): t.name for t in info.tables}
    return [
        (t.name, names[fk.ref_table.lower()])
        for t in info.tables
        for fk in t.foreign_keys
        if fk.ref_table.lower() in names
    ]


def _relationship_path(db_path, a: str, b: str) -> bool:
    """Independent re-implementation: a FK path A (down)* (up)* B (see SchemaAnalysis.related)."""
    edges = _fk_edges(db_path)
    seen = {(a, 0)}
    queue = deque([(a, 0)])
    while queue:
        node, phase = queue.popleft()
        for src, dst in edges:
            moves = []
            if src == node and dst != node:
                moves.append((dst, 1))
            if phase == 0 and dst == node and src != node:
                moves.append((src, 0))
            for nxt, ph in moves:
                if nxt == b:
                    return True
                if (nxt, ph) not in seen:
                    seen.add((nxt, ph))
                    queue.append((nxt, ph))
    return False


def check_report(db_path, report) -> None:
    """The hard requirements of the issue, checked independently of the generator's own code."""
    info = inspect_database(db_path)
    names = [t.name.lower() for t in info.tables] + [c.name.lower() for t in info.tables for c in t.columns]
    squashed = [n.replace("_", "") for n in names]
    ids = [c.candidate_id for c in report.candidates]
    assert len(ids) == len(set(ids)), "candidate ids must be unique"
    groups: dict[str, list[Candidate]] = defaultdict(list)
    for c in report.candidates:
        groups[c.group_id].append(c)
        sub = SUBCATEGORY_BY_ID[c.subcategory]
        assert c.group == sub.group.value
        assert c.generator == GENERATOR == "programmatic"
        assert c.style in STYLE_BY_ID
        assert c.question.strip()
        assert c.builder
        if sub.group.value == "unanswerable":
            assert c.sql is None and c.difficulty is None and c.feedback and c.hidden_knowledge is None
            assert c.interpretation_index is None
            claim = report.absence_claims[c.candidate_id]
            if claim["kind"] == "terms":
                for term in claim["terms"]:
                    assert not any(term.replace(" ", "") in n for n in squashed), (c.question, term)
            elif claim["kind"] == "relationship":
                a, b = claim["tables"]
                assert a.lower() in names and b.lower() in names
                assert not _relationship_path(db_path, a, b), (c.question, a, b)
            else:
                assert claim["kind"] == "improper"
        else:
            assert c.sql and c.difficulty in DIFFICULTY_BY_ID and c.feedback is None
            res = execute_sql(db_path, c.sql)
            assert res.ok, (c.sql, res)
            assert len(res.rows) >= 1, c.sql
        if sub.group.value == "ambiguous":
            assert c.hidden_knowledge and c.interpretation_index in (0, 1)
        else:
            assert c.interpretation_index is None
        if sub.has_evidence:
            assert c.evidence
        if sub.id == "answerable":
            assert c.evidence is None and c.hidden_knowledge is None
    for gid, members in groups.items():
        sub = SUBCATEGORY_BY_ID[members[0].subcategory]
        if sub.group.value == "ambiguous":
            assert len(members) == 2, gid
            assert sorted(m.interpretation_index for m in members) == [0, 1]
            assert members[0].question == members[1].question
            assert members[0].hidden_knowledge != members[1].hidden_knowledge
            r0, r1 = (execute_sql(db_path, m.sql) for m in members)
            assert _multiset(r0.rows) != _multiset(r1.rows), (members[0].question, members[0].sql, members[1].sql)
        else:
            assert len(members) == 1
    for sub, why in report.skipped.items():
        assert sub in SUBCATEGORY_BY_ID and why
        assert "builder error" not in why, why
        assert sub not in report.covered


# ------------------------------------------------------------------------------ demo DB


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory) -> Path:
    return write_demo_db(tmp_path_factory.mktemp("demo") / "university.sqlite")


@pytest.fixture(scope="module")
def demo_report(demo_db):
    return generate_candidates(demo_db, per_subcategory=2, seed=0)


def test_demo_covers_all_13_subcategories(demo_report):
    assert demo_report.covered == ALL_IDS
    assert demo_report.skipped == {}


def test_demo_report_passes_all_checks(demo_db, demo_report):
    check_report(demo_db, demo_report)


def test_demo_counts_per_subcategory(demo_report):
    per = Counter(c.subcategory for c in demo_report.candidates)
    for s in SUBCATEGORIES:
        expected = 4 if s.group.value == "ambiguous" else 2  # two questions; two readings each
        if s.id == "conflicting_knowledge":
            # Issue #41 item 2: a concept needs an adjective fitting what its column measures; of the
            # demo's measures only the budget has one ("big-budget"), so one question, not two
            # ("notable students" by credits was an invented concept a reader rejects).
            expected = 2
        assert per[s.id] == expected, (s.id, per[s.id])


def test_demo_has_paper_examples(demo_db):
    """The paper's own examples are within reach on its database."""
    report = generate_candidates(demo_db, per_subcategory=6, seed=0)
    sqls = " ".join(c.sql or "" for c in report.candidates)
    assert (
        "personal_email" in sqls
        or "institutional_email" in sqls
        or any(c.subcategory == "lexical_overlap" for c in report.candidates)
    )
    ent = [c for c in report.candidates if c.subcategory == "entity_ambiguity"]
    assert any("student_courses" in c.sql and "enrollment_date" in c.sql for c in ent)
    rel = [c for c in report.candidates if c.subcategory == "missing_relationship"]
    assert rel and all("administrator" in c.feedback for c in rel)


def test_same_seed_same_output(demo_db, demo_report):
    again = generate_candidates(demo_db, per_subcategory=2, seed=0)
    assert [c.to_dict() for c in again.candidates] == [c.to_dict() for c in demo_report.candidates]
    assert again.skipped == demo_report.skipped
    assert json.dumps(again.to_dict(), sort_keys=True, default=str) == json.dumps(
        demo_report.to_dict(), sort_keys=True, default=str
    )


def test_other_seed_changes_output(demo_db, demo_report):
    other = generate_candidates(demo_db, per_subcategory=2, seed=1)
    assert [c.question for c in other.candidates] != [c.question for c in demo_report.candidates]
    check_report(demo_db, other)


def test_styles_and_subcategory_filters(demo_db):
    report = generate_candidates(
        demo_db, per_subcategory=3, seed=5, styles=["colloquial"], subcategories=["answerable", "lexical_vagueness"]
    )
    assert {c.subcategory for c in report.candidates} == {"answerable", "lexical_vagueness"}
    assert {c.style for c in report.candidates} == {"colloquial"}
    with pytest.raises(ValueError):
        generate_candidates(demo_db, styles=["shouty"])
    with pytest.raises(KeyError):
        generate_candidates(demo_db, subcategories=["nope"])
    assert generate_candidates(demo_db, per_subcategory=0).candidates == []


def test_styles_rotate_and_questions_vary(demo_db):
    report = generate_candidates(demo_db, per_subcategory=6, seed=2)
    assert len({c.style for c in report.candidates}) == 6
    answerable = [c.question for c in report.candidates if c.subcategory == "answerable"]
    openings = {q.split()[0].lower() for q in answerable}
    assert len(openings) >= 3, answerable  # not one fixed sentence
    for c in report.candidates:
        if c.style == "interrogative" and c.subcategory not in ("improper_question",):
            assert c.question.endswith("?"), c.question


def test_candidate_ids_are_stable_hashes(demo_db, demo_report):
    c = demo_report.candidates[0]
    assert len(c.candidate_id) == 16 and int(c.candidate_id, 16) >= 0
    d = c.to_dict()
    for key in (
        "candidate_id",
        "group_id",
        "db_id",
        "subcategory",
        "group",
        "style",
        "difficulty",
        "question",
        "evidence",
        "sql",
        "hidden_knowledge",
        "feedback",
        "interpretation_index",
        "generator",
        "builder",
        "seed",
    ):
        assert key in d


# ------------------------------------------------------------------------------ verification


def _ctx(db_path, sub="missing_entity"):
    return BuildContext(analyze(db_path), random.Random(0), ["formal"], sub)


def test_verifier_rejects_false_absence_claims(demo_db):
    ctx = _ctx(demo_db)
    draft = Draft(
        "missing_entity",
        "t",
        "What is the email of student 3?",
        "formal",
        feedback="No column stores an email of students; ask the administrator.",
        absence=Absence("terms", terms=("email",)),
    )
    assert _verify(draft, ctx) is not None
    draft.absence = Absence("terms", terms=("shoe",))
    assert _verify(draft, ctx) is None
    rel = Draft(
        "missing_relationship",
        "t",
        "Which courses does professor Anna teach?",
        "formal",
        feedback="No table links professors to courses.",
        absence=Absence("relationship", tables=("students", "courses")),
    )
    assert _verify(rel, _ctx(demo_db, "missing_relationship")) == "tables are related"
    rel.absence = Absence("relationship", tables=("professors", "courses"))
    assert _verify(rel, _ctx(demo_db, "missing_relationship")) is None


def test_verifier_rejects_equal_or_empty_readings(demo_db):
    ctx = _ctx(demo_db, "lexical_vagueness")
    same = Draft(
        "lexical_vagueness",
        "t",
        "q",
        "formal",
        readings=[
            Reading("SELECT name FROM departments ORDER BY name", "a"),
            Reading("SELECT name FROM departments ORDER BY name DESC", "b"),
        ],
    )
    assert _verify(same, ctx) == "readings return the same result"
    empty = Draft(
        "lexical_vagueness",
        "t",
        "q",
        "formal",
        readings=[Reading("SELECT name FROM departments", "a"), Reading("SELECT name FROM departments WHERE 0", "b")],
    )
    assert _verify(empty, ctx) is not None
    broken = Draft("answerable", "t", "q", "formal", sql="SELECT nope FROM nowhere")
    assert _verify(broken, _ctx(demo_db, "answerable")).startswith("sql failed")


def test_difficulty_rule():
    """The generator uses the project's one difficulty rule (the shared sqlglot relabeller)."""
    assert difficulty_of(None) is None
    assert difficulty_of("") is None
    assert difficulty_of('SELECT "a" FROM "t" WHERE "b" = 1') == "simple"
    assert difficulty_of('SELECT T1."a" FROM "t" AS T1 JOIN "u" AS T2 ON T1.x = T2.y') == "moderate"
    assert difficulty_of("SELECT a, COUNT(*) FROM t GROUP BY a") == "moderate"
    assert difficulty_of("SELECT a FROM t GROUP BY a HAVING COUNT(*) > (SELECT 1)") == "complex"
    for sql in (
        "SELECT a FROM t UNION ALL SELECT b FROM u",
        "SELECT T1.a FROM t AS T1 JOIN u AS T2 ON T1.x = T2.y JOIN v AS T3 ON T2.z = T3.w WHERE T3.k > 1 ORDER BY 1 LIMIT 3",
        "SELECT a FROM t WHERE (",  # unparsable: keyword counting, as the relabeller does
    ):
        assert difficulty_of(sql) == relabel_difficulty(sql)


def test_candidate_difficulty_is_the_shared_rule(demo_report):
    for c in demo_report.candidates:
        assert c.difficulty == (relabel_difficulty(c.sql) if c.sql else None), c.sql


def test_database_without_rows_or_links(tmp_path):
    """A bare database: builders that cannot work say why; nothing unverified is emitted."""
    db = tmp_path / "bare.sqlite"
    con = sqlite3.connect(db)
    con.executescript(
        "CREATE TABLE things (id INTEGER PRIMARY KEY, label TEXT);"
        "CREATE TABLE empty_table (id INTEGER PRIMARY KEY, note TEXT);"
        "INSERT INTO things VALUES (1, 'a'), (2, 'b');"
    )
    con.close()
    report = generate_candidates(db, per_subcategory=2, seed=0)
    check_report(db, report)
    assert "improper_question" in report.covered
    assert set(report.covered) | set(report.skipped) == set(ALL_IDS)


def test_duckdb_database(tmp_path, demo_db):
    """The same generator works on a DuckDB copy of the demo (SQL valid for both engines)."""
    duckdb = pytest.importorskip("duckdb")

    path = tmp_path / "university.duckdb"
    con = duckdb.connect(str(path))
    con.execute(DDL)
    for table, rows in build_rows().items():
        con.executemany(f"INSERT INTO {table} VALUES ({','.join('?' * len(rows[0]))})", rows)
    con.close()
    report = generate_candidates(path, per_subcategory=2, seed=0)
    check_report(path, report)
    assert len(report.covered) >= 11, report.skipped


# ------------------------------------------------------------------------------ shared data


@pytest.fixture(scope="module")
def shared_reports():
    if not SHARED_DBS:
        pytest.skip(f"Spider/BIRD databases not found under {SHARED}")
    return {p: generate_candidates(p, per_subcategory=2, seed=0) for p in SHARED_DBS}


@pytest.mark.shared_data
@pytest.mark.parametrize(
    "db_path",
    SHARED_DBS or [pytest.param(None, marks=pytest.mark.skip(reason=f"no Spider/BIRD data under {SHARED}"))],
    ids=lambda p: p.stem if p else "none",
)
def test_shared_database_candidates_verify(db_path, shared_reports):
    report = shared_reports[db_path]
    assert report.candidates, report.skipped
    check_report(db_path, report)


@pytest.mark.shared_data
@pytest.mark.parametrize(
    "db_path",
    SHARED_DBS or [pytest.param(None, marks=pytest.mark.skip(reason=f"no Spider/BIRD data under {SHARED}"))],
    ids=lambda p: p.stem if p else "none",
)
def test_shared_database_deterministic(db_path, shared_reports):
    again = generate_candidates(db_path, per_subcategory=2, seed=0)
    assert [c.to_dict() for c in again.candidates] == [c.to_dict() for c in shared_reports[db_path].candidates]
    assert again.skipped == shared_reports[db_path].skipped


@pytest.mark.shared_data
def test_shared_coverage_average_near_nine(shared_reports):
    # 9.0 before issue #35; the subcategories lost since were defective questions, now refused: a
    # missing relationship the data refutes ("airlines linked to the airport 'Municipal'" while
    # flights.Airline holds airlines.uid), EU membership of area-code states 'NJ', and scope questions
    # whose two readings return the same values (bench_defects: projection_only_readings, 10 of 10
    # scope questions on Spider dev). 8.4 kept the bar without them.
    # Issue #41 lowered it to 7.8 on purpose, for items a careful annotator rejected: conflicting
    # definitions by a concept no column measures ("standout stations" by latitude, "notable singers" by
    # age), missing relationships that a chain of relationships or the data refutes (superpowers and
    # attributes both belong to heroes), and collective scope readings that divided by the linked rows
    # only (most named sets have a member without linked rows, so nothing is shared by all), and
    # concepts on a school year read as a score ("top-rated high-schoolers" by grade 9-12). 7.85 measured.
    if len(SPIDER_DBS) == 0:
        pytest.skip(f"Spider dev databases not found under {SHARED / 'spider' / 'database'}")
    if not SUPERHERO.is_file():
        pytest.skip(f"BIRD superhero not found at {SUPERHERO}")
    covered = {p.stem: len(r.covered) for p, r in shared_reports.items()}
    average = sum(covered.values()) / len(covered)
    assert average >= 7.8, covered
    assert len(shared_reports) == len(SPIDER_DBS) + 1
