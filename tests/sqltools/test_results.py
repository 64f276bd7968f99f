"""The one result comparison (pipelines.sqltools.results): modes, explicit tolerances, ORDER BY rule."""

from decimal import Decimal

import pytest

from pipelines.sqltools.results import (
    AISQL_DECIMALS,
    NAN,
    has_top_level_order_by,
    normalize_value,
    results_match,
    rows_match,
)

GOLD = [(1, "a"), (1, "a"), (2, "b")]


@pytest.mark.parametrize(
    "pred, set_eq, bag_eq, ordered_eq",
    [
        ([(1, "a"), (1, "a"), (2, "b")], True, True, True),
        ([(2, "b"), (1, "a"), (1, "a")], True, True, False),
        ([(1, "a"), (2, "b")], True, False, False),
        ([(1, "a"), (2, "b"), (2, "b")], True, False, False),
        ([("a", 1), ("a", 1), ("b", 2)], False, False, False),  # column order is significant
    ],
)
def test_the_three_modes(pred, set_eq, bag_eq, ordered_eq):
    assert results_match(GOLD, pred, "set") is set_eq
    assert results_match(GOLD, pred, "bag") is bag_eq
    assert results_match(GOLD, pred, "ordered") is ordered_eq


def test_distinct_dedups_before_an_ordered_comparison():
    assert not rows_match([(1,), (1,), (2,)], [(1,), (2,)], "ordered")
    assert rows_match([(1,), (1,), (2,)], [(1,), (2,)], "ordered", distinct=True)


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="unknown comparison mode"):
        rows_match([], [], "fuzzy")


def test_the_two_tolerances_are_explicit():
    # default (cascade, AmbiTab): 7 significant digits, relative
    assert results_match([(1234567.1,)], [(1234567.4,)])
    assert not results_match([(0.12345671,)], [(0.12345681,)])
    # AI-SQL: 6 decimals, absolute, no significant-digit step
    aisql = {"significant_digits": None, "decimals": AISQL_DECIMALS}
    assert results_match([(0.12345671,)], [(0.12345674,)], **aisql)
    assert not results_match([(1234567.1,)], [(1234567.4,)], **aisql)
    # BIRD-Interact conditions.decimal: decimals first, then the significant digits
    assert results_match([(2.501,)], [(2.504,)], decimals=2)


def test_values_compare_by_value():
    assert normalize_value(1.0) == 1 and isinstance(normalize_value(1.0), int)
    assert normalize_value(True) == 1 and normalize_value(Decimal("3")) == 3
    assert normalize_value(float("nan")) is NAN
    assert normalize_value(bytearray(b"ab")) == b"ab"
    assert normalize_value([1, 2.0, {"b": 1.0}]) == (1, 2, (("b", 1),))
    assert normalize_value("1") != normalize_value(1)


@pytest.mark.parametrize(
    "sql, expected",
    [
        ("SELECT a FROM t ORDER BY a", True),
        ("(SELECT a FROM t ORDER BY a)", True),
        ("SELECT a FROM (SELECT a FROM t ORDER BY a) AS s", False),
        ("SELECT a FROM t", False),
        ("not sql at all (", False),
    ],
)
def test_top_level_order_by(sql, expected):
    assert has_top_level_order_by(sql) is expected
