"""Job 3, AmbiTab: convert one source corpus into leakage-aware task records, evaluate asking
policies on them, and train an asker (all partitioned by corpus)."""

from dagster import AssetSelection, Definitions, define_asset_job

from assets.ambitab.corpus import AMBITAB_ASSETS
from assets.ambitab.evaluation import AMBITAB_EVAL_ASSETS
from assets.ambitab.training import AMBITAB_TRAIN_ASSETS

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

ambitab_train_job = define_asset_job(
    "ambitab_train_job",
    selection=AssetSelection.assets(*AMBITAB_TRAIN_ASSETS),
    description="AmbiTab asker training: multi-turn GRPO on one corpus's training split (partition); a checkpoint.",
)

defs = Definitions(
    assets=[*AMBITAB_ASSETS, *AMBITAB_EVAL_ASSETS, *AMBITAB_TRAIN_ASSETS],
    jobs=[ambitab_corpus_job, ambitab_eval_job, ambitab_train_job],
)
