"""Job 4, The Stochastic Shift: AI-operator SQL on DuckDB, split execution, judges, meta-evaluation
and the sweep (partitioned by scenario)."""

from dagster import AssetSelection, Definitions, define_asset_job

from assets.aisql.assets import AISQL_ASSETS, AisqlResource

aisql_job = define_asset_job(
    "aisql_job",
    selection=AssetSelection.assets(*AISQL_ASSETS),
    description="Stochastic Shift: AI-operator SQL on DuckDB, split execution, judges, meta-evaluation, sweep.",
)

defs = Definitions(assets=AISQL_ASSETS, jobs=[aisql_job], resources={"aisql": AisqlResource()})
