"""#33 item 1: equivalence proofs by normal forms. Never a wrong "equal": every pair the normal
forms prove is run on random small databases (NULLs, duplicates, the queries' literals) under
random behaviours of the AI call, and must return the same bag of rows (in order under ORDER BY).
The rewrite families that are proven, and those that must never be, are pinned."""

import functools

import duckdb
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot import exp

from pipelines.aisql.diffs import has_top_level_order, rows_match
from pipelines.aisql.normal_form import schema_of
from pipelines.aisql.rewrite import ai_calls, to_duckdb_tree
from pipelines.aisql.rewrite_families import MOVIES, family_pairs
from pipelines.aisql.structural import same_normal_form

TYPES = {
    "movie.reviews": {"id": "VARCHAR", "reviewId": "BIGINT", "criticName": "VARCHAR", "reviewText": "VARCHAR"},
    "movie.movies": {"id": "VARCHAR", "title": "VARCHAR"},
}
SCHEMA = schema_of(TYPES)
PROVEN = {
    "alias_rename",
    "conjunct_order",
    "disjunct_order",
    "cte_inlined",
    "derived_table",
    "in_vs_or",
    "int_bound",
    "distinct_vs_group_by",
    "join_form",
    "in_subquery_vs_exists",
    "having_vs_subquery",
}


@functools.lru_cache(maxsize=4096)
def _proven_sql(gold: str, cand: str) -> bool:
    return same_normal_form(to_duckdb_tree(gold, "bigquery"), to_duckdb_tree(cand, "bigquery"), SCHEMA)


def _proven(p) -> bool:
    return _proven_sql(p.gold_sql, p.candidate_sql)


# text mutations, sound and unsound, composed at random: whatever the normal forms prove must hold
MUTATIONS = (
    (" > ", " >= "),
    (" >= ", " > "),
    ("SELECT DISTINCT ", "SELECT "),
    ("SELECT r.id, COUNT(*)", "SELECT DISTINCT r.id, COUNT(*)"),
    (" JOIN ", " LEFT JOIN "),
    ("GROUP BY r.id", "GROUP BY r.id, r.criticName"),
    ("COUNT(*)", "COUNT(r.reviewId)"),
    (" AND ", " OR "),
    ("NOT ", ""),
    ("LIMIT ", "LIMIT 1 + "),
    ("'taken_3'", "'barbie'"),
    ("IN (", "NOT IN ("),
    ("WHERE ", "WHERE NOT r.reviewId IS NULL AND "),
)


def test_the_listed_rewrite_families_are_proven_and_no_difference_is():
    for seed in range(5):
        for p in family_pairs(seed):
            proven = _proven(p)
            assert not (proven and not p.equivalent), p
            assert proven == (p.family in PROVEN), p


def _with_behaviour(sql: str, salt: int) -> str:
    """The query with its AI call replaced by one fixed (salted) function of the review text."""
    tree = to_duckdb_tree(sql, "bigquery")
    for call in ai_calls(tree):
        col = next(call.find_all(exp.Column)).copy()
        call.replace(exp.condition(f"(hash({col.sql('duckdb')}, {salt}) % 3 <> 0)"))
    return tree.sql("duckdb")


ids = st.sampled_from([*MOVIES, "other", None])
texts = st.sampled_from(["great", "awful", "fine", None])
reviews = st.lists(st.tuples(ids, st.integers(1, 6) | st.none(), st.sampled_from(["a", "b", None]), texts), max_size=12)
movies = st.lists(st.tuples(ids, st.sampled_from(["T1", "T2", None])), max_size=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 50), rev=reviews, mov=movies, salt=st.integers(0, 10_000))
def test_proven_pairs_return_the_same_rows_on_random_databases(seed, rev, mov, salt):
    con = duckdb.connect()
    con.execute("CREATE SCHEMA movie")
    con.execute("CREATE TABLE movie.reviews (id VARCHAR, reviewId BIGINT, criticName VARCHAR, reviewText VARCHAR)")
    con.execute("CREATE TABLE movie.movies (id VARCHAR, title VARCHAR)")
    if rev:
        con.executemany("INSERT INTO movie.reviews VALUES (?, ?, ?, ?)", rev)
    if mov:
        con.executemany("INSERT INTO movie.movies VALUES (?, ?)", mov)
    for p in family_pairs(seed):
        if not _proven(p):
            continue
        gold = con.execute(_with_behaviour(p.gold_sql, salt)).fetchall()
        cand = con.execute(_with_behaviour(p.candidate_sql, salt)).fetchall()
        ordered = has_top_level_order(to_duckdb_tree(p.gold_sql, "bigquery").sql("duckdb"))
        assert rows_match(gold, cand, ordered), (p.family, gold, cand)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 50),
    which=st.integers(0, 100),
    picks=st.lists(st.integers(0, len(MUTATIONS) - 1), min_size=1, max_size=3),
    rev=reviews,
    salt=st.integers(0, 10_000),
)
def test_random_mutations_are_never_proven_wrongly(seed, which, picks, rev, salt):
    pairs = family_pairs(seed)
    p = pairs[which % len(pairs)]
    cand = p.candidate_sql
    for i in picks:
        a, b = MUTATIONS[i]
        cand = cand.replace(a, b, 1)
    try:
        proven = _proven_sql(p.gold_sql, cand)
    except Exception:  # noqa: BLE001 - a mutation that no longer parses proves nothing
        return
    if not proven:
        return
    con = duckdb.connect()
    con.execute("CREATE SCHEMA movie")
    con.execute("CREATE TABLE movie.reviews (id VARCHAR, reviewId BIGINT, criticName VARCHAR, reviewText VARCHAR)")
    con.execute("CREATE TABLE movie.movies (id VARCHAR, title VARCHAR)")
    con.execute("INSERT INTO movie.movies VALUES ('taken_3', 'T'), ('barbie', NULL), (NULL, 'N')")
    if rev:
        con.executemany("INSERT INTO movie.reviews VALUES (?, ?, ?, ?)", rev)
    gold = con.execute(_with_behaviour(p.gold_sql, salt)).fetchall()
    other = con.execute(_with_behaviour(cand, salt)).fetchall()
    ordered = has_top_level_order(to_duckdb_tree(p.gold_sql, "bigquery").sql("duckdb"))
    assert rows_match(gold, other, ordered), (p.family, cand, gold, other)


def test_normal_forms_define_every_alias_they_use():
    """The alias renaming is complete: no column refers to an alias the normal form does not define
    (a grouped derived table becomes a CTE whose table alias is a bare identifier)."""
    from pipelines.aisql.normal_form import normal_form
    from pipelines.aisql.structural import _symbols, pair_calls, symbolic

    extra = (
        "SELECT m.title, q.c FROM movie.movies AS m LEFT JOIN (SELECT r.id AS id, COUNT(*) AS c "
        "FROM movie.reviews AS r WHERE AI.IF(('p: ', r.reviewText)) GROUP BY r.id) AS q ON q.id = m.id"
    )
    for sql in [extra, *(q for p in family_pairs(0) for q in (p.gold_sql, p.candidate_sql))]:
        tree = to_duckdb_tree(sql, "bigquery")
        syms, _, _, _ = _symbols(tree, tree, pair_calls(tree, tree))
        form = normal_form(symbolic(tree, syms), SCHEMA)
        assert form is not None, sql
        parsed = sqlglot.parse_one(form, read="duckdb")
        defined = {t.alias_or_name for t in parsed.find_all(exp.Table)} | {
            s.alias for s in parsed.find_all(exp.Subquery) if s.alias
        }
        assert {c.table for c in parsed.find_all(exp.Column) if c.table} <= defined, form
