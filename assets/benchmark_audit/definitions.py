"""Job 5, benchmark audit (issue 32): someone else's gold (Spider / BIRD) checked item by item,
partitioned by (benchmark file, database)."""

from dagster import AssetSelection, Definitions, define_asset_job

from assets.benchmark_audit.assets import BENCHMARK_AUDIT_ASSETS, BENCHMARK_AUDIT_COUNCIL_ASSETS

benchmark_audit_job = define_asset_job(
    "benchmark_audit_job",
    selection=AssetSelection.assets(*BENCHMARK_AUDIT_ASSETS),
    description="Audit a Spider / BIRD benchmark's gold items on one database: deterministic checks, rates by type.",
)

benchmark_audit_council_job = define_asset_job(
    "benchmark_audit_council_job",
    selection=AssetSelection.assets(*BENCHMARK_AUDIT_COUNCIL_ASSETS),
    description="The council's checks of one database's gold items (E1, E3, E4), reported apart from the deterministic ones.",
)

defs = Definitions(
    assets=BENCHMARK_AUDIT_ASSETS + BENCHMARK_AUDIT_COUNCIL_ASSETS,
    jobs=[benchmark_audit_job, benchmark_audit_council_job],
)
