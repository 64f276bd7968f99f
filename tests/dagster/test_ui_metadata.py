"""#24 item 7: what the UI shows: rates rounded, decision tables led by the columns that matter."""

import polars as pl
from dagster import MetadataValue

from assets.shared.io_manager import artifact_output
from pipelines.abiss.stages import STAGES


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


def test_stage_decisions_read_whole_rejections_first():
    """#42 item 7: a decision table's reasons were cut at ~45 characters; as a Markdown list each
    reason wraps and reads whole, rejections first, in place (under the inline limit)."""
    from assets.abiss.assets import REASON_CHARS, _decisions_table
    from assets.shared.io_manager import UI_INLINE_MARKDOWN_CHARS

    long_reason = "the SQL returns no rows on the seed database, so the answerable question has no answer " * 3
    decisions = pl.DataFrame(
        {
            "candidate_id": [f"c{i:02d}" for i in range(30)],
            "applies": [True] * 29 + [False],
            "passed": [True, False] * 15,
            "reason": [long_reason] * 30,
        }
    )
    md = _decisions_table(decisions, []).value
    items = [line for line in md.splitlines() if line.startswith("- ")]
    assert items[0].startswith("- **rejected** `c01`: the SQL returns no rows")
    assert len(items[0]) <= len("- **rejected** `c01`: ") + REASON_CHARS
    assert len(md) < UI_INLINE_MARKDOWN_CHARS and f"{29 - len(items)} more, in this stage's artifact" in md
    assert "c29" not in md  # not applicable: not a decision


def test_metadata_tables_fit_the_value_column_at_1366px():
    """#42 item 7: the funnel's third header was cut at ~995 px (a long column description widened
    the second): its three columns fit the value column. Its cells wrap at spaces (a table value,
    not Markdown), so each column needs its longest word; the headers' font is ~0.7 of the cells'
    (measured in the screenshot test, which checks the page itself)."""
    from assets.abiss.assets import FUNNEL_COLUMNS, short_stage
    from assets.shared.io_manager import UI_CELL_PADDING, UI_TABLE_CHARS

    # headers show the names (descriptions are behind "Show schema"); the widest cells a run writes
    words = {"stage": [w for s in STAGES for w in short_stage(s.key).split()], "rejected": ["999/999"], "kept": ["999"]}
    row = sum(max(0.7 * len(name), *map(len, words[name])) + UI_CELL_PADDING for name, _, _ in FUNNEL_COLUMNS)
    assert row <= UI_TABLE_CHARS, row
