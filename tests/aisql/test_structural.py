"""Issue 19 item 1: the structural comparison stays sound wherever an AI call sits.

A brute-force reference evaluates gold and candidate under *every* AI valuation on small tables
(a real ``nlfilter`` UDF answering from a Python valuation); the comparison's ``equal`` and
``differ`` claims must hold in it. Plus the issue's cases verbatim on the movie data."""

import itertools

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.aisql.diffs import rows_match
from pipelines.aisql.rewrite import to_duckdb_tree
from pipelines.aisql.scenarios import visible_columns
from pipelines.aisql.structural import CANNOT, DIFFER, EQUAL, EQUAL_HERE, compare_structures, pair_calls
from resources.sql import open_duckdb_readonly
from tests.aisql.conftest import movie_query

# agreement proven (EQUAL) or checked on the test's own database only (EQUAL_HERE, #39: evidence)
SAME = (EQUAL, EQUAL_HERE)

ROWS = [(1, "a", "t1", "n1"), (2, "a", "t2", "n2"), (3, "b", "t1", "n1"), (4, "b", "t3", None), (5, "a", "t2", "n1")]
TXT = sorted({r[2] for r in ROWS})
NOTE = sorted({r[3] for r in ROWS if r[3] is not None})


@pytest.fixture(scope="module")
def small_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("structural") / "small.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t (id INTEGER, grp VARCHAR, txt VARCHAR, note VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", ROWS)
    con.close()
    return path


def reference_equal(db_path, gold: str, cand: str, opposite=()) -> bool:
    """Gold and candidate return the same bag under every valuation: the txt calls are one unknown f,
    the note calls another, g; a candidate call reads the negation when its column is in ``opposite``
    (prompts are ignored)."""
    state = {}

    def nlfilter(text, prompt):
        if text is None:
            return None
        if prompt.startswith("note"):
            v = state["g"][text]
            return (not v) if prompt == "note cand" and "note" in opposite else v
        v = state["f"][text]
        return (not v) if prompt.startswith("cand") and "txt" in opposite else v

    con = duckdb.connect(str(db_path), read_only=True)
    con.create_function("nlfilter", nlfilter, ["VARCHAR", "VARCHAR"], "BOOLEAN")
    order = " ORDER BY" in gold.upper().split("FROM")[-1]
    try:
        for fb in itertools.product((False, True), repeat=len(TXT)):
            for gb in itertools.product((False, True), repeat=len(NOTE)):
                state["f"], state["g"] = dict(zip(TXT, fb)), dict(zip(NOTE, gb))
                a = con.execute(gold).fetchall()
                b = con.execute(cand).fetchall()
                if not rows_match(a, b, order):
                    return False
        return True
    finally:
        con.close()


def decide(db_path, gold: str, cand: str, dialect: str = "thalamusdb", **kw):
    g, c = to_duckdb_tree(gold, dialect), to_duckdb_tree(cand, dialect)
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        tables = {"t": ["id", "grp", "txt", "note"]} if "table_columns" not in kw else kw.pop("table_columns")
        return compare_structures(
            con, g, c, pair_calls(g, c), ordered=g.args.get("order") is not None, table_columns=tables, **kw
        )
    finally:
        con.close()


# ----------------------------------------------------------------------------- predicate grammar


@st.composite
def predicates(draw, depth=2):
    """(gold text, candidate text) of one predicate; the candidate is the gold, an equivalent
    rewrite of it (commuted operands), and later maybe a mutation."""
    atoms = ["id = 2", "id > 2", "grp = 'a'", "AI", "AI", "NOTE"]
    if depth == 0 or draw(st.booleans()):
        a = draw(st.sampled_from(atoms))
        return a, a
    op = draw(st.sampled_from(["AND", "OR", "NOT", "EQFALSE"]))
    if op in ("NOT", "EQFALSE"):
        g, c = draw(predicates(depth - 1))
        return (f"NOT ({g})", f"NOT ({c})") if op == "NOT" else (f"({g}) = FALSE", f"({c}) = FALSE")
    (g1, c1), (g2, c2) = draw(predicates(depth - 1)), draw(predicates(depth - 1))
    if draw(st.booleans()):  # commute in the candidate
        c1, c2 = c2, c1
    return f"({g1}) {op} ({g2})", f"({c1}) {op} ({c2})"


def render(p: str, side: str, flip: bool) -> str:
    """One AI call on txt (the candidate may write the opposite prompt under NOT) and one on note."""
    call = f"(NOT nlfilter(txt, '{side} neg'))" if flip else f"nlfilter(txt, '{side} pos')"
    return p.replace("AI", call).replace("NOTE", f"nlfilter(note, 'note {side}')")


MUTATIONS = [
    lambda s: s,
    lambda s: s.replace("id = 2", "id = 3"),
    lambda s: s.replace(" OR ", " AND ", 1),
    lambda s: s.replace("grp = 'a'", "grp = 'b'"),
    lambda s: s.replace("NOT (", "(", 1),
]
SHAPES = [
    "SELECT id FROM t WHERE {p}",
    "SELECT grp FROM t WHERE {p}",
    "SELECT DISTINCT grp FROM t WHERE {p}",
    "SELECT COUNT(*) FROM t WHERE {p}",
    "SELECT SUM(CASE WHEN {p} THEN 1 ELSE 0 END) AS n FROM t",
    "SELECT grp, COUNT(*) FROM t WHERE {p} GROUP BY grp",
    "SELECT id FROM t AS o WHERE NOT EXISTS (SELECT 1 FROM t AS i WHERE i.grp = o.grp AND i.id <> o.id AND {p})",
    "SELECT id FROM t WHERE {p} ORDER BY id DESC",
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pred=predicates(),
    shape=st.sampled_from(SHAPES),
    mutation=st.sampled_from(range(len(MUTATIONS))),
    flip=st.booleans(),
    cand_shape=st.sampled_from([None, *SHAPES[:2]]),
)
def test_verdicts_agree_with_every_valuation(small_db, pred, shape, mutation, flip, cand_shape):
    g_pred, c_pred = pred
    gold = shape.format(p=render(g_pred, "gold", False))
    cand = (cand_shape or shape).format(p=render(MUTATIONS[mutation](c_pred), "cand", flip))
    v = decide(small_db, gold, cand)
    if v.verdict in SAME:
        opposite = {col for col, p in zip(v.polarity_inputs, v.polarity) if p == "opposite"}
        assert reference_equal(small_db, gold, cand, opposite), (gold, cand, v)
    elif v.verdict == DIFFER:
        for opposite in ((), ("txt",), ("note",), ("txt", "note")):
            assert not reference_equal(small_db, gold, cand, opposite), (gold, cand, v)
    else:  # the small tables are enumerable: only unpaired AI calls may leave it undecided
        assert "counterpart" in v.reason, (gold, cand, v)


# ----------------------------------------------------------------------------- the cases

PROMPT = "('Determine if the following movie review is clearly positive, review: ', r.reviewText)"
NEG = "('Determine if the following movie review is negative, review: ', r.reviewText)"


def movie_decide(movie_db, gold, cand):
    g, c = to_duckdb_tree(gold, "bigquery"), to_duckdb_tree(cand, "bigquery")

    con = open_duckdb_readonly(movie_db.path, threads=1)
    try:
        return compare_structures(
            con,
            g,
            c,
            pair_calls(g, c),
            ordered=g.args.get("order") is not None,
            table_columns={k: v for k, v in visible_columns(movie_db.path).items()},
        )
    finally:
        con.close()


def test_wrong_literal_under_or_is_caught(movie_db):
    gold = f"SELECT reviewId FROM movie.reviews AS r WHERE r.id = 'taken_3' OR AI.IF({PROMPT})"
    cand = f"SELECT reviewId FROM movie.reviews AS r WHERE r.id = 'taken_4' OR AI.IF({PROMPT})"
    v = movie_decide(movie_db, gold, cand)
    assert v.verdict == DIFFER and "F" in v.witness["valuation"]


def test_not_positive_equals_negative_with_opposite_polarity(movie_db):
    gold = f"SELECT COUNT(*) FROM movie.reviews AS r WHERE r.id = 'taken_3' AND NOT AI.IF({PROMPT})"
    cand = f"SELECT COUNT(*) FROM movie.reviews AS r WHERE r.id = 'taken_3' AND AI.IF({NEG})"
    v = movie_decide(movie_db, gold, cand)
    assert v.verdict in SAME and v.polarity == ["opposite"]


def test_equals_false_is_not(movie_db):
    gold = f"SELECT COUNT(*) FROM movie.reviews AS r WHERE r.id = 'taken_3' AND AI.IF({PROMPT}) = FALSE"
    cand = f"SELECT COUNT(*) FROM movie.reviews AS r WHERE NOT AI.IF({PROMPT}) AND r.id = 'taken_3'"
    v = movie_decide(movie_db, gold, cand)
    assert v.verdict in SAME and v.polarity == ["same"]


def test_case_positions_movie_q4_q8(sembench_root, movie_db):
    q4 = movie_query(sembench_root, "bigquery", "Q4")
    assert movie_decide(movie_db, q4, q4.replace("clearly positive", "positive")).verdict in SAME
    swapped = q4.replace("THEN 1 ELSE 0", "THEN 0 ELSE 1")  # counts the negatives: an equivalent only if
    v = movie_decide(movie_db, q4, swapped)  # the candidate's call meant 'negative'
    assert v.verdict in SAME and v.polarity == ["opposite"]
    wrong = q4.replace("THEN 1 ELSE 0", "THEN 1 ELSE 1")
    assert movie_decide(movie_db, q4, wrong).verdict == DIFFER
    q8 = movie_query(sembench_root, "bigquery", "Q8")
    assert movie_decide(movie_db, q8, q8.replace("'taken_3'", "'taken_4'")).verdict == DIFFER
    assert movie_decide(movie_db, q8, q8.replace("clearly positive", "positive")).verdict in SAME


ANIMALS_Q6 = """SELECT DISTINCT I.City AS city FROM animals_dataset.image_data_mm I
WHERE AI.IF(('Does this image contain a monkey? ', I.image), connection_id => 'x')
AND NOT EXISTS (SELECT * FROM animals_dataset.audio_data_mm A WHERE A.City = I.City
    AND AI.IF(('Does this audio contain a monkey sound? ', A.audio), connection_id => 'x'))"""


@pytest.fixture(scope="module")
def animals_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("animals") / "animals.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE SCHEMA animals_dataset")
    con.execute("CREATE TABLE animals_dataset.image_data_mm (City VARCHAR, image VARCHAR)")
    con.execute("CREATE TABLE animals_dataset.audio_data_mm (City VARCHAR, audio VARCHAR)")
    con.executemany(
        "INSERT INTO animals_dataset.image_data_mm VALUES (?, ?)", [("Paris", "i1"), ("Rome", "i2"), ("Oslo", "i1")]
    )
    con.executemany("INSERT INTO animals_dataset.audio_data_mm VALUES (?, ?)", [("Paris", "a1"), ("Oslo", "a2")])
    con.close()
    return path


def test_not_exists_keeps_its_meaning(animals_db):
    tables = {"animals_dataset.image_data_mm": ["City", "image"], "animals_dataset.audio_data_mm": ["City", "audio"]}
    v = decide(
        animals_db, ANIMALS_Q6, ANIMALS_Q6.replace("monkey sound", "monkey call"), "bigquery", table_columns=tables
    )
    assert v.verdict in SAME
    v = decide(animals_db, ANIMALS_Q6, ANIMALS_Q6.replace("NOT EXISTS", "EXISTS"), "bigquery", table_columns=tables)
    assert v.verdict == DIFFER
    v = decide(
        animals_db,
        ANIMALS_Q6,
        ANIMALS_Q6.replace("A.City = I.City", "A.City <> I.City"),
        "bigquery",
        table_columns=tables,
    )
    assert v.verdict == DIFFER


def test_extra_ai_condition_is_left_to_the_ai_layer(movie_db):
    gold = f"SELECT COUNT(*) FROM movie.reviews AS r WHERE r.id = 'taken_3' AND AI.IF({PROMPT})"
    cand = "SELECT COUNT(*) FROM movie.reviews AS r WHERE r.id = 'taken_3'"
    v = movie_decide(movie_db, gold, cand)
    assert v.verdict == CANNOT and "no counterpart" in v.reason
