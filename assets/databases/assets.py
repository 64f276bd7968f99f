"""Seed-database assets: the registered database and its rendered prompt context."""

import json

import polars as pl
from dagster import AssetExecutionContext, MetadataValue, asset

from assets.shared.checks import contract_check_result, contract_check_spec
from assets.shared.io_manager import artifact_output, code_markdown
from assets.shared.partitions import databases_partitions
from assets.shared.resources import CouncilResource, SeedCatalogResource
from pipelines.sqltools.schema_context import fit_schema_context
from quality.databases import SCHEMA_CONTEXT, SEED_DATABASES
from resources.catalog import inspect_database
from resources.llm.config import schema_token_budget

SCHEMA_CONTEXT_VERSION = "2"  # bump when the rendering changes: marks downstream stale


def seed_database_row(info) -> dict:
    tables = [
        {
            "name": t.name,
            "row_count": t.row_count,
            "primary_key": t.primary_key,
            "columns": [{"name": c.name, "type": c.type} for c in t.columns],
            "foreign_keys": [
                {"column": f.column, "ref_table": f.ref_table, "ref_column": f.ref_column} for f in t.foreign_keys
            ],
        }
        for t in info.tables
    ]
    return {
        "db_id": info.db_id,
        "path": info.path,
        "engine": info.engine,
        "sha256": info.sha256,
        "size_bytes": info.size_bytes,
        "n_tables": len(info.tables),
        "n_columns": sum(len(t.columns) for t in info.tables),
        "n_foreign_keys": sum(len(t.foreign_keys) for t in info.tables),
        "total_rows": info.total_rows,
        "tables_json": json.dumps(tables),
    }


@asset(
    partitions_def=databases_partitions,
    group_name="databases",
    code_version="1",
    check_specs=[contract_check_spec(SEED_DATABASES, "seed_databases")],
    description="One row per registered seed database: tables, columns, keys, row counts, file hash.",
)
def seed_databases(context: AssetExecutionContext, seed_catalog: SeedCatalogResource):
    from dataclasses import replace

    registered = seed_catalog.catalog().get(context.partition_key)
    entry = seed_catalog.entry(context.partition_key)  # the file on this node (maybe fetched by hash)
    # the row keeps the registered path: the same table on every node (each finds the file by hash)
    info = replace(inspect_database(entry.path, entry.db_id), path=registered.path)
    df = pl.DataFrame([seed_database_row(info)], schema_overrides={"size_bytes": pl.Int64})
    yield artifact_output(
        df,
        engine=info.engine,
        tables=MetadataValue.int(len(info.tables)),
        total_rows=MetadataValue.int(info.total_rows),
    )
    yield contract_check_result(SEED_DATABASES, df)


@asset(
    partitions_def=databases_partitions,
    group_name="databases",
    code_version=SCHEMA_CONTEXT_VERSION,
    check_specs=[contract_check_spec(SCHEMA_CONTEXT, "schema_context")],
    description="Prompt schema context (ABISS §4.1): each table's DDL followed by 5 sample rows, fitted to "
    "the smallest context window of the council (what was left out is recorded).",
)
def schema_context(context: AssetExecutionContext, seed_databases: pl.DataFrame, council: CouncilResource):
    from resources.catalog import local_seed

    row = seed_databases.row(0, named=True)
    info = inspect_database(local_seed(row["path"], row.get("sha256"), row["db_id"]), row["db_id"])
    budget = schema_token_budget(council.council_config().members.values())
    fitted = fit_schema_context(info, budget)
    text = fitted.text
    df = pl.DataFrame(
        {
            "db_id": [info.db_id],
            "schema_context": [text],
            "n_tables": [len(info.tables)],
            "n_chars": [len(text)],
            "approx_tokens": [max(1, len(text) // 4)],
            "budget_tokens": [budget],
            "omitted_json": [json.dumps(fitted.omitted())],
        }
    )
    if not fitted.complete:
        context.log.warning(
            f"schema context of {info.db_id} fitted to {budget} tokens: {len(fitted.omitted_tables)} of "
            f"{len(info.tables)} tables left out, {fitted.sample_rows} sample rows, values cut at "
            f"{fitted.value_width} characters"
        )
    yield artifact_output(
        df,
        approx_tokens=MetadataValue.int(len(text) // 4),
        budget_tokens=MetadataValue.int(budget),
        omitted=MetadataValue.json(fitted.omitted()),
        # in place at 1,366 px: lines cut to the value column, under the inline limit (#42 item 7)
        context_preview=MetadataValue.md(code_markdown(text, "sql", "the whole context is the artifact")),
    )
    yield contract_check_result(SCHEMA_CONTEXT, df)
