"""Data contracts of the databases job's artifacts (registered seed databases, rendered schema context)."""

import polars as pl

from quality.base import ColumnRule, Contract

SEED_DATABASES = Contract(
    name="seed_databases",
    description="One row per registered seed database.",
    min_rows=1,
    columns=(
        ColumnRule("db_id", pl.String, nullable=False, unique=True, min_length=1),
        ColumnRule("path", pl.String, nullable=False, min_length=1),
        ColumnRule("engine", pl.String, nullable=False, allowed=("sqlite", "duckdb")),
        ColumnRule("sha256", pl.String, nullable=False, min_length=64),
        ColumnRule("size_bytes", pl.Int64, nullable=False, min_value=1),
        ColumnRule("n_tables", pl.Int64, nullable=False, min_value=1),
        ColumnRule("n_columns", pl.Int64, nullable=False, min_value=1),
        ColumnRule("n_foreign_keys", pl.Int64, nullable=False, min_value=0),
        ColumnRule("total_rows", pl.Int64, nullable=False, min_value=0),
        ColumnRule("tables_json", pl.String, nullable=False, min_length=2),
    ),
)

SCHEMA_CONTEXT = Contract(
    name="schema_context",
    description="The rendered prompt context per database (DDL + 5 sample rows per table).",
    min_rows=1,
    columns=(
        ColumnRule("db_id", pl.String, nullable=False, unique=True, min_length=1),
        ColumnRule("schema_context", pl.String, nullable=False, min_length=10),
        ColumnRule("n_tables", pl.Int64, nullable=False, min_value=1),
        ColumnRule("n_chars", pl.Int64, nullable=False, min_value=10),
        ColumnRule("approx_tokens", pl.Int64, nullable=False, min_value=1),
    ),
)
