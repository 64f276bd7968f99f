"""#30 item 6: the plan line of an interaction run counts what the run will do, also when the
questions come from `quandary import` (``imported_dataset``), not the pipeline's ``dataset``."""

import polars as pl

from assets.cards import INTERACTION
from pipelines.abiss.outputs import DATASET_SCHEMA
from storage.stores import artifact_store
from tests.interaction.helpers import question_row

SUBS = ("answerable", "missing_entity", "lexical_vagueness")


def _questions(n: int) -> pl.DataFrame:
    rows = [question_row(SUBS[i % 3], f"Question number {i}?", sql="SELECT 1", qid=f"q{i}") for i in range(n)]
    return pl.DataFrame(rows, schema=DATASET_SCHEMA)  # the dataset's own declared schema


def test_the_plan_counts_an_imported_dataset(isolated_home):
    cfg = INTERACTION.config(agents=["a", "b"], modes=["ground_truth", "predicted"], max_steps=1)
    empty = INTERACTION.estimate("university", cfg)
    assert empty.items.startswith("0 conversations") and "no dataset for 'university'" in empty.detail

    artifact_store().write_version(_questions(6), "imported_dataset", "university")
    plan = INTERACTION.estimate("university", cfg)
    # was "0 conversations ... LLM calls: none": the card read only `dataset`
    assert plan.items.startswith("24 conversations (6 questions × 2 modes × 2 agents")
    assert plan.calls == 24 * (2 * 1 + 2) and plan.detail == "questions from imported_dataset"

    capped = INTERACTION.estimate("university", INTERACTION.config(agents=["a"], modes=["predicted"], max_questions=4))
    assert capped.items.startswith("4 conversations")
    only_pipeline = INTERACTION.estimate("university", INTERACTION.config(agents=["a"], source="dataset"))
    assert only_pipeline.items.startswith("0 conversations")  # the run would find no questions either

    artifact_store().write_version(_questions(3), "dataset", "university")  # the pipeline's dataset wins
    assert INTERACTION.estimate("university", cfg).items.startswith("12 conversations")
