"""Data contract of the benchmark audit's rows (one per audited item)."""

import polars as pl

from pipelines.benchmark_audit.audit import SOURCE
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
        ColumnRule("source", pl.String, nullable=False, allowed=(SOURCE,)),
        ColumnRule("gold_sql", pl.String, nullable=False, min_length=1),
        ColumnRule("flagged", pl.Boolean, nullable=False),
        ColumnRule("findings", pl.String, nullable=False, min_length=2),
    ),
    unique_together=("benchmark_sha256", "item_index"),
)
