"""Relaxed result equivalence, exactly as ABISS Appendix A (after Floratou et al., 2024).

A predicted query is equivalent to the gold query when its result set equals the gold result set
up to the four tolerated differences of Appendix A:

1. **row order** — rows are compared as multisets (unless ``order_sensitive``);
2. **column names** — names and aliases are never compared, only values;
3. **column order** — gold columns may appear anywhere in the prediction;
4. **column supersets** — the prediction may carry extra columns: every gold column must map to a
   *distinct* predicted column such that the predicted rows, projected on those columns, equal the
   gold rows. The relation is therefore not symmetric (gold A,B vs pred A,B,C is equivalent; the
   reverse is not).

Decisions beyond the paper's text (each is tested):

* **Duplicates count.** Rows are multisets, as in Floratou et al.: a gold query without DISTINCT
  that returns duplicate rows is *not* equivalent to the same query with DISTINCT; when the gold
  rows have no duplicates, adding or dropping DISTINCT changes nothing and stays equivalent.
* **NULL only matches NULL** (Appendix A treats NULL disagreements conservatively): NULL differs
  from ``''``, ``0`` and ``'NULL'``; a prediction that includes or excludes NULL rows differently
  is not equivalent.
* **Numbers compare by value**: ``1 == 1.0`` (and booleans are 0/1); non-integral floats are rounded
  to 7 significant digits (~1e-6 relative), so ``0.1 + 0.2`` equals ``0.3``. Rounding is bucketed
  (needed to compare multisets by hashing), so two floats straddling a rounding boundary may
  still differ. Text ``'1'`` is not the number ``1``. Values are normalised by the one result
  comparison every job shares (:mod:`pipelines.sqltools.results`, its default tolerance), and
  :func:`has_top_level_order_by` is that module's ORDER BY rule.
* **Strings compare exactly**: no case-folding, no trimming.
* **Empty results**: an empty gold result and an empty predicted result are equivalent, provided
  the prediction has at least as many columns as the gold (fewer columns is a missing column).
* **Row order default: insensitive.** Appendix A tolerates row ordering, so ABISS users get
  ``order_sensitive=False``. BIRD-style users can pass ``order_sensitive=True``: for
  :func:`results_equivalent` rows are then compared as sequences; :func:`sql_equivalent` turns it
  on only when the gold SQL has a top-level ORDER BY (otherwise the gold order is arbitrary).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.sqltools.results import canonical_value, has_top_level_order_by, same_bag
from resources.sql import DEFAULT_TIMEOUT_S, engine_of, execute_sql

MAPPING_SEARCH_BUDGET = 20_000  # column-assignment nodes explored before giving up


@dataclass(frozen=True)
class EquivalenceVerdict:
    """Outcome of an equivalence check.

    ``failed`` is ``"gold"`` or ``"pred"`` when that query did not execute (``equivalent`` is then
    False); ``column_mapping[i]`` is the pred column index that gold column ``i`` maps to.
    """

    equivalent: bool
    reason: str
    failed: str | None = None
    column_mapping: tuple[int, ...] | None = None

    def __bool__(self) -> bool:
        return self.equivalent


# ------------------------------------------------------------------------------ results


def _columns_and_rows(result: Any) -> tuple[list[str], list[tuple]]:
    """Accept a QueryResult (``.columns``/``.rows``) or a plain ``(columns, rows)`` pair."""
    if hasattr(result, "rows"):
        return list(getattr(result, "columns", []) or []), list(result.rows)
    columns, rows = result
    return list(columns or []), list(rows)


def _width(columns: list[str], rows: list[tuple]) -> int:
    return len(rows[0]) if rows else len(columns)


def _column_vectors(rows: list[tuple], width: int) -> list[tuple]:
    canonical_rows = [tuple(canonical_value(v) for v in row) for row in rows]
    return [tuple(row[i] for row in canonical_rows) for i in range(width)]


def _signature(vector: tuple, ordered: bool) -> Any:
    # A necessary condition for a gold column to map to a pred column: same values (as a
    # multiset, or as a sequence when row order matters). Cheap filter before verification.
    return vector if ordered else frozenset(Counter(vector).items())


def _projection_matches(
    gold_vectors: list[tuple],
    pred_vectors: list[tuple],
    pairs: list[tuple[int, int]],
    ordered: bool,
) -> bool:
    gold_rows = list(zip(*(gold_vectors[g] for g, _ in pairs)))
    pred_rows = list(zip(*(pred_vectors[p] for _, p in pairs)))
    return gold_rows == pred_rows if ordered else same_bag(gold_rows, pred_rows)


class _BudgetExceeded(Exception):
    pass


def _find_column_mapping(gold_vectors: list[tuple], pred_vectors: list[tuple], ordered: bool) -> tuple[int, ...] | None:
    """Injective gold->pred column mapping whose projection reproduces the gold rows, or None.

    Backtracking over candidates with equal value signatures; gold columns with the fewest
    candidates go first, every partial assignment is verified on the rows (prunes early), and
    interchangeable pred columns (identical vectors) are tried once per level.
    """
    pred_by_signature: dict[Any, list[int]] = {}
    for p, vector in enumerate(pred_vectors):
        pred_by_signature.setdefault(_signature(vector, ordered), []).append(p)
    candidates = {g: pred_by_signature.get(_signature(v, ordered), []) for g, v in enumerate(gold_vectors)}
    order = sorted(candidates, key=lambda g: len(candidates[g]))
    used: set[int] = set()
    pairs: list[tuple[int, int]] = []
    budget = [MAPPING_SEARCH_BUDGET]

    def assign(depth: int) -> bool:
        if depth == len(order):
            return True
        g = order[depth]
        tried_vectors: set[tuple] = set()
        for p in candidates[g]:
            if p in used or pred_vectors[p] in tried_vectors:
                continue
            tried_vectors.add(pred_vectors[p])
            budget[0] -= 1
            if budget[0] < 0:
                raise _BudgetExceeded
            pairs.append((g, p))
            if _projection_matches(gold_vectors, pred_vectors, pairs, ordered):
                used.add(p)
                if assign(depth + 1):
                    return True
                used.discard(p)
            pairs.pop()
        return False

    if not assign(0):
        return None
    mapping = dict(pairs)
    return tuple(mapping[g] for g in range(len(gold_vectors)))


def _name(columns: list[str], index: int) -> str:
    return repr(columns[index]) if index < len(columns) else f"#{index + 1}"


def _unmatched_gold_column_reason(
    gold_columns: list[str], gold_vectors: list[tuple], pred_vectors: list[tuple]
) -> str | None:
    """Name the first gold column whose values (NULLs included) no pred column has."""
    pred_signatures = {_signature(v, False) for v in pred_vectors}
    for g, vector in enumerate(gold_vectors):
        if _signature(vector, False) not in pred_signatures:
            return f"no pred column has the values of gold column {_name(gold_columns, g)}"
    return None


def results_equivalent(gold: Any, pred: Any, *, order_sensitive: bool = False) -> EquivalenceVerdict:
    """Appendix A relaxed equivalence of two result sets (see the module docstring).

    ``gold`` and ``pred`` are QueryResult-like (``.columns`` and ``.rows``) or ``(columns, rows)``
    pairs. ``order_sensitive`` (default False, as Appendix A tolerates row ordering) compares rows
    as sequences. Not symmetric: ``pred`` may have extra columns, ``gold`` may not.
    """
    gold_columns, gold_rows = _columns_and_rows(gold)
    pred_columns, pred_rows = _columns_and_rows(pred)
    gold_width, pred_width = _width(gold_columns, gold_rows), _width(pred_columns, pred_rows)

    if pred_width < gold_width:
        return EquivalenceVerdict(False, f"pred returns {pred_width} column(s), gold needs {gold_width}")
    if len(pred_rows) != len(gold_rows):
        return EquivalenceVerdict(False, f"row count differs: gold {len(gold_rows)}, pred {len(pred_rows)}")
    if not gold_rows:
        return EquivalenceVerdict(True, "both results are empty", column_mapping=tuple(range(gold_width)))

    gold_vectors = _column_vectors(gold_rows, gold_width)
    pred_vectors = _column_vectors(pred_rows, pred_width)
    try:
        mapping = _find_column_mapping(gold_vectors, pred_vectors, order_sensitive)
    except _BudgetExceeded:
        return EquivalenceVerdict(False, "column mapping search gave up (too many interchangeable columns)")
    if mapping is not None:
        extra = pred_width - gold_width
        reason = "same rows" + (f" (pred has {extra} extra column(s))" if extra else "")
        return EquivalenceVerdict(True, reason, column_mapping=mapping)

    if order_sensitive and _find_column_mapping(gold_vectors, pred_vectors, False) is not None:
        return EquivalenceVerdict(False, "same rows in a different order (order-sensitive comparison)")
    unmatched = _unmatched_gold_column_reason(gold_columns, gold_vectors, pred_vectors)
    if unmatched:
        return EquivalenceVerdict(False, unmatched)
    return EquivalenceVerdict(False, "every gold column has a same-valued pred column, but the rows differ")


# ------------------------------------------------------------------------------ queries


def sql_equivalent(
    db_path: str | Path,
    gold_sql: str,
    pred_sql: str,
    *,
    order_sensitive: bool = False,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> EquivalenceVerdict:
    """Execute both queries through the safe executor and compare their results.

    A failing query yields ``equivalent=False`` with ``failed="gold"`` or ``"pred"`` (gold runs
    first; pred is not run when gold fails). With ``order_sensitive=True`` row order matters only
    if the gold SQL has a top-level ORDER BY.
    """
    gold = execute_sql(db_path, gold_sql, timeout_s=timeout_s)
    if not gold.ok:
        return EquivalenceVerdict(False, f"gold failed: {gold.one_line()}", failed="gold")
    pred = execute_sql(db_path, pred_sql, timeout_s=timeout_s)
    if not pred.ok:
        return EquivalenceVerdict(False, f"pred failed: {pred.one_line()}", failed="pred")
    ordered = order_sensitive and has_top_level_order_by(gold_sql, dialect=engine_of(db_path))
    return results_equivalent(gold, pred, order_sensitive=ordered)
