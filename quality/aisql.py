"""Data contracts of the AI-operator SQL artifacts (the Stochastic Shift job)."""

import polars as pl

from pipelines.aisql.compare import VERDICT_CLASSES
from pipelines.aisql.rewrite import DIALECTS
from quality.base import ColumnRule, Contract

_STATUSES = ("ok", "error", "timeout", "budget_exceeded", "undecided")
_LAYER_VERDICTS = ("accept", "reject", "cannot decide")

AISQL_SCENARIO_DB = Contract(
    name="aisql_scenario_db",
    description="One row per table of the label-free scenario database.",
    min_rows=1,
    columns=(
        ColumnRule("scenario", pl.String, nullable=False),
        ColumnRule("table_name", pl.String, nullable=False),
        ColumnRule("bigquery_name", pl.String, nullable=False),
        ColumnRule("row_count", pl.Int64, nullable=False, min_value=1),
        ColumnRule("columns", pl.String, nullable=False, min_length=2),
        ColumnRule("db_path", pl.String, nullable=False, min_length=1),
    ),
)

AISQL_PAIRS = Contract(
    name="aisql_pairs",
    description="Labelled (gold, candidate) AI-SQL pairs: variants labelled by construction, generator candidates manually.",
    min_rows=1,
    columns=(
        ColumnRule("pair_id", pl.String, nullable=False, unique=True),
        ColumnRule("dialect", pl.String, nullable=False, allowed=DIALECTS),
        ColumnRule("question_id", pl.String, nullable=False),
        ColumnRule("gold_sql", pl.String, nullable=False, min_length=1),
        ColumnRule("candidate_sql", pl.String, nullable=False),
        ColumnRule("label", pl.Boolean),
        ColumnRule(
            "label_source",
            pl.String,
            nullable=False,
            allowed=("constructed", "executed", "manual", "oracle_suggested", "none"),
        ),
        ColumnRule("variant_layer", pl.String, nullable=False, allowed=("none", "relational", "ai")),
    ),
)

AISQL_SPLITS = Contract(
    name="aisql_split_queries",
    description="Structural and AI parts of every gold and candidate query.",
    columns=(
        ColumnRule("pair_id", pl.String, nullable=False),
        ColumnRule("side", pl.String, nullable=False, allowed=("gold", "candidate")),
        ColumnRule("method", pl.String, nullable=False),
        ColumnRule("n_ai_parts", pl.Int64, nullable=False, min_value=0),
    ),
    unique_together=("pair_id", "side"),
)

AISQL_EXECUTIONS = Contract(
    name="aisql_executions",
    description="Split execution per pair: statuses, row counts, diffs, operator calls and the evidence JSON.",
    columns=(
        ColumnRule("pair_id", pl.String, nullable=False, unique=True),
        ColumnRule("gold_status", pl.String, nullable=False, allowed=_STATUSES),
        ColumnRule("candidate_status", pl.String, nullable=False, allowed=_STATUSES),
        ColumnRule("calls", pl.Int64, nullable=False, min_value=0),
        ColumnRule("evidence_json", pl.String, nullable=False, min_length=2),
    ),
)

AISQL_VERDICTS = Contract(
    name="aisql_verdicts",
    description="One verdict per (pair, method) with what it claims (its verdict class); errors and "
    "undecided verdicts count as rejections in TPR / TNR / accuracy and as undecided in coverage.",
    columns=(
        ColumnRule("pair_id", pl.String, nullable=False),
        ColumnRule("method", pl.String, nullable=False),
        ColumnRule("accepted", pl.Boolean, nullable=False),
        ColumnRule("status", pl.String, nullable=False, allowed=("ok", "error", "undecided")),
        ColumnRule("overall", pl.Int64, min_value=1, max_value=5),
        ColumnRule("verdict_class", pl.String, nullable=False, allowed=VERDICT_CLASSES),
        ColumnRule("bound_k", pl.Int64, min_value=1),
    ),
    unique_together=("pair_id", "method"),
)

AISQL_METRICS = Contract(
    name="aisql_metrics",
    description="TPR/TNR/accuracy per set, method and dialect with counts (Table 1 layout).",
    columns=(
        ColumnRule("set", pl.String, nullable=False, allowed=("synthetic", "generated")),
        ColumnRule("dialect", pl.String, nullable=False),
        ColumnRule("method", pl.String, nullable=False),
        ColumnRule("n", pl.Int64, nullable=False, min_value=0),
        ColumnRule("accuracy", pl.Float64, min_value=0.0, max_value=1.0),
    ),
)

AISQL_PREDICTION_VERDICTS = Contract(
    name="aisql_prediction_verdicts",
    description="One verdict per (predictions file, prediction, scenario, settings): every layer and the final.",
    min_rows=1,
    columns=(
        ColumnRule("predictions_sha256", pl.String, nullable=False, min_length=64),
        ColumnRule("settings_key", pl.String, nullable=False, min_length=2),
        ColumnRule("prediction_id", pl.String, nullable=False, min_length=1),
        ColumnRule("scenario", pl.String, nullable=False),
        ColumnRule("dialect", pl.String, nullable=False, allowed=DIALECTS),
        ColumnRule("label", pl.Boolean),
        ColumnRule("final", pl.String, nullable=False, allowed=_LAYER_VERDICTS),
        ColumnRule("accepted", pl.Boolean, nullable=False),
        ColumnRule("structural", pl.String, nullable=False, allowed=_LAYER_VERDICTS),
        ColumnRule("ai", pl.String, nullable=False, allowed=_LAYER_VERDICTS),
    ),
    unique_together=("predictions_sha256", "prediction_id", "scenario", "settings_key"),
)

AISQL_PREDICTION_METRICS = Contract(
    name="aisql_prediction_metrics",
    description="TPR/TNR/accuracy per predictions file, settings, dialect and method over labelled predictions.",
    columns=(
        ColumnRule("predictions_sha256", pl.String, nullable=False),
        ColumnRule("dialect", pl.String, nullable=False, allowed=DIALECTS),
        ColumnRule("method", pl.String, nullable=False),
        ColumnRule("n", pl.Int64, nullable=False, min_value=0),
        ColumnRule("undecided", pl.Int64, nullable=False, min_value=0),
        ColumnRule("accuracy", pl.Float64, min_value=0.0, max_value=1.0),
    ),
)
