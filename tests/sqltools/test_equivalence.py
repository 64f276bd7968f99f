"""Relaxed result equivalence (ABISS Appendix A): pure results, then queries on a temp database."""

import itertools
import sqlite3
import time
from collections import Counter
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.sqltools.equivalence import (
    EquivalenceVerdict,
    canonical_value,
    has_top_level_order_by,
    results_equivalent,
    sql_equivalent,
)
from resources.sql import QueryResult


def result(columns, rows):
    return QueryResult(list(columns), [tuple(r) for r in rows], 0.0)


PEOPLE = result(["name", "age"], [("Ann", 30), ("Bob", 25), ("Cy", 41)])


# ----------------------------------------------------------------------------- tolerated (1)-(4)


def test_identical_results_are_equivalent():
    verdict = results_equivalent(PEOPLE, PEOPLE)
    assert verdict == EquivalenceVerdict(True, "same rows", column_mapping=(0, 1))
    assert bool(verdict) is True


def test_row_order_is_ignored_by_default():
    shuffled = result(["name", "age"], [("Cy", 41), ("Ann", 30), ("Bob", 25)])
    assert results_equivalent(PEOPLE, shuffled).equivalent


def test_row_order_matters_when_order_sensitive():
    shuffled = result(["name", "age"], [("Cy", 41), ("Ann", 30), ("Bob", 25)])
    verdict = results_equivalent(PEOPLE, shuffled, order_sensitive=True)
    assert not verdict.equivalent
    assert "different order" in verdict.reason
    assert results_equivalent(PEOPLE, PEOPLE, order_sensitive=True).equivalent


def test_column_names_and_aliases_are_ignored():
    renamed = result(["who", "years"], PEOPLE.rows)
    assert results_equivalent(PEOPLE, renamed).equivalent


def test_column_order_is_ignored_and_mapping_reported():
    swapped = result(["age", "name"], [(a, n) for n, a in PEOPLE.rows])
    verdict = results_equivalent(PEOPLE, swapped)
    assert verdict.equivalent
    assert verdict.column_mapping == (1, 0)


def test_pred_superset_of_columns_is_equivalent():
    superset = result(["id", "age", "city", "name"], [(1, 30, "X", "Ann"), (2, 25, "Y", "Bob"), (3, 41, "X", "Cy")])
    verdict = results_equivalent(PEOPLE, superset)
    assert verdict.equivalent
    assert verdict.column_mapping == (3, 1)
    assert "2 extra column" in verdict.reason


def test_superset_is_not_symmetric():
    superset = result(["name", "age", "city"], [("Ann", 30, "X"), ("Bob", 25, "Y"), ("Cy", 41, "X")])
    assert results_equivalent(PEOPLE, superset).equivalent
    verdict = results_equivalent(superset, PEOPLE)
    assert not verdict.equivalent
    assert verdict.reason == "pred returns 2 column(s), gold needs 3"


def test_missing_column_is_not_equivalent():
    names_only = result(["name"], [("Ann",), ("Bob",), ("Cy",)])
    assert not results_equivalent(PEOPLE, names_only).equivalent


def test_same_column_values_but_different_row_pairing_is_not_equivalent():
    # Each pred column has a gold column's value multiset, but the rows pair them differently.
    gold = result(["a", "b"], [(1, "x"), (2, "y")])
    pred = result(["a", "b"], [(1, "y"), (2, "x")])
    verdict = results_equivalent(gold, pred)
    assert not verdict.equivalent
    assert "rows differ" in verdict.reason


def test_repeated_gold_column_needs_two_distinct_pred_columns():
    gold = result(["a", "a2"], [(1, 1), (2, 2)])
    assert not results_equivalent(gold, result(["a", "b"], [(1, "p"), (2, "q")])).equivalent
    assert results_equivalent(gold, result(["a", "b", "c"], [(1, "p", 1), (2, "q", 2)])).equivalent


def test_mapping_search_backtracks_past_a_wrong_first_candidate():
    # pred column 0 has the right values for gold column 0 but the wrong row pairing; column 2 works.
    gold = result(["k", "v"], [(1, "a"), (2, "b")])
    pred = result(["k_bad", "v", "k"], [(2, "a", 1), (1, "b", 2)])
    verdict = results_equivalent(gold, pred)
    assert verdict.equivalent
    assert verdict.column_mapping == (2, 1)


def test_many_interchangeable_columns_stay_fast():
    rows = [tuple((i + j) % 2 for j in range(12)) for i in range(50)]
    gold = result([f"g{j}" for j in range(12)], rows)
    pred_rows = [r + (0, 1, 0, 1) for r in rows]
    start = time.perf_counter()
    assert results_equivalent(gold, result([f"p{j}" for j in range(16)], pred_rows)).equivalent
    broken = [r[:-1] + (1 - r[-1],) if i == 0 else r for i, r in enumerate(rows)]
    assert not results_equivalent(gold, result([f"p{j}" for j in range(12)], broken)).equivalent
    # a guard against exponential search (~0.05 s here), loose enough for a loaded machine
    assert time.perf_counter() - start < 30.0


# ----------------------------------------------------------------------------- multisets / DISTINCT


def test_duplicates_count_distinct_dropped_with_duplicates_differs():
    gold = result(["country"], [("France",), ("France",), ("Italy",)])
    distinct = result(["country"], [("France",), ("Italy",)])
    verdict = results_equivalent(gold, distinct)
    assert not verdict.equivalent
    assert verdict.reason == "row count differs: gold 3, pred 2"
    assert not results_equivalent(distinct, gold).equivalent


def test_distinct_without_duplicates_is_equivalent():
    rows = [("France",), ("Italy",)]
    assert results_equivalent(result(["c"], rows), result(["c"], rows[::-1])).equivalent


def test_duplicate_multiplicities_must_match_at_equal_row_count():
    gold = result(["c"], [("a",), ("a",), ("b",)])
    pred = result(["c"], [("a",), ("b",), ("b",)])
    assert not results_equivalent(gold, pred).equivalent


# ----------------------------------------------------------------------------- NULLs, numbers, text


@pytest.mark.parametrize("other", ["", 0, "NULL", 0.0, False])
def test_null_only_matches_null(other):
    gold = result(["x"], [(None,), (1,)])
    assert not results_equivalent(gold, result(["x"], [(other,), (1,)])).equivalent
    assert results_equivalent(gold, result(["x"], [(1,), (None,)])).equivalent


def test_null_inclusion_disagreement_is_not_equivalent():
    gold = result(["name"], [("A",), ("B",)])
    pred = result(["name"], [("A",), ("B",), (None,)])
    assert not results_equivalent(gold, pred).equivalent


@pytest.mark.parametrize(
    ("gold_value", "pred_value"),
    [
        (1, 1.0),
        (6, 6.0),
        (0.1 + 0.2, 0.3),
        (1.0, 1.0000001),
        (2.5, Decimal("2.50")),
        (True, 1),
        (-0.0, 0),
        (float("nan"), float("nan")),
        (37.166666666666664, 37.16666666666667),
    ],
)
def test_numbers_compare_by_value_within_tolerance(gold_value, pred_value):
    assert results_equivalent(result(["v"], [(gold_value,)]), result(["v"], [(pred_value,)])).equivalent


@pytest.mark.parametrize(
    ("gold_value", "pred_value"),
    [(1.0, 1.00001), (37.1666667, 37.2), ("1", 1), (1, "1.0"), (2**60, 2**60 + 1), (float("inf"), float("-inf"))],
)
def test_numbers_outside_tolerance_or_of_other_type_differ(gold_value, pred_value):
    assert not results_equivalent(result(["v"], [(gold_value,)]), result(["v"], [(pred_value,)])).equivalent


def test_strings_are_not_case_folded_or_trimmed():
    gold = result(["c"], [("Paris",)])
    assert not results_equivalent(gold, result(["c"], [("paris",)])).equivalent
    assert not results_equivalent(gold, result(["c"], [("Paris ",)])).equivalent


def test_canonical_value_handles_unhashable_engine_values():
    assert canonical_value([1, 2.0, None]) == (1, 2, None)
    assert canonical_value({"b": 1.0, "a": [1]}) == (("a", (1,)), ("b", 1))
    assert canonical_value(bytearray(b"ab")) == b"ab"
    assert canonical_value(Decimal("3")) == 3 and isinstance(canonical_value(Decimal("3")), int)


# ----------------------------------------------------------------------------- empty results, inputs


def test_two_empty_results_are_equivalent():
    assert results_equivalent(result(["a"], []), result(["b", "c"], [])).equivalent


def test_empty_pred_with_fewer_columns_is_not_equivalent():
    assert not results_equivalent(result(["a", "b"], []), result(["a"], [])).equivalent


def test_empty_vs_non_empty_is_not_equivalent():
    assert not results_equivalent(result(["a"], []), result(["a"], [(1,)])).equivalent
    assert not results_equivalent(result(["a"], [(1,)]), result(["a"], [])).equivalent


def test_plain_columns_rows_pairs_are_accepted():
    assert results_equivalent((["a"], [(1,), (2,)]), (["z"], [(2,), (1,)])).equivalent


# ----------------------------------------------------------------------------- properties

VALUES = st.one_of(
    st.none(),
    st.integers(-5, 5),
    st.sampled_from([0.5, 2.25, -1.75, 1e-3]),
    st.text(alphabet="abAB ", max_size=3),
)


@st.composite
def results_with_width(draw, min_rows=0, width=None):
    width = width or draw(st.integers(1, 4))
    rows = draw(st.lists(st.tuples(*[VALUES] * width), min_size=min_rows, max_size=8))
    return result([f"c{i}" for i in range(width)], rows)


@settings(max_examples=150, deadline=None)
@given(results_with_width(), st.randoms(use_true_random=False))
def test_property_permuting_rows_and_columns_keeps_equivalence(gold, rnd):
    order = list(range(len(gold.columns)))
    rnd.shuffle(order)
    rows = [tuple(r[i] for i in order) for r in gold.rows]
    rnd.shuffle(rows)
    pred = result([f"x{i}" for i in order], rows)
    assert results_equivalent(gold, pred).equivalent


@settings(max_examples=150, deadline=None)
@given(results_with_width(), st.lists(VALUES, min_size=8, max_size=8), st.integers(0, 4))
def test_property_adding_a_pred_column_keeps_equivalence_but_not_the_reverse(gold, extra, position):
    position = min(position, len(gold.columns))
    rows = [r[:position] + (extra[i],) + r[position:] for i, r in enumerate(gold.rows)]
    columns = gold.columns[:position] + ["extra"] + gold.columns[position:]
    superset = result(columns, rows)
    assert results_equivalent(gold, superset).equivalent
    assert not results_equivalent(superset, gold).equivalent


@settings(max_examples=150, deadline=None)
@given(results_with_width(min_rows=1), st.data())
def test_property_changing_one_value_breaks_equivalence(gold, data):
    r = data.draw(st.integers(0, len(gold.rows) - 1))
    c = data.draw(st.integers(0, len(gold.columns) - 1))
    changed = [list(row) for row in gold.rows]
    changed[r][c] = "<value found nowhere else>"
    pred = result(gold.columns, changed)
    assert not results_equivalent(gold, pred).equivalent
    assert not results_equivalent(gold, pred, order_sensitive=True).equivalent


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 4), st.data())
def test_property_equal_width_equivalence_is_symmetric(width, data):
    a, b = data.draw(results_with_width(width=width)), data.draw(results_with_width(width=width))
    assert results_equivalent(a, b).equivalent == results_equivalent(b, a).equivalent


def _brute_force_equivalent(gold, pred, ordered):
    """Oracle: try every injective column assignment (widths are at most 5 here)."""
    canon = lambda rows: [tuple(canonical_value(v) for v in r) for r in rows]  # noqa: E731
    gold_rows, pred_rows = canon(gold.rows), canon(pred.rows)
    width = len(gold.columns)
    if len(pred.columns) < width or len(gold_rows) != len(pred_rows):
        return False
    for assignment in itertools.permutations(range(len(pred.columns)), width):
        projected = [tuple(r[p] for p in assignment) for r in pred_rows]
        if (projected == gold_rows) if ordered else (Counter(projected) == Counter(gold_rows)):
            return True
    return False


SMALL_VALUES = st.sampled_from([None, 0, 1, 1.0, "a", "A", ""])


@st.composite
def related_results(draw):
    """A gold result and a pred made from it by shuffles, an optional extra column and edits."""
    width = draw(st.integers(1, 3))
    gold_rows = draw(st.lists(st.tuples(*[SMALL_VALUES] * width), min_size=1, max_size=5))
    rows = [list(r) for r in gold_rows]
    if draw(st.booleans()):
        for r in rows:
            r.append(draw(SMALL_VALUES))
    order = draw(st.permutations(range(len(rows[0]))))
    rows = [[r[i] for i in order] for r in rows]
    if draw(st.booleans()):
        rows = draw(st.permutations(rows))
    for _ in range(draw(st.integers(0, 2))):
        r, c = draw(st.integers(0, len(rows) - 1)), draw(st.integers(0, len(rows[0]) - 1))
        rows[r][c] = draw(SMALL_VALUES)
    gold = result([f"g{i}" for i in range(width)], gold_rows)
    return gold, result([f"p{i}" for i in range(len(rows[0]))], rows)


@settings(max_examples=300, deadline=None)
@given(related_results(), st.booleans())
def test_property_verdict_matches_brute_force_oracle(pair, ordered):
    gold, pred = pair
    verdict = results_equivalent(gold, pred, order_sensitive=ordered)
    assert verdict.equivalent == _brute_force_equivalent(gold, pred, ordered)


# ----------------------------------------------------------------------------- queries


@pytest.fixture
def tiny_db(tmp_path):
    path = tmp_path / "tiny.sqlite"
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE person (id INTEGER PRIMARY KEY, name TEXT, city TEXT, age INTEGER);
        INSERT INTO person VALUES (1, 'Ann', 'Rome', 30), (2, 'Bob', 'Oslo', 25),
                                  (3, 'Cy', 'Rome', 41), (4, 'Di', NULL, 35);
        """
    )
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT a FROM t ORDER BY a", True),
        ("SELECT a FROM t", False),
        ("SELECT a FROM (SELECT a FROM t ORDER BY a) AS s", False),
        ("SELECT a FROM t WHERE a IN (SELECT a FROM u ORDER BY a LIMIT 3)", False),
        ("SELECT a FROM t UNION SELECT a FROM u ORDER BY a", True),
        ("WITH s AS (SELECT a FROM t) SELECT a FROM s ORDER BY a DESC", True),
        ("WITH s AS (SELECT a FROM t ORDER BY a) SELECT a FROM s", False),
        ("(SELECT a FROM t ORDER BY a)", True),
        ("SELECT row_number() OVER (ORDER BY a) FROM t", False),
        ("SELEC a FRM t ORDER", False),
    ],
)
def test_has_top_level_order_by(sql, expected):
    assert has_top_level_order_by(sql) is expected


def test_sql_equivalent_on_a_database(tiny_db):
    verdict = sql_equivalent(
        tiny_db, "SELECT name FROM person WHERE age > 28", "SELECT age, name AS n FROM person WHERE age >= 30"
    )
    assert verdict.equivalent and verdict.failed is None


def test_sql_equivalent_null_filter_disagreement(tiny_db):
    verdict = sql_equivalent(
        tiny_db, "SELECT name FROM person WHERE city IS NULL", "SELECT name FROM person WHERE city = ''"
    )
    assert not verdict.equivalent and verdict.failed is None


def test_sql_equivalent_order_sensitivity_needs_gold_order_by(tiny_db):
    gold_ordered = "SELECT name FROM person ORDER BY age"
    pred_desc = "SELECT name FROM person ORDER BY age DESC"
    assert sql_equivalent(tiny_db, gold_ordered, pred_desc).equivalent  # default: insensitive
    assert not sql_equivalent(tiny_db, gold_ordered, pred_desc, order_sensitive=True).equivalent
    # Without a top-level ORDER BY in gold, its order is arbitrary: the option does not apply.
    assert sql_equivalent(tiny_db, "SELECT name FROM person", pred_desc, order_sensitive=True).equivalent


def test_sql_equivalent_reports_which_query_failed(tiny_db):
    gold_bad = sql_equivalent(tiny_db, "SELECT nope FROM person", "SELECT name FROM person")
    assert (gold_bad.equivalent, gold_bad.failed) == (False, "gold")
    assert gold_bad.reason.startswith("gold failed: runtime:") and "nope" in gold_bad.reason
    pred_bad = sql_equivalent(tiny_db, "SELECT name FROM person", "SELEC name FROM person")
    assert (pred_bad.equivalent, pred_bad.failed) == (False, "pred")
    assert pred_bad.reason.startswith("pred failed: syntax:")
    forbidden = sql_equivalent(tiny_db, "SELECT name FROM person", "DELETE FROM person")
    assert forbidden.failed == "pred"


def test_sql_equivalent_missing_database_is_a_gold_failure(tmp_path):
    verdict = sql_equivalent(tmp_path / "absent.sqlite", "SELECT 1", "SELECT 1")
    assert verdict.failed == "gold" and "database not found" in verdict.reason


def test_sql_equivalent_on_duckdb(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    path = tmp_path / "tiny.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES (1, 'a'), (2, 'b'), (3, 'c')) v(k, s)")
    con.close()
    assert sql_equivalent(path, "SELECT s FROM t ORDER BY k", "SELECT k, s FROM t ORDER BY k DESC").equivalent
    assert not sql_equivalent(
        path, "SELECT s FROM t ORDER BY k", "SELECT k, s FROM t ORDER BY k DESC", order_sensitive=True
    ).equivalent
