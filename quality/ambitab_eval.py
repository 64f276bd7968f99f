"""Data contract for AmbiTab evaluation episodes (one row per record × seed × condition)."""

import polars as pl

from quality.contracts import ColumnRule, Contract

AMBITAB_EPISODES = Contract(
    name="ambitab_episodes",
    description="Ask-then-solve episodes: every turn with its credit and response, the SQL and the verdict.",
    columns=(
        ColumnRule("episode_id", pl.String, nullable=False, unique=True, min_length=1),
        ColumnRule("record_id", pl.String, nullable=False, min_length=1),
        ColumnRule("avt_id", pl.String, nullable=False, min_length=1),
        ColumnRule("seed", pl.Int64, nullable=False),
        ColumnRule("asker", pl.String, nullable=False, min_length=1),
        ColumnRule("oracle", pl.String, nullable=False, min_length=1),
        ColumnRule("solver", pl.String, nullable=False, min_length=1),
        ColumnRule("corpus", pl.String, nullable=False, min_length=1),
        ColumnRule("budget", pl.Int64, nullable=False, min_value=0),
        ColumnRule("options", pl.String, nullable=False, min_length=1),
        ColumnRule("n_amb", pl.Int64, nullable=False, min_value=0),
        ColumnRule("n_questions", pl.Int64, nullable=False, min_value=0),
        ColumnRule("recall", pl.Float64, min_value=0.0, max_value=1.0),
        ColumnRule("precision", pl.Float64, min_value=0.0, max_value=1.0),
        ColumnRule("f1", pl.Float64, min_value=0.0, max_value=1.0),
        ColumnRule("verdict", pl.Int64, allowed=(0, 1)),
        ColumnRule(
            "status", pl.String, nullable=False, allowed=("ok", "unverifiable", "context_overflow", "no_solver")
        ),
        ColumnRule("turns_json", pl.String, nullable=False),
    ),
)
