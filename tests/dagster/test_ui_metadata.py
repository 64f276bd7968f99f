"""#24 item 7: what the UI shows: rates rounded, decision tables led by the columns that matter."""

import polars as pl
from dagster import MetadataValue

from assets.abiss.assets import DECISION_COLUMNS
from assets.shared.io_manager import artifact_output


def test_rates_in_metadata_are_rounded():
    out = artifact_output(
        pl.DataFrame({"a": [1]}),
        rejection_rate=MetadataValue.float(1 / 6),
        share=2 / 3,
        by_stage=MetadataValue.json({"s03": 1 / 3}),
        n=MetadataValue.int(7),
    )
    assert out.metadata["rejection_rate"].value == 0.167
    assert out.metadata["share"].value == 0.667
    assert out.metadata["by_stage"].data == {"s03": 0.333}
    assert out.metadata["n"].value == 7


def test_decision_tables_lead_with_candidate_passed_reason():
    assert [c[0] for c in DECISION_COLUMNS[:3]] == ["candidate_id", "passed", "reason"]
