"""Job 1, ABISS §3–4: generate candidates for a seed database, run the ten validation stages, build
the dataset and its reports (partitioned by database)."""

from dagster import AssetSelection, Definitions, define_asset_job

from assets.abiss.assets import ABISS_ASSETS, CascadeSettings
from assets.databases.definitions import DATABASE_ASSETS

abiss_job = define_asset_job(
    "abiss_dataset_job",
    selection=AssetSelection.assets(*DATABASE_ASSETS, *ABISS_ASSETS),
    description="ABISS: generate candidates, run the ten validation stages, build dataset and reports.",
)

defs = Definitions(assets=ABISS_ASSETS, jobs=[abiss_job], resources={"cascade": CascadeSettings()})
