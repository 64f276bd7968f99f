"""AmbiTab's result comparison: the BIRD-style set comparator with the record's policy flags.

The paper verifies a submission by comparing its execution result with the record's single
reference SQL "under the corpus's comparison rules"; the BIRD rule is
``set(map(tuple, pred)) == set(map(tuple, gold))`` (row order and duplicates ignored, column order
significant). This differs on purpose from ABISS's Appendix-A relaxed equivalence
(:mod:`pipelines.sqltools.equivalence`), which tolerates extra and reordered columns; cell values
are normalised with that module's :func:`canonical_value` (1 == 1.0, floats to 7 significant
digits) so both checkers agree on what "the same value" means.

Flags (:class:`~pipelines.ambitab.record.ComparisonPolicy`):

* ``order_sensitive``: compare row sequences (duplicates then count too);
* ``distinct``: BIRD-Interact ``conditions.distinct`` — de-duplicate both sides first (a no-op for
  the set comparison, kept explicit for the ordered one);
* ``float_decimals``: BIRD-Interact ``conditions.decimal`` — round floats to that many decimals.

The same function serves the AmbiQT and TACO "readings differ" filters and the Ambrosia check
that a question's readings give pairwise-distinct results.
"""

from __future__ import annotations

from typing import Any

from pipelines.ambitab.record import ComparisonPolicy
from pipelines.sqltools.equivalence import canonical_value


def _cell(value: Any, decimals: int | None) -> Any:
    if decimals is not None and isinstance(value, float):
        value = round(value, decimals)
    return canonical_value(value)


def _rows(result: Any) -> list[tuple]:
    rows = result.rows if hasattr(result, "rows") else result
    return [tuple(r) for r in rows]


def results_match(gold: Any, pred: Any, policy: ComparisonPolicy | None = None) -> bool:
    """True when ``pred``'s rows equal ``gold``'s under ``policy`` (QueryResult or row lists)."""
    policy = policy or ComparisonPolicy()
    d = policy.float_decimals
    g = [tuple(_cell(v, d) for v in r) for r in _rows(gold)]
    p = [tuple(_cell(v, d) for v in r) for r in _rows(pred)]
    if policy.order_sensitive:
        if policy.distinct:
            g, p = list(dict.fromkeys(g)), list(dict.fromkeys(p))
        return g == p
    return set(g) == set(p)
