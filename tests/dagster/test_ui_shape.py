"""#31 item 7: what the asset page shows is shaped to be read there — Markdown tables rounded to 3
digits, narrow, and short enough to render in place — and a fresh instance has no community pop-up."""

import polars as pl

from assets.shared.io_manager import UI_INLINE_MARKDOWN_CHARS, preview_markdown
from storage.paths import dagster_home


def test_tables_are_rounded_and_fit_in_place():
    df = pl.DataFrame({"stage": [f"s{i:02d}_long_name" for i in range(60)], "rate": [1 / 6] * 60})
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
    it) and names the rest, and still renders in place. The value column shows ~45 monospace
    characters there (a screenshot of a ruler), 34 beside a long key (UI_TABLE_CHARS)."""
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
    assert shown[:2] == ["candidate_id", "col_00"] and "question" not in shown  # a narrower one after it
    hidden = [c for c in df.columns if c not in shown]
    assert f"{len(hidden)} more column(s), in the artifact: {', '.join(hidden)}" in md
    assert len(md) < UI_INLINE_MARKDOWN_CHARS


def test_table4_reads_whole_in_the_value_column_and_its_headers_are_explained():
    """#42 item 7: Table 4 was cut after "Cls." at 1,366 px; the asset page gets it one block per
    agent, every line within the value column, and its headers explained in one line."""
    from assets.interaction.assets import UI_LINE_CHARS
    from pipelines.interaction.metrics import TABLE4_LEGEND, table4_narrow_lines

    agent = "a_rather_long_agent_name_from_a_module:WithAClass"
    rows = [
        {"table": "table4", "agent": agent, "mode": mode, "metric": metric, "subcategory": None, "value": value}
        for mode, metric, value in [
            ("predicted", "rec", 1.0),
            ("predicted", "cls", 0.5),
            ("predicted", "ex", 0.25),
            ("ground_truth", "ex", 1 / 3),
            ("predicted", "fb", None),
            ("predicted", "incomplete", 0.0),
        ]
    ]
    lines = table4_narrow_lines(rows)
    assert lines and max(len(line) for line in lines) <= UI_LINE_CHARS, lines
    assert any(line.strip().startswith("Rec.") and "Cls." in line for line in lines)
    assert any(line.strip().startswith("EX") and "(GT" in line for line in lines)
    for header in ("Rec.", "Cls.", "EX", "FB", "Incompl.", "GT"):
        assert f"{header}:" in TABLE4_LEGEND or f"({header})" in TABLE4_LEGEND
    assert "\n" not in TABLE4_LEGEND


def test_a_long_code_block_renders_in_place_with_lines_that_fit():
    """#42 item 7: the schema context's 1,500-character SQL preview was behind [Show Markdown]."""
    from assets.shared.io_manager import UI_TABLE_CHARS, code_markdown

    ddl = "\n".join(
        f"CREATE TABLE t{i} (id INTEGER PRIMARY KEY, a_rather_long_column_name TEXT, b REAL);" for i in range(40)
    )
    md = code_markdown(ddl, "sql")
    body = md.split("```")[1].splitlines()[1:]
    assert len(md) < UI_INLINE_MARKDOWN_CHARS and body and max(len(line) for line in body) < UI_TABLE_CHARS
    assert f"{40 - len(body)} more line(s): the whole text is the artifact" in md
    assert code_markdown("SELECT 1", "sql") == "```sql\nSELECT 1\n```"


def _score(sub, mode, agent="a", outcome=True, status="scored"):
    from pipelines.abiss.taxonomy import SUBCATEGORY_BY_ID

    s = SUBCATEGORY_BY_ID[sub]
    solvable = s.solvable
    return {
        "agent": agent,
        "mode": mode,
        "subcategory": sub,
        "group": s.group.value,
        "recognition": True,
        "classification": outcome,
        "solved": (outcome if status == "scored" else None) if solvable else None,
        "explained": None if solvable else (outcome if status == "scored" else None),
        "ex_status": status if solvable else "n/a",
        "fb_status": "n/a" if solvable else status,
        "end": "sql",
        "n_turns": 1,
        "n_clarifications": 0,
        "n_relevant": 0,
        "n_technical": 0,
        "n_irrelevant": 0,
        "air_cases": 0,
        "air_terminal": 0,
    }


def test_figure2_and_the_report_head_read_whole_in_the_value_column():
    """#42 item 7: Figure 2 and the interaction report were behind "[Show Markdown]". On the page
    they are text within the value column and under the inline limit; a subcategory with no decided
    item reads "–", never 0 (nor a 0-length bar in the PNG)."""
    from assets.interaction.assets import UI_LINE_CHARS
    from assets.shared.io_manager import code_markdown
    from pipelines.abiss.taxonomy import SUBCATEGORIES
    from pipelines.interaction import metrics as M
    from pipelines.interaction.modes import MODES

    scores = [
        _score(s.id, m, agent, outcome=i % 2 == 0) for i, s in enumerate(SUBCATEGORIES) for m in MODES for agent in "ab"
    ]
    scores = [s for s in scores if not (s["subcategory"] == "improper_question" and s["mode"] == "taxonomy_free")]
    scores.append(_score("improper_question", "taxonomy_free", status="undecided"))
    rows = M.metric_rows(scores)
    fig = M.figure2_lines(rows, UI_LINE_CHARS)
    assert max(len(line) for line in fig) <= UI_LINE_CHARS, fig
    assert len(code_markdown("\n".join(fig))) < UI_INLINE_MARKDOWN_CHARS
    by_name = {line[: UI_LINE_CHARS - 16].strip(): line[UI_LINE_CHARS - 16 :].split() for line in fig}
    assert by_name["Answerable"] == ["100"] * 4  # the first subcategory: every conversation solved
    assert by_name["Answerable with Evide…"] == ["0"] * 4 and "Missing User Knowledge" in by_name
    assert by_name["Improper Question"] == ["100", "100", "100", "–"]  # undecided: "–", not 0
    assert "1 undecided item(s) left out" in " ".join(fig)
    head = M.report_summary_lines(rows, UI_LINE_CHARS)
    assert max(len(line) for line in head) <= UI_LINE_CHARS, head
    assert "PROVISIONAL:" in head[0] and any(line.startswith("Table 5") for line in head)
    assert len(code_markdown("\n".join(head))) < UI_INLINE_MARKDOWN_CHARS


def test_a_wide_nested_schema_renders_in_place():
    """#42 item 7: interaction_conversations' 36 columns with nested types made its schema ~1,500
    characters of Markdown, behind "[Show Markdown]"; it is a list under the inline limit, long
    types cut, the columns left out named as in the artifact."""
    from assets.shared.io_manager import schema_markdown
    from pipelines.interaction.tables import TURN_SCHEMA

    md = schema_markdown(TURN_SCHEMA)
    assert len(md) < UI_INLINE_MARKDOWN_CHARS
    assert md.startswith("- `conversation_id`: String")
    assert all(len(line) < 100 for line in md.splitlines())
    shown = sum(1 for line in md.splitlines() if line.startswith("- "))
    assert shown == len(TURN_SCHEMA) or f"{len(TURN_SCHEMA) - shown} more, in the artifact's schema" in md


def test_the_report_head_keeps_table_5s_undecided_marks_within_the_value_column():
    """#42 item 7: a provisional run's Table 5 cells carry their undecided items ("57.1 +7?"), which
    made its lines 40+ characters: past the value column's edge, where the marks that say the rate
    is provisional are cut off. The head stays within the width, every mark whole."""
    from assets.interaction.assets import UI_LINE_CHARS
    from pipelines.abiss.taxonomy import SUBCATEGORIES
    from pipelines.interaction import metrics as M
    from pipelines.interaction.modes import MODES

    agents = "abcdefghijkl"
    scores = [
        _score(s.id, m, a, outcome=i % 2 == 0) for i, s in enumerate(SUBCATEGORIES) for m in MODES for a in agents
    ]
    for n, s in enumerate(SUBCATEGORIES):  # some undecided items beside the decided ones
        scores += [_score(s.id, m, "a", status="undecided") for m in MODES for _ in range(1 + n % 3)]
    rows = M.metric_rows(scores)
    head = M.report_summary_lines(rows, UI_LINE_CHARS)
    assert max(len(line) for line in head) <= UI_LINE_CHARS, "\n".join(head)
    table = head[head.index("Table 5, mean over agents, %") + 1 :]
    marks = [c for r in rows if r["table"] == "table5" and r["agent"] == "mean" if (c := M._cell(r)).endswith("?")]
    assert marks and all(any(mark in line for line in table) for mark in marks), (marks, table)


def test_table4_on_the_asset_page_says_undecided_where_the_report_does():
    """Trust first: agent a's EX has 18 undecided items beside 9 decided, so the report prints
    "– +18?" (no rate: the few decided items say nothing). The asset page's Table 4 printed the rate
    over the 9 (55.6) with no mark, under a legend that says "– = undecided"."""
    from assets.interaction.assets import UI_LINE_CHARS
    from pipelines.abiss.taxonomy import SUBCATEGORIES
    from pipelines.interaction import metrics as M
    from pipelines.interaction.modes import MODES

    scores = [_score(s.id, m, a, outcome=i % 2 == 0) for i, s in enumerate(SUBCATEGORIES) for m in MODES for a in "ab"]
    for n, s in enumerate(SUBCATEGORIES):
        scores += [_score(s.id, m, "a", status="undecided") for m in MODES for _ in range(1 + n % 3)]
    rows = M.metric_rows(scores)
    ex = {r["agent"]: r for r in rows if r["table"] == "table4" and r["metric"] == "ex" and r["mode"] == "predicted"}
    assert M.undecided_rate(ex["a"]) and not M.undecided_rate(ex["b"])  # the case this test is about
    narrow = M.table4_narrow_lines(rows)
    blocks = {"a": narrow[narrow.index("a") + 1 : narrow.index("b")], "b": narrow[narrow.index("b") + 1 :]}
    lines = {a: next(line for line in block if line.split()[0] == "EX") for a, block in blocks.items()}
    undecided, rate = M._cell(ex["a"]).strip(), M._cell(ex["b"]).strip()
    assert undecided.startswith("–") and lines["a"] == f"  EX   {undecided} (GT {undecided})", lines["a"]
    assert lines["b"] == f"  EX   {rate:>5} (GT {rate})", lines["b"]
    assert max(len(line) for line in narrow) <= UI_LINE_CHARS, narrow


def test_paths_and_hashes_have_short_forms_that_keep_the_whole_value():
    """Round 2 of #42 item 7: a path (~100 characters) or a content hash (64 digits) is one run of
    characters the value column cannot wrap: it widened the column past the page's edge. The page
    shows the file's name (cut to UI_TOKEN_CHARS) as a link whose title and target are the whole
    location, and the hash's first 16 digits (the whole one is the data version)."""
    from assets.shared.io_manager import UI_TOKEN_CHARS, location_of, path_markdown, short_hash

    location = "/home/a user/projects/quandary/.quandary/artifacts/s07_unsolvability_verification/" + (
        "european_football_2/" + "f" * 20 + ".parquet"
    )
    md = path_markdown(location).md_str
    text = md[1 : md.index("](")]
    assert text == "f" * 20 + ".parquet" and location_of(path_markdown(location)) == location
    assert " " not in md[md.index("](") : md.index(' "')]  # the target is one URL (file:///home/a%20user/...)
    long_name = path_markdown("s3://bucket/charts/" + "university_" * 6 + ".png").md_str
    assert len(long_name[1 : long_name.index("](")]) <= UI_TOKEN_CHARS and "….png]" in long_name
    assert short_hash("0123456789abcdef" * 4) == "0123456789abcdef…"


def test_no_preview_cell_is_wider_than_the_table_may_be():
    """A preview column of 60-character ids is cut to the table's room, not shown past the edge."""
    from assets.shared.io_manager import UI_CELL_PADDING, UI_TABLE_CHARS

    md = preview_markdown(pl.DataFrame({"id": ["x" * 60] * 2, "n": [1, 2]}))
    cells = [c.strip() for line in md.splitlines() if line.startswith("| x") for c in line.strip("|").split("|")]
    assert cells and max(len(c) for c in cells) <= UI_TABLE_CHARS - UI_CELL_PADDING, cells
