"""#31 item 7: what the asset page shows is shaped to be read there — Markdown tables rounded to 3
digits, narrow, and short enough to render in place — and a fresh instance has no community pop-up."""

import polars as pl

from assets.shared.io_manager import UI_INLINE_MARKDOWN_CHARS, preview_markdown
from storage.paths import dagster_home


def test_tables_are_rounded_and_fit_in_place():
    df = pl.DataFrame({"stage": [f"s{i:02d}_stage_with_a_long_name" for i in range(60)], "rate": [1 / 6] * 60})
    md = preview_markdown(df, rows=60)
    assert "0.167" in md and "0.1666" not in md
    assert len(md) < UI_INLINE_MARKDOWN_CHARS
    shown = sum(1 for line in md.splitlines() if "_long_name" in line)
    assert 0 < shown < 60 and f"{60 - shown} more row(s)" in md
    wide = preview_markdown(pl.DataFrame({"question": ["x" * 300]}))
    assert max(len(cell) for cell in wide.splitlines()[2].split("|")) <= 42  # cells cut at 40 characters
    assert "more row" not in preview_markdown(df.head(3))


def test_a_fresh_instance_turns_off_the_community_popup(tmp_path, monkeypatch):
    from dagster import DagsterInstance  # lazy: dagster is slow to import

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "fresh"))
    home, _ = dagster_home()
    assert DagsterInstance.get().nux_enabled is False
    # an instance file written before keeps its settings and gains the switch, once
    old = tmp_path / "old"
    old.mkdir()
    (old / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(old))
    dagster_home()
    dagster_home()
    assert (old / "dagster.yaml").read_text() == "telemetry:\n  enabled: false\nnux:\n  enabled: false\n"
    (old / "dagster.yaml").write_text("nux:\n  enabled: true\n")
    dagster_home()
    assert (old / "dagster.yaml").read_text() == "nux:\n  enabled: true\n"  # the operator's choice stays


def test_a_wide_preview_shows_the_columns_that_fit_and_names_the_others():
    """#42 item 7: the dataset's 17 columns were cut after the second at 1,366 px. The preview keeps
    the columns that fit the value column side by side (a wide one skipped for narrower ones after
    it) and names the rest, and still renders in place."""
    from assets.shared.io_manager import UI_TABLE_CHARS

    df = pl.DataFrame(
        {"candidate_id": ["c" * 16] * 3, "question": ["How many " + "x" * 200] * 3}
        | {f"col_{i:02d}": [f"value {i}"] * 3 for i in range(15)}
    )
    md = preview_markdown(df)
    header = md.splitlines()[0]
    shown = [c.strip() for c in header.strip("|").split("|")]
    widest_row = max(len(line) for line in md.splitlines() if line.startswith("|"))
    assert widest_row <= UI_TABLE_CHARS + len(shown)  # what the cells hold, plus the separators
    assert shown[:2] == ["candidate_id", "question"] and len(shown) < df.width
    hidden = [c for c in df.columns if c not in shown]
    assert f"{len(hidden)} more column(s), in the artifact: {', '.join(hidden)}" in md
    assert len(md) < UI_INLINE_MARKDOWN_CHARS
