"""AmbiTab's result comparison: the BIRD-style set comparator with the record's policy flags.

The paper verifies a submission by comparing its execution result with the record's single
reference SQL "under the corpus's comparison rules"; the BIRD rule is
``set(map(tuple, pred)) == set(map(tuple, gold))`` (row order and duplicates ignored, column order
significant). This differs on purpose from ABISS's Appendix-A relaxed equivalence
(:mod:`pipelines.sqltools.equivalence`), which tolerates extra and reordered columns. Both use the
one result comparison of :mod:`pipelines.sqltools.results` with its default tolerance (1 == 1.0,
floats to 7 significant digits), so both checkers agree on what "the same value" means.

Flags (:class:`~pipelines.ambitab.record.ComparisonPolicy`):

* ``order_sensitive``: compare row sequences (duplicates then count too), else row sets;
* ``distinct``: BIRD-Interact ``conditions.distinct`` — de-duplicate both sides first (a no-op for
  the set comparison, kept explicit for the ordered one);
* ``float_decimals``: BIRD-Interact ``conditions.decimal`` — round floats to that many decimals
  (before the 7 significant digits).

The same function serves the AmbiQT and TACO "readings differ" filters and the Ambrosia check
that a question's readings give pairwise-distinct results.
"""

from __future__ import annotations

from typing import Any

from pipelines.ambitab.record import ComparisonPolicy
from pipelines.sqltools import results


def results_match(gold: Any, pred: Any, policy: ComparisonPolicy | None = None) -> bool:
    """True when ``pred``'s rows equal ``gold``'s under ``policy`` (QueryResult or row lists)."""
    policy = policy or ComparisonPolicy()
    return results.results_match(
        gold,
        pred,
        "ordered" if policy.order_sensitive else "set",
        distinct=policy.distinct,
        decimals=policy.float_decimals,
    )
