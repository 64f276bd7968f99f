"""Seed databases: register a database's metadata and render its prompt context (one dynamic
partition per registered database; the sensor keeps the partitions in sync with the catalog)."""

from dagster import AssetSelection, Definitions, define_asset_job

from assets.databases.assets import schema_context, seed_databases
from assets.databases.sensors import seed_catalog_sensor

DATABASE_ASSETS = [seed_databases, schema_context]

seed_job = define_asset_job(
    "seed_databases_job",
    selection=AssetSelection.assets(*DATABASE_ASSETS),
    description="Register a seed database's metadata and render its prompt context.",
)

defs = Definitions(assets=DATABASE_ASSETS, jobs=[seed_job], sensors=[seed_catalog_sensor])
