"""Data contracts of the ABISS job's artifacts (candidates, the validated dataset, council votes)."""

import polars as pl

from pipelines.abiss.taxonomy import DIFFICULTY_BY_ID, STYLE_BY_ID, SUBCATEGORY_BY_ID, Group
from quality.base import ColumnRule, Contract

_SUBS = tuple(SUBCATEGORY_BY_ID)
_GROUPS = tuple(g.value for g in Group)
_STYLES = tuple(STYLE_BY_ID)
_DIFFICULTIES = tuple(DIFFICULTY_BY_ID)

# What every question-bearing artifact must satisfy: text present, labels from the taxonomy.
QUESTION_RULES = (
    ColumnRule("question", pl.String, nullable=False, min_length=1),
    ColumnRule("subcategory", pl.String, nullable=False, allowed=_SUBS),
    ColumnRule("group", pl.String, nullable=False, allowed=_GROUPS),
    ColumnRule("style", pl.String, nullable=False, allowed=_STYLES),
    ColumnRule("difficulty", pl.String, nullable=False, allowed=_DIFFICULTIES),
)

CANDIDATES = Contract(
    name="candidates",
    description="Grounded NLQ objects entering the validation cascade.",
    columns=(
        ColumnRule("candidate_id", pl.String, nullable=False, unique=True),
        ColumnRule("group_id", pl.String, nullable=False),
        *QUESTION_RULES,
        ColumnRule("generator", pl.String, nullable=False),
    ),
)

DATASET = Contract(
    name="dataset",
    description="Validated ABISS questions with every paper field.",
    columns=(
        ColumnRule("question_id", pl.String, nullable=False, unique=True),
        ColumnRule("candidate_id", pl.String, nullable=False, unique=True),
        ColumnRule("db_id", pl.String, nullable=False),
        *QUESTION_RULES,
        ColumnRule("is_solvable", pl.Boolean, nullable=False),
        ColumnRule("sql", pl.String),
        ColumnRule("evidence", pl.String),
        ColumnRule("hidden_knowledge", pl.String),
        ColumnRule("feedback", pl.String),
    ),
)

COUNCIL_VOTES = Contract(
    name="council_votes",
    description="One row per council vote, linked to its LLM call.",
    columns=(
        ColumnRule("vote_id", pl.String, nullable=False, unique=True),
        ColumnRule("candidate_id", pl.String, nullable=False),
        ColumnRule("stage", pl.String, nullable=False),
        ColumnRule("member", pl.String, nullable=False),
        ColumnRule("vote", pl.String, nullable=False),
        ColumnRule("parsed_ok", pl.Boolean, nullable=False),
        ColumnRule("llm_call_id", pl.String, nullable=False),
    ),
)
