"""Job 4, The Stochastic Shift: AI-operator SQL on DuckDB, split execution, judges, meta-evaluation
and the sweep (partitioned by scenario)."""

from dagster import AssetSelection, Definitions, define_asset_job

from assets.aisql.assets import AISQL_ASSETS, AISQL_EVALUATE_ASSETS, AisqlResource

aisql_job = define_asset_job(
    "aisql_job",
    selection=AssetSelection.assets(*AISQL_ASSETS),
    description="Stochastic Shift: AI-operator SQL on DuckDB, split execution, judges, meta-evaluation, sweep.",
)

aisql_evaluate_job = define_asset_job(
    "aisql_evaluate_job",
    selection=AssetSelection.assets(*AISQL_EVALUATE_ASSETS),
    description="Judge a file of user predictions (quandary aisql evaluate): one verdict row per prediction, Table 1.",
)

defs = Definitions(
    assets=AISQL_ASSETS + AISQL_EVALUATE_ASSETS,
    jobs=[aisql_job, aisql_evaluate_job],
    resources={"aisql": AisqlResource()},
)
