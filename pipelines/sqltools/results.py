"""One result comparison for every job: value normalisation, row comparison, the ORDER BY rule.

Used by the ABISS validation cascade (:mod:`pipelines.sqltools.equivalence`, Appendix A's relaxed
equivalence builds its column mapping on these values), AmbiTab's verifier and conversion filters
(:mod:`pipelines.ambitab.comparison`, BIRD's set rule) and the AI-SQL diffs and execution accuracy
(:mod:`pipelines.aisql.diffs`).

**Values** (:func:`normalize_value`): a hashable value that compares "as the same value" across
engines. Numbers compare by value (``1 == 1.0``, booleans are 0/1, integral Decimals are ints),
NaN matches NaN (one hashable :data:`NAN`), ``inf`` stays itself, ``bytearray``/``memoryview``
become ``bytes``, LIST/ARRAY values tuples, STRUCT/MAP values sorted ``(key, value)`` tuples, an
unhashable value its ``repr``; strings compare exactly (no case-folding, no trimming); NULL only
matches NULL. Floats are rounded by two explicit tolerances, because the callers documented
different ones and a verdict must not change silently:

* ``decimals`` — first, floats (also inside lists and structs) are rounded to that many decimals:
  AI-SQL uses ``decimals=6`` (1e-6 absolute, :data:`AISQL_DECIMALS`); AmbiTab passes BIRD-Interact's
  ``conditions.decimal`` here; None (the default) skips the step;
* ``significant_digits`` — then non-integral floats are rounded to that many significant digits:
  the cascade and AmbiTab use 7 (~1e-6 relative, :data:`SIGNIFICANT_DIGITS`, the default), AI-SQL
  passes None (only its 6 decimals apply).

Rounding is bucketed (needed to compare multisets by hashing), so two floats straddling a rounding
boundary may still differ.

**Rows** (:func:`rows_match`, :func:`results_match`) compare in one of three explicit modes:

* ``"set"`` — row order and duplicates ignored (BIRD's ``set(map(tuple, pred)) == set(map(tuple,
  gold))``; AmbiTab's verifier, AI-SQL's EX today);
* ``"bag"`` — row order ignored, duplicates count (multisets, as Appendix A and Floratou et al.);
* ``"ordered"`` — row sequences (duplicates count too); ``distinct=True`` de-duplicates both sides
  first, keeping first occurrences (BIRD-Interact ``conditions.distinct``).

Column order is significant and column names are never compared. Whether the order of the gold
rows means anything is :func:`has_top_level_order_by` (an ORDER BY of the outermost query; one
inside a subquery does not count).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal

import sqlglot
from sqlglot import exp

from resources.sql.values import NAN, SIGNIFICANT_DIGITS, digest_rows, normalize_value  # noqa: F401 - re-exported

AISQL_DECIMALS = 6  # the AI-SQL diffs' float tolerance: 1e-6 absolute

Mode = Literal["set", "bag", "ordered"]
MODES: tuple[str, ...] = ("set", "bag", "ordered")


def canonical_value(value: Any) -> Any:
    """:func:`normalize_value` with the default tolerance (7 significant digits, no decimals step)."""
    return normalize_value(value)


def rows_of(result: Any) -> list:
    """The rows of a QueryResult-like object (``.rows``) or of a plain row list."""
    return list(result.rows) if hasattr(result, "rows") else list(result)


def normalize_rows(
    rows, *, significant_digits: int | None = SIGNIFICANT_DIGITS, decimals: int | None = None
) -> list[tuple]:
    """Every row a tuple of :func:`normalize_value` cells."""
    return [
        tuple(normalize_value(v, significant_digits=significant_digits, decimals=decimals) for v in r) for r in rows
    ]


def same_bag(a: list, b: list) -> bool:
    """Multiset equality of two lists of hashable rows."""
    # dict equality runs in C; Counter.__eq__ is a Python-level loop (slow on 100k rows).
    return len(a) == len(b) and dict(Counter(a)) == dict(Counter(b))


def rows_match(gold: list[tuple], pred: list[tuple], mode: Mode, *, distinct: bool = False) -> bool:
    """Compare two lists of already normalised rows in ``mode`` (``"set"``, ``"bag"`` or ``"ordered"``);
    ``distinct`` de-duplicates both sides first (first occurrences kept)."""
    if distinct:
        gold, pred = list(dict.fromkeys(gold)), list(dict.fromkeys(pred))
    if mode == "set":
        return set(gold) == set(pred)
    if mode == "bag":
        return same_bag(gold, pred)
    if mode == "ordered":
        return gold == pred
    raise ValueError(f"unknown comparison mode {mode!r}; expected one of {', '.join(MODES)}")


def results_match(
    gold: Any,
    pred: Any,
    mode: Mode = "set",
    *,
    distinct: bool = False,
    significant_digits: int | None = SIGNIFICANT_DIGITS,
    decimals: int | None = None,
) -> bool:
    """True when ``pred``'s rows equal ``gold``'s (QueryResults or row lists) in ``mode``, cells
    normalised with the given tolerances."""
    kw = {"significant_digits": significant_digits, "decimals": decimals}
    return rows_match(normalize_rows(rows_of(gold), **kw), normalize_rows(rows_of(pred), **kw), mode, distinct=distinct)


def tree_has_top_level_order_by(tree: Any) -> bool:
    """True when a parsed (sqlglot) query orders its outermost rows; parentheses around the query
    are looked through, an ORDER BY inside a subquery does not count."""

    while isinstance(tree, (exp.Subquery, exp.Paren)) and not tree.args.get("order"):
        tree = tree.this
    return tree is not None and bool(tree.args.get("order"))


def has_top_level_order_by(sql: str, dialect: str = "sqlite") -> bool:
    """:func:`tree_has_top_level_order_by` of ``sql`` parsed in ``dialect``; False when it does not
    parse (the executor reports the real error)."""

    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except Exception:  # noqa: BLE001 - unparseable: treat as unordered
        return False
    return tree_has_top_level_order_by(tree)


def _size_and_digest(result: Any) -> tuple[int | None, int, str | None, str | None]:
    """(rows, columns, bag digest, ordered digest) of a QueryResult or of a cap-exceeding failure
    read with a digest; rows None when neither."""
    if getattr(result, "ok", False):
        d = digest_rows(result.rows)
        return result.row_count, len(result.columns), d.bag, d.ordered
    if getattr(result, "digested", False):
        return result.row_total, len(result.columns or []), result.bag_digest, result.ordered_digest
    return None, 0, None, None


def large_results_match(gold: Any, pred: Any, *, ordered: bool = False) -> tuple[bool | None, str]:
    """Compare two results when at least one is past the executor's cap, as bags (or sequences when
    ``ordered``) of rows, without holding them: by row count, then by the digest the executor
    folded the whole result into (``execute_sql(..., digest_beyond_cap=True)``, same value
    normalisation as :func:`normalize_value`). Returns (True / False / None = cannot decide, reason).

    Beyond the cap only results with the same columns in the same order are compared: the column
    mapping of Appendix A's relaxed equivalence needs the rows, so different digests are undecided,
    never "wrong"."""
    g_rows, g_cols, g_bag, g_seq = _size_and_digest(gold)
    p_rows, p_cols, p_bag, p_seq = _size_and_digest(pred)
    if g_rows is None or p_rows is None:
        return None, "cannot decide: a result beyond the cap was not digested"
    if g_rows != p_rows:
        return False, f"row count differs: gold {g_rows}, pred {p_rows} (beyond the cap, counted)"
    if g_cols != p_cols:
        return None, (
            f"cannot decide: {g_rows} rows beyond the cap, gold has {g_cols} column(s), pred {p_cols}; "
            "a column mapping cannot be searched without the rows"
        )
    if g_bag == p_bag:
        if ordered and g_seq != p_seq:
            return False, f"same {g_rows} rows in a different order (compared by digest beyond the cap)"
        return True, f"same {g_rows} rows (compared by digest beyond the cap)"
    return None, (
        f"cannot decide: {g_rows} rows beyond the cap differ with the columns in this order; "
        "a column mapping cannot be searched without the rows"
    )
