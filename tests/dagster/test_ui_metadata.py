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


def test_metadata_tables_fit_the_value_column_at_1366px():
    """#42 item 7: the decision table's reasons and the funnel's third header were cut at ~995 px.
    The widest row a table can show (every cell at its cut, headers with their descriptions) fits
    the value column."""
    from assets.abiss.assets import FUNNEL_COLUMNS, TABLE_CELL_CHARS
    from assets.shared.io_manager import UI_TABLE_CHARS

    decisions = 16 + len("passed") + TABLE_CELL_CHARS + 4 * len(DECISION_COLUMNS)
    assert decisions <= UI_TABLE_CHARS, decisions
    funnel_headers = sum(max(len(name), len(desc)) + 4 for name, _, desc in FUNNEL_COLUMNS)
    assert funnel_headers <= UI_TABLE_CHARS, funnel_headers
