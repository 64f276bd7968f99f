"""Data contract of the benchmark audit's rows (one per audited item)."""

import polars as pl

from pipelines.benchmark_audit.audit import SOURCE
from pipelines.benchmark_audit.verdicts import COUNCIL_CHECKS
from quality.base import ColumnRule, Contract

BENCHMARK_AUDIT_FINDINGS = Contract(
    name="benchmark_audit_findings",
    description="One row per (benchmark file, item) of one database: flags, error types, findings as JSON.",
    min_rows=1,
    columns=(
        ColumnRule("benchmark_sha256", pl.String, nullable=False, min_length=64),
        ColumnRule("db_id", pl.String, nullable=False, min_length=1),
        ColumnRule("item_index", pl.Int64, nullable=False, min_value=0),
        ColumnRule("item_key", pl.String, nullable=False, min_length=1),
        ColumnRule("database_sha256", pl.String, nullable=False, min_length=64),
        ColumnRule("source", pl.String, nullable=False, allowed=(SOURCE,)),
        ColumnRule("gold_sql", pl.String, nullable=False, min_length=1),
        ColumnRule("flagged", pl.Boolean, nullable=False),
        ColumnRule("findings", pl.String, nullable=False, min_length=2),
    ),
    unique_together=("benchmark_sha256", "item_index"),
)

BENCHMARK_AUDIT_COUNCIL = Contract(
    name="benchmark_audit_council",
    description="One council verdict per (benchmark file, item, check): flag, pass or undecided, with the votes.",
    min_rows=1,
    columns=(
        ColumnRule("benchmark_sha256", pl.String, nullable=False, min_length=64),
        ColumnRule("item_index", pl.Int64, nullable=False, min_value=0),
        ColumnRule("source", pl.String, nullable=False, allowed=("council",)),
        ColumnRule("check", pl.String, nullable=False, allowed=tuple(COUNCIL_CHECKS)),
        ColumnRule("error_type", pl.String, nullable=False, allowed=("E1", "E2", "E3", "E4")),
        ColumnRule("verdict", pl.String, nullable=False, allowed=("flag", "pass", "undecided")),
        ColumnRule("votes", pl.String, nullable=False, min_length=2),
    ),
    unique_together=("benchmark_sha256", "item_index", "check"),
)
