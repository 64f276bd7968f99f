"""Job 3, AmbiTab: convert one source corpus into leakage-aware task records, then evaluate asking
policies on them (both partitioned by corpus)."""

from dagster import AssetSelection, Definitions, define_asset_job

from assets.ambitab.corpus import AMBITAB_ASSETS
from assets.ambitab.evaluation import AMBITAB_EVAL_ASSETS

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

defs = Definitions(assets=[*AMBITAB_ASSETS, *AMBITAB_EVAL_ASSETS], jobs=[ambitab_corpus_job, ambitab_eval_job])
