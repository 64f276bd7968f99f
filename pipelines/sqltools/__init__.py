"""Pure SQL tools shared by every job (no LLM, no Dagster; a shared core: no paper package imported).

* :mod:`.results` — the one result comparison: value normalisation with explicit tolerances,
  set / bag / ordered row comparison, the top-level ORDER BY rule (cascade, AmbiTab, AI-SQL).
* :mod:`.equivalence` — relaxed result equivalence (ABISS Appendix A), on :mod:`.results` values.
* :mod:`.masking` — value-masked SQL for Stage 1 duplicate removal (OmniSQL-style).
* :mod:`.difficulty` — difficulty relabelling from the SQL AST (ABISS §4.1).
"""

from pipelines.sqltools.difficulty import DIFFICULTY_LABELS, SqlFeatures, analyze_sql, relabel_difficulty
from pipelines.sqltools.equivalence import (
    EquivalenceVerdict,
    has_top_level_order_by,
    results_equivalent,
    sql_equivalent,
)
from pipelines.sqltools.masking import dedup_key, masked_sql

__all__ = [
    "DIFFICULTY_LABELS",
    "SqlFeatures",
    "EquivalenceVerdict",
    "analyze_sql",
    "dedup_key",
    "has_top_level_order_by",
    "masked_sql",
    "relabel_difficulty",
    "results_equivalent",
    "sql_equivalent",
]
