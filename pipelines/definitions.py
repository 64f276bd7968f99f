"""The one Dagster ``Definitions`` object (loaded by workspace.yaml)."""

from dagster import AssetSelection, Definitions, define_asset_job

from assets.databases import schema_context, seed_databases
from assets.sensors import seed_catalog_sensor
from resources.dagster_resources import SafeSqlResource, SeedCatalogResource
from storage.io_manager import VersionedParquetIOManager

DATABASE_ASSETS = [seed_databases, schema_context]

seed_job = define_asset_job(
    "seed_databases_job",
    selection=AssetSelection.assets(*DATABASE_ASSETS),
    description="Register a seed database's metadata and render its prompt context.",
)

MAIN_JOB = seed_job.name

defs = Definitions(
    assets=DATABASE_ASSETS,
    jobs=[seed_job],
    sensors=[seed_catalog_sensor],
    resources={
        "io_manager": VersionedParquetIOManager(),
        "seed_catalog": SeedCatalogResource(),
        "safe_sql": SafeSqlResource(),
    },
)
