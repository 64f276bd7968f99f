"""Job 2, ABISS §5: evaluate system agents in dialogues with the simulated user council, over a
database's validated (or imported) dataset."""

from dagster import AssetSelection, Definitions, define_asset_job

from assets.databases.definitions import DATABASE_ASSETS
from assets.interaction.assets import INTERACTION_ASSETS

interaction_job = define_asset_job(
    "abiss_interaction_job",
    selection=AssetSelection.assets(*DATABASE_ASSETS, *INTERACTION_ASSETS),
    description="ABISS §5: evaluate system agents in dialogues with the simulated user council.",
)

defs = Definitions(assets=INTERACTION_ASSETS, jobs=[interaction_job])
