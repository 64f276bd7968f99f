"""Cascade outputs: survivors, the final dataset, council votes, rejection report, ABISS JSON.

Survivors are a join, never a copy: the survivors of stage k are the candidates whose
stage-k decision passed (stage k only decides candidates that survived stage k-1).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import sqlglot

from pipelines.abiss.ids import stable_id
from pipelines.abiss.taxonomy import SUBCATEGORY_BY_ID, Group, subcategory
from pipelines.core.jsonstream import JsonStreamError, iter_json_list
from storage.charts import png_chart
from storage.paths import UnsafePathError, path_segment

DATASET_COLUMNS = (
    "question_id",
    "candidate_id",
    "group_id",
    "db_id",
    "question",
    "evidence",
    "sql",
    "hidden_knowledge",
    "feedback",
    "subcategory",
    "category",
    "group",
    "is_solvable",
    "style",
    "difficulty",
    "generator",
    "interpretation_index",
)

# The fixed types of DATASET_COLUMNS: every dataset (and every export of one) has them all, typed,
# also when no row has a value (a null-typed column would break a consumer's schema on the next one).
DATASET_SCHEMA: dict[str, pl.DataType] = {
    **{c: pl.String for c in DATASET_COLUMNS},
    "is_solvable": pl.Boolean,
    "interpretation_index": pl.Int64,
}

VOTE_SCHEMA = {
    "member": pl.String,
    "comparison": pl.String,
    "vote": pl.String,
    "parsed_ok": pl.Boolean,
    "llm_call_id": pl.String,
}
DECISION_SCHEMA = {
    "candidate_id": pl.String,
    "stage": pl.String,
    "stage_no": pl.Int64,
    "applies": pl.Boolean,
    "passed": pl.Boolean,
    "reason": pl.String,
    "n_votes": pl.Int64,
    "calls_saved": pl.Int64,
    "votes": pl.List(pl.Struct(VOTE_SCHEMA)),
}


def decisions_frame(decisions: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(decisions, schema=DECISION_SCHEMA)


def survivors(candidates: pl.DataFrame, previous_decisions: pl.DataFrame | None) -> pl.DataFrame:
    if previous_decisions is None:
        return candidates
    passed = previous_decisions.filter(pl.col("passed")).select("candidate_id")
    return candidates.join(passed, on="candidate_id", how="semi")


def council_votes_frame(stage_decisions: list[pl.DataFrame]) -> pl.DataFrame:
    """One row per vote; ``seq`` keeps the order within a decision (e.g. a stage-7 solve attempt
    before the judges' votes on it), and ``vote_id`` depends only on the vote's own decision."""
    schema = {"vote_id": pl.String, "candidate_id": pl.String, "stage": pl.String, "seq": pl.Int64, **VOTE_SCHEMA}
    frames = []
    for d in stage_decisions:
        if d.height == 0:
            continue
        exploded = (
            d.select("candidate_id", "stage", "votes")
            .explode("votes")
            .drop_nulls("votes")
            .unnest("votes")
            .with_columns(pl.int_range(pl.len()).over("candidate_id", "stage").cast(pl.Int64).alias("seq"))
        )
        frames.append(exploded)
    if not frames:
        return pl.DataFrame(schema=schema)
    votes = pl.concat(frames, how="diagonal_relaxed")
    ids = [
        stable_id("vote", c, s, q, m, cmp)
        for c, s, q, m, cmp in votes.select("candidate_id", "stage", "seq", "member", "comparison").iter_rows()
    ]
    return votes.with_columns(pl.Series("vote_id", ids)).select(list(schema))


def dataset_frame(candidates: pl.DataFrame, final_decisions: pl.DataFrame) -> pl.DataFrame:
    kept = survivors(candidates, final_decisions)
    rows = []
    for r in kept.iter_rows(named=True):
        sub = subcategory(r["subcategory"])
        rows.append(
            {
                "question_id": stable_id("q", r["candidate_id"]),
                "candidate_id": r["candidate_id"],
                "group_id": r["group_id"],
                "db_id": r["db_id"],
                "question": r["question"],
                "evidence": r.get("evidence"),
                "sql": r.get("sql") if sub.solvable else None,
                "hidden_knowledge": r.get("hidden_knowledge"),
                "feedback": r.get("feedback"),
                "subcategory": sub.id,
                "category": sub.category,
                "group": sub.group.value,
                "is_solvable": sub.solvable,
                "style": r["style"],
                "difficulty": r["difficulty"],
                "generator": r["generator"],
                "interpretation_index": r.get("interpretation_index"),
            }
        )
    return pl.DataFrame(rows, schema=DATASET_SCHEMA)


def rejection_report_frame(candidates: pl.DataFrame, stage_decisions: list[pl.DataFrame]) -> pl.DataFrame:
    """entered / rejected / rate per stage × subcategory × generator (applicable candidates only)."""
    frames = []
    for d in stage_decisions:
        if d.height == 0:
            continue
        meta = candidates.select("candidate_id", "subcategory", "generator", "db_id")
        frames.append(
            d.filter(pl.col("applies"))
            .join(meta, on="candidate_id", how="left")
            .group_by("db_id", "stage_no", "stage", "subcategory", "generator")
            .agg(
                pl.len().alias("entered"),
                (~pl.col("passed")).sum().alias("rejected"),
                pl.col("n_votes").sum().alias("votes"),
                pl.col("calls_saved").sum().alias("calls_saved"),
            )
        )
    schema = {
        "db_id": pl.String,
        "stage_no": pl.Int64,
        "stage": pl.String,
        "subcategory": pl.String,
        "generator": pl.String,
        "entered": pl.Int64,
        "rejected": pl.Int64,
        "rejection_rate": pl.Float64,
        "votes": pl.Int64,
        "calls_saved": pl.Int64,
    }
    if not frames:
        return pl.DataFrame(schema=schema)
    out = pl.concat(frames).with_columns(
        pl.col("entered").cast(pl.Int64),
        pl.col("rejected").cast(pl.Int64),
        pl.col("votes").cast(pl.Int64),
        pl.col("calls_saved").cast(pl.Int64),
        (pl.col("rejected") / pl.col("entered")).alias("rejection_rate"),
    )
    return out.select(list(schema)).sort("stage_no", "subcategory", "generator")


def funnel(candidates: pl.DataFrame, stage_decisions: list[pl.DataFrame]) -> list[tuple[str, int, int]]:
    """(stage, entering, surviving) for the whole partition, in stage order (decisions given per stage)."""
    # lazy: the cascade's stages load the LLM client (litellm, the embedded server)
    from pipelines.abiss.stages import STAGES

    out = [("candidates", candidates.height, candidates.height)]
    for spec, d in zip(STAGES, stage_decisions):
        name = d["stage"][0] if d.height else spec.key  # an empty stage still has its name
        out.append((name, d.height, int(d["passed"].sum()) if d.height else 0))
    return out


def funnel_text(rows: list[tuple[str, int, int]]) -> str:
    width = max(len(r[0]) for r in rows)
    top = max(1, rows[0][1])
    lines = []
    for name, entered, kept in rows:
        bar = "█" * round(40 * kept / top)
        lost = entered - kept
        lines.append(f"{name:<{width}}  {kept:>5} kept  {lost:>4} rejected  {bar}")
    return "\n".join(lines)


# The Dagster UI renders a Markdown metadata value in place on the asset page only when it is
# shorter than this (ui-core MetadataEntry.tsx, ``expandSmallValues``); longer ones hide behind
# "[Show Markdown]", as a PNG in a data URI always does.
UI_INLINE_MARKDOWN_CHARS = 1000


# Characters of a metadata value the asset page shows without scrolling at 1,366 px (its value
# column shows about 30 monospace characters, tests/dagster/test_ui_screenshot.py): wider lines hid the bars.
UI_VALUE_COLUMN_CHARS = 30


def funnel_chart_md(
    rows: list[tuple[str, int, int]], limit: int = UI_INLINE_MARKDOWN_CHARS, width_chars: int = UI_VALUE_COLUMN_CHARS
) -> str:
    """The funnel as a text bar chart in a Markdown code block the UI shows in place: under ``limit``
    characters and, where the counts allow, lines of at most ``width_chars`` (names shortened
    first, then the bars), so the bars are in view beside the stage names (#31 item 7)."""
    top = max(1, rows[0][1])
    counts = [f"{kept}/{entered}" for _, entered, kept in rows]
    c = max(len("kept/in"), *(len(x) for x in counts))
    text = ""
    for bar_width, name_len in ((12, 18), (10, 16), (8, 14), (6, 12), (4, 10), (0, 10)):
        names = [(r[0] if len(r[0]) <= name_len else r[0][: name_len - 1] + "…") for r in rows]
        w = max(len(n) for n in names)
        lines = [f"{'stage':<{w}} {'kept/in':>{c}}" + (" survivors" if bar_width else "")]
        for n, x, (_, _, kept) in zip(names, counts, rows):
            bar = "█" * round(bar_width * kept / top) if bar_width else ""
            lines.append(f"{n:<{w}} {x:>{c}}" + (f" {bar}" if bar else ""))
        text = "```\n" + "\n".join(lines) + "\n```"
        if len(text) < limit and max(len(line) for line in lines) <= width_chars:
            return text
    return text


def funnel_png(rows: list[tuple[str, int, int]], path: Path) -> Path:
    """The validation funnel as horizontal bars: candidates surviving each stage."""
    names = [r[0] for r in rows][::-1]
    kept = [r[2] for r in rows][::-1]
    with png_chart(path, figsize=(7, 0.35 * len(rows) + 1)) as ax:
        ax.barh(names, kept, color="#4C78A8")
        for y, v in enumerate(kept):
            ax.text(v, y, f" {v}", va="center", fontsize=8)
        ax.set_xlabel("candidates surviving")
        ax.set_title("ABISS validation funnel")
    return path


# ----------------------------------------------------------------------------- ABISS JSON


# The reference code's category vocabulary (``categories/*.py``: get_name / get_subname), which
# its loader resolves by (name, subname). Export writes it; import accepts it and ours.
REFERENCE_CATEGORY: dict[str, tuple[str, str | None]] = {
    "answerable": ("Answerable", "Without Evidence"),
    "answerable_with_evidence": ("Answerable", "With Evidence"),
    "scope_ambiguity": ("Structure Ambiguity", "Scope Ambiguity"),
    "attachment_ambiguity": ("Structure Ambiguity", "Attachment Ambiguity"),
    "lexical_overlap": ("Semantic Mapping Ambiguity", "Lexical Overlap"),
    "entity_ambiguity": ("Semantic Mapping Ambiguity", "Entity Ambiguity"),
    "lexical_vagueness": ("Lexical Vagueness", None),
    "missing_user_knowledge": ("Missing User Knowledge", None),
    "conflicting_knowledge": ("Conflicting Knowledge", None),
    "missing_entity": ("Missing Schema Elements", "Missing Entities or Attributes"),
    "missing_relationship": ("Missing Schema Elements", "Missing Relationships"),
    "missing_external_knowledge": ("Missing External Knowledge", None),
    "improper_question": ("Improper Question", None),
}
# Difficulty: the reference enum writes ``highly_complex``; Quandary's label is ``highly complex``.
REFERENCE_DIFFICULTY = {"highly complex": "highly_complex"}
_DIFFICULTY_FROM_REFERENCE = {v: k for k, v in REFERENCE_DIFFICULTY.items()}


def reference_category(sub_id: str) -> dict:
    sub = subcategory(sub_id)
    name, subname = REFERENCE_CATEGORY[sub.id]
    return {"name": name, "subname": subname, "answerable": sub.group is Group.ANSWERABLE, "solvable": sub.solvable}


def to_abiss_records(dataset: pl.DataFrame) -> list[dict]:
    """The ABISS reference JSON layout (one record per NLQ object), loadable by the reference code.

    As the reference writes them: answerable records omit ``hidden_knowledge`` and ``is_solvable``;
    absent evidence / SQL are ``null``; an unanswerable record's ``hidden_knowledge`` is its
    expected feedback. A question without a difficulty (unanswerable, no SQL) is written
    ``simple`` because the reference loader requires the field.
    """
    records = []
    for r in dataset.iter_rows(named=True):
        sub = subcategory(r["subcategory"])
        difficulty = r.get("difficulty") or "simple"
        rec = {
            "db_id": r["db_id"],
            "question": r["question"],
            "evidence": r.get("evidence") or None,
            "sql": (r.get("sql") or None) if sub.solvable else None,
            "category": reference_category(sub.id),
            "question_style": r["style"],
            "question_difficulty": REFERENCE_DIFFICULTY.get(difficulty, difficulty),
        }
        if sub.group is not Group.ANSWERABLE:
            rec["hidden_knowledge"] = r.get("hidden_knowledge") or r.get("feedback") or ""
            rec["is_solvable"] = sub.solvable
        # Quandary extras, ignored by the reference loader:
        rec.update(subcategory_id=sub.id, group_id=r.get("group_id"), generator=r.get("generator"))
        records.append(rec)
    return records


_SUB_BY_NAMES = {(s.category.lower(), s.name.lower()): s for s in SUBCATEGORY_BY_ID.values()}
_SUB_BY_NAME = {s.name.lower(): s for s in SUBCATEGORY_BY_ID.values()}
_SUB_BY_REFERENCE = {
    (name.lower(), (subname or "").lower()): SUBCATEGORY_BY_ID[sid]
    for sid, (name, subname) in REFERENCE_CATEGORY.items()
}


class AbissFormatError(ValueError):
    pass


def _text(rec: dict, key: str, i: int, required: bool = False) -> str | None:
    """A string field of record ``i``; None when absent or empty; a clear error otherwise."""
    if key not in rec:
        if required:
            raise AbissFormatError(f"record {i}: missing field {key!r}")
        return None
    value = rec[key]
    if value is None or value == "":
        if required:
            raise AbissFormatError(f"record {i}: field {key!r} is empty")
        return None
    if not isinstance(value, str):
        raise AbissFormatError(f"record {i}: field {key!r} must be a string, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate (JSON "\ud800"): no file or table can store it
        raise AbissFormatError(
            f"record {i}: field {key!r} holds text that is not valid Unicode (a lone surrogate escape such as "
            f"\\u{ord(value[exc.start]):04x} at character {exc.start}); fix the record"
        ) from None
    return value


def _subcategory_of(rec: dict, i: int):
    cat = rec.get("category")
    if not isinstance(cat, dict):
        raise AbissFormatError(
            f"record {i}: "
            + ("malformed (category must be an object)" if "category" in rec else "missing field 'category'")
        )
    sub_id = rec.get("subcategory_id")
    subname = cat.get("subname")
    sub = (
        (SUBCATEGORY_BY_ID.get(sub_id) if isinstance(sub_id, str) else None)
        or _SUB_BY_REFERENCE.get((str(cat.get("name")).lower(), "" if subname is None else str(subname).lower()))
        or _SUB_BY_NAMES.get((str(cat.get("name")).lower(), str(cat.get("subname")).lower()))
        or _SUB_BY_NAME.get(str(cat.get("subname")).lower())
    )
    if sub is None:
        raise AbissFormatError(f"record {i}: unknown category {cat!r}")
    return sub


_LEADING_SELECT = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/|\()*(?:SELECT|VALUES)\b", re.IGNORECASE | re.DOTALL)


def _check_sql(sql: str | None, sub, i: int) -> None:
    """A solvable record needs gold SQL that parses (the interaction benchmark executes it).

    SQLite's own parser decides first (microseconds); sqlglot only sees what SQLite refuses, so
    its errors name the problem and what it accepts today still imports (issue 23 item 9)."""

    from pipelines.sqltools.syntax import sqlite_parses  # lazy: keeps `quandary` start-up light

    if sql is None:
        raise AbissFormatError(f"record {i}: {sub.category} / {sub.name} is solvable but has no 'sql'")
    # SQLite's parser: one statement; a SELECT there cannot write. Anything else (a WITH ending in
    # DELETE, a DROP of a table the empty parse database lacks) is judged by sqlglot below.
    if _LEADING_SELECT.match(sql) and sqlite_parses(sql):
        return
    try:
        statements = [st for st in sqlglot.parse(sql, read="sqlite") if st is not None]
    except Exception as exc:  # noqa: BLE001 - any parser error is a bad record
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise AbissFormatError(f"record {i}: 'sql' does not parse as SQLite ({first[:120]})") from None
    # gold is executed by the benchmarks: one read-only query, never a write, ATTACH or PRAGMA (issue 34 item 7)
    if len(statements) != 1:
        raise AbissFormatError(
            f"record {i}: 'sql' must be one read-only query, got {len(statements)} statements; keep only the query"
        )
    (statement,) = statements
    writes = (sqlglot.exp.DML, sqlglot.exp.DDL, sqlglot.exp.Command, sqlglot.exp.Pragma, sqlglot.exp.Transaction)
    if not isinstance(statement, sqlglot.exp.Query) or any(isinstance(node, writes) for node in statement.walk()):
        kind = statement.key.upper() if isinstance(statement, sqlglot.exp.Expression) else type(statement).__name__
        raise AbissFormatError(
            f"record {i}: 'sql' must be one read-only query (SELECT/WITH), got {kind}; nothing imported"
        )


def _difficulty(value: str | None) -> str:
    value = value or "simple"
    return _DIFFICULTY_FROM_REFERENCE.get(value, value)


def abiss_record_row(rec, i: int) -> dict:
    """One ABISS JSON record as a dataset row (``interpretation_index`` is numbered per table by
    :func:`number_interpretations`); a clear :class:`AbissFormatError` names record ``i``."""
    if not isinstance(rec, dict):
        raise AbissFormatError(f"record {i}: malformed (expected an object, got {type(rec).__name__})")
    sub = _subcategory_of(rec, i)
    db_id, question = _text(rec, "db_id", i, True), _text(rec, "question", i, True)
    try:
        path_segment(db_id, "db_id")  # it becomes the partition folder of the imported artifact
    except UnsafePathError as exc:
        raise AbissFormatError(f"record {i}: {exc}") from None
    hk, sql = _text(rec, "hidden_knowledge", i), _text(rec, "sql", i)
    if sub.solvable:
        _check_sql(sql, sub, i)
    candidate_id = stable_id("imp", db_id, question, sql, hk)
    return {
        "question_id": stable_id("q", candidate_id),
        "candidate_id": candidate_id,
        # ABISS JSON has no group id: readings of one ambiguous question share its text
        "group_id": _text(rec, "group_id", i) or stable_id("grp", db_id, question, sub.id),
        "db_id": db_id,
        "question": question,
        "evidence": _text(rec, "evidence", i),
        "sql": sql if sub.solvable else None,
        "hidden_knowledge": hk if sub.group is not Group.UNANSWERABLE else None,
        "feedback": hk if sub.group is Group.UNANSWERABLE else None,
        "subcategory": sub.id,
        "category": sub.category,
        "group": sub.group.value,
        "is_solvable": sub.solvable,
        "style": _text(rec, "question_style", i) or "formal",
        "difficulty": _difficulty(_text(rec, "question_difficulty", i)),
        "generator": _text(rec, "generator", i) or "imported",
        "interpretation_index": None,
    }


def dataset_rows_frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=DATASET_SCHEMA)


def number_interpretations(df: pl.DataFrame) -> pl.DataFrame:
    """The readings of an ambiguous question, numbered 0, 1, ... in file order within their group."""
    return df.with_columns(
        pl.when(pl.col("group") == Group.AMBIGUOUS.value)
        .then(pl.int_range(pl.len()).over("group_id").cast(pl.Int64))
        .otherwise(None)
        .alias("interpretation_index")
    )


def from_abiss_records(records: list[dict]) -> pl.DataFrame:
    """Read the ABISS JSON layout back into a dataset frame; clear errors name the record."""
    if not isinstance(records, list):
        raise AbissFormatError("expected a JSON list of records")
    return number_interpretations(dataset_rows_frame([abiss_record_row(rec, i) for i, rec in enumerate(records)]))


def write_abiss_json(dataset: pl.DataFrame, path: str | Path) -> int:
    records = to_abiss_records(dataset)
    Path(path).write_text(json.dumps(records, indent=2, ensure_ascii=False))
    return len(records)


# `quandary import` converts this many records at a time (pipelines/abiss/importing.py)
BATCH_ROWS = 20_000


def iter_abiss_batches(path: str | Path, batch: int | None = None) -> Iterator[pl.DataFrame]:
    """The records of one ABISS JSON file as dataset frames of at most ``batch`` rows (interpretations
    not yet numbered); :class:`AbissFormatError` names the record or byte where the file goes wrong."""
    rows: list[dict] = []
    n, batch = 0, batch or BATCH_ROWS
    try:
        for n, rec in enumerate(iter_json_list(path), start=1):
            rows.append(abiss_record_row(rec, n - 1))
            if len(rows) >= batch:
                yield dataset_rows_frame(rows)
                rows = []
    except JsonStreamError as exc:
        raise AbissFormatError(str(exc)) from None
    if n == 0:
        raise AbissFormatError("no records (the file holds an empty list)")
    if rows:
        yield dataset_rows_frame(rows)


def read_abiss_json(path: str | Path) -> pl.DataFrame:
    """The whole file as one frame (small files; `quandary import` streams, see importing.py)."""
    try:
        frames = list(iter_abiss_batches(path))
    except AbissFormatError as exc:
        raise AbissFormatError(f"{path}: {exc}") from None
    return number_interpretations(pl.concat(frames))


# `quandary import` writes here unless told otherwise: its own asset, next to the pipeline's dataset
IMPORTED_ASSET = "imported_dataset"
