"""Data contracts of the interaction benchmark's artifacts (same Contract type as quality/base.py)."""

import polars as pl

from pipelines.abiss.taxonomy import SUBCATEGORY_BY_ID
from pipelines.interaction.ends import ENDS  # user_failed / system_failed: incomplete, not scored
from pipelines.interaction.modes import MODES
from quality.base import ColumnRule, Contract

__all__ = ["ENDS", "INTERACTION_SCORES", "INTERACTION_TURNS", "SCORE_STATUSES"]
SCORE_STATUSES = ("scored", "not_applicable", "undecided", "incomplete")

INTERACTION_TURNS = Contract(
    name="interaction_conversations",
    description="one row per system turn; SQL / feedback / give-up ends a conversation",
    columns=(
        ColumnRule("conversation_id", pl.String, nullable=False, min_length=1),
        ColumnRule("question_id", pl.String, nullable=False),
        ColumnRule("agent", pl.String, nullable=False, min_length=1),
        ColumnRule("mode", pl.String, nullable=False, allowed=MODES),
        ColumnRule("step", pl.Int64, nullable=False, min_value=0),
        ColumnRule("end", pl.String, nullable=False, allowed=ENDS),
        ColumnRule("relevance", pl.String, allowed=("Relevant", "Technical", "Irrelevant")),
        ColumnRule("system_status", pl.String, nullable=False),
    ),
    unique_together=("conversation_id", "step"),
)

INTERACTION_SCORES = Contract(
    name="interaction_scores",
    description="one row per conversation with Rec / Cls / EX / FB outcomes",
    columns=(
        ColumnRule("conversation_id", pl.String, nullable=False, unique=True),
        ColumnRule("agent", pl.String, nullable=False),
        ColumnRule("mode", pl.String, nullable=False, allowed=MODES),
        ColumnRule("subcategory", pl.String, nullable=False, allowed=tuple(SUBCATEGORY_BY_ID)),
        ColumnRule("n_turns", pl.Int64, nullable=False, min_value=1),
        ColumnRule("solved", pl.Boolean),
        ColumnRule("explained", pl.Boolean),
        # undecided / incomplete are None in solved / explained and counted apart, never as False
        ColumnRule("ex_status", pl.String, allowed=SCORE_STATUSES),
        ColumnRule("fb_status", pl.String, allowed=SCORE_STATUSES),
    ),
)
