"""The one Dagster ``Definitions`` object (loaded by workspace.yaml)."""

from dagster import AssetSelection, Definitions, define_asset_job, in_process_executor

from assets.abiss import ABISS_ASSETS, CascadeSettings
from assets.ambitab import AMBITAB_ASSETS
from assets.ambitab_eval import AMBITAB_EVAL_ASSETS
from assets.aisql import AISQL_ASSETS, AisqlResource
from assets.databases import schema_context, seed_databases
from assets.interaction import INTERACTION_ASSETS
from assets.sensors import seed_catalog_sensor
from resources.dagster_resources import SafeSqlResource, SeedCatalogResource
from resources.llm.dagster_resource import CouncilResource
from storage.io_manager import VersionedParquetIOManager

DATABASE_ASSETS = [seed_databases, schema_context]

seed_job = define_asset_job(
    "seed_databases_job",
    selection=AssetSelection.assets(*DATABASE_ASSETS),
    description="Register a seed database's metadata and render its prompt context.",
)

abiss_job = define_asset_job(
    "abiss_dataset_job",
    selection=AssetSelection.assets(*DATABASE_ASSETS, *ABISS_ASSETS),
    description="ABISS: generate candidates, run the ten validation stages, build dataset and reports.",
)

ambitab_corpus_job = define_asset_job(
    "ambitab_corpus_job",
    selection=AssetSelection.assets(*AMBITAB_ASSETS),
    description="AmbiTab: convert one corpus (partition) into task records + rejects, with checks and JSONL export.",
)

ambitab_eval_job = define_asset_job(
    "ambitab_eval_job",
    selection=AssetSelection.assets(*AMBITAB_EVAL_ASSETS),
    description="AmbiTab evaluation: ask-then-solve episodes for one corpus (partition), then Table 8/10 metrics.",
)

aisql_job = define_asset_job(
    "aisql_job",
    selection=AssetSelection.assets(*AISQL_ASSETS),
    description="Stochastic Shift: AI-operator SQL on DuckDB, split execution, judges, meta-evaluation, sweep.",
)

MAIN_JOB = abiss_job.name

interaction_job = define_asset_job(
    "abiss_interaction_job",
    selection=AssetSelection.assets(*DATABASE_ASSETS, *INTERACTION_ASSETS),
    description="ABISS §5: evaluate system agents in dialogues with the simulated user council.",
)

defs = Definitions(
    assets=[*DATABASE_ASSETS, *ABISS_ASSETS, *INTERACTION_ASSETS, *AMBITAB_ASSETS, *AMBITAB_EVAL_ASSETS,
            *AISQL_ASSETS],
    jobs=[seed_job, abiss_job, interaction_job, ambitab_corpus_job, ambitab_eval_job, aisql_job],
    sensors=[seed_catalog_sensor],
    # One process: the embedded LLM server and the call-log connection are per process, and the
    # work is LLM-bound (concurrency lives inside each stage, bounded per council member).
    executor=in_process_executor,
    resources={
        "io_manager": VersionedParquetIOManager(),
        "seed_catalog": SeedCatalogResource(),
        "safe_sql": SafeSqlResource(),
        "council": CouncilResource(),
        "cascade": CascadeSettings(),
        "aisql": AisqlResource(),
    },
)
