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
