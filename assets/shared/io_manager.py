"""Dagster IO manager over :mod:`storage.artifacts`: versioned, content-addressed Parquet.

Every materialization writes an immutable Parquet file named by its content hash (identical
content is reused, never overwritten) and records path, row count, schema, content hash and a
preview as metadata. Loading returns the latest version of the requested partition(s); a
downstream asset that depends on several partitions gets them concatenated.

Assets should return :func:`artifact_output`, which also sets the content hash as the Dagster
data version, so the UI's staleness and lineage reflect content, not run time.

In distributed mode (a shared-state database) the IO manager — the one resource every step of every
job opens — also keeps the run's heartbeat (:mod:`storage.heartbeats`) from its setup to its
teardown, so a run whose worker died on any machine is recognised as dead.
"""

import re
import warnings
from pathlib import Path

import polars as pl
from dagster import (
    ConfigurableIOManager,
    DagsterInvariantViolationError,
    DataVersion,
    InitResourceContext,
    InputContext,
    MetadataValue,
    Output,
    OutputContext,
)
from pydantic import PrivateAttr

from storage.artifacts import KeyedRows, content_hash
from storage.stores import artifact_store

PREVIEW_ROWS = 5
# Definition metadata of a table whose runs add results (#42 item 2): a run that produced no rows
# never replaces the rows stored before it, unless the run is tagged REPLACE_WITH_EMPTY=true.
GROWING = "quandary/growing"
REPLACE_WITH_EMPTY = "quandary/replace_with_empty"


class EmptyReplacement(ValueError):
    """A growing table's run produced no rows while rows are stored: nothing was written."""


def _refuse_empty_replacement(context: OutputContext, store, asset: str, partition: str | None, obj) -> None:
    if obj.height or not (context.definition_metadata or {}).get(GROWING):
        return
    try:
        asked = context.step_context.dagster_run.tags.get(REPLACE_WITH_EMPTY) == "true"
    except (DagsterInvariantViolationError, AttributeError):  # a context built outside a run
        asked = False
    if asked or store.latest_location(asset, partition) is None:
        return
    stored = store.read_latest(asset, partition).height
    if stored:
        where = f" ({partition})" if partition else ""
        raise EmptyReplacement(
            f"{asset}{where}: this run produced no rows and would replace the {stored} stored ones; nothing "
            f"was stored (tag the run {REPLACE_WITH_EMPTY}=true to empty it on purpose)"
        )


def _asset_name(context) -> str:
    return "__".join(context.asset_key.path)


# The Dagster UI renders a Markdown metadata value in place on the asset page below this length,
# longer ones only behind "[Show Markdown]" (ui-core MetadataEntry.tsx; tests/cli/test_ui.py)
UI_INLINE_MARKDOWN_CHARS = 1000


# What the value column of the asset page's metadata table shows at 1,366 px beside Dagster's
# navigation and definition panels (it ends at ~995 px, #42 item 7), measured in headless Chromium
# beside a long key (`llm_calls_saved_by_short_circuit` widens the key column): 294 px from the
# cell's left, 13 px of padding, 8.4 px a character of the monospace font values use (33 characters
# of text or code); a Markdown table is 8.4 px a character + 18 px a column + 5 px (UI_CELL_PADDING
# characters a column). Table rows and code lines do not wrap, so a wider one is cut.
UI_TABLE_CHARS = 34
UI_CELL_PADDING = 3
# The longest unbreakable run of characters a value may hold. The table sizes its value column to
# the widest such run of any row: one 100-character path or 64-character hash made the column wider
# than the page, and then every row's text ran past the edge, wrapping lists and tables included
# (round 2 of #42 item 7). Paths and hashes are shown in short forms (path_markdown, short_hash).
UI_TOKEN_CHARS = 32


def short_hash(digest: str) -> str:
    """A content hash as the asset page shows it: its first 16 hex digits (the whole hash is the
    version's Dagster data version and names its file)."""
    return digest if len(digest) <= 16 else digest[:16] + "…"


def _short_name(name: str, limit: int = UI_TOKEN_CHARS) -> str:
    if len(name) <= limit:
        return name
    stem, dot, suffix = name.rpartition(".")
    if not dot or len(suffix) > 8:
        stem, suffix = name, ""
    keep = limit - len(suffix) - (2 if suffix else 1)
    return stem[:keep] + "…" + (f".{suffix}" if suffix else "")


def path_markdown(location: str) -> MetadataValue:
    """A file's location (a local path or a store URL) as asset metadata that reads whole at 1,366 px:
    a link whose text is the file's name (cut to :data:`UI_TOKEN_CHARS`), to the file, with the
    whole location as its title (hover) and target (copy the link). A path value is one unbreakable
    line: 100 characters widened the value column past the page (round 2 of #42 item 7).
    :func:`location_of` reads the location back."""
    location = str(location)
    name = location.rstrip("/").rsplit("/", 1)[-1] or location
    target = location if "://" in location else Path(location).absolute().as_uri()
    title = location.replace("\\", "\\\\").replace('"', '\\"')
    text = _short_name(name).replace("[", "\\[").replace("]", "\\]")
    return MetadataValue.md(f'[{text}]({target} "{title}")')


def location_of(value) -> str:
    """The location a :func:`path_markdown` value (or a plain path value) names."""
    if isinstance(value, MetadataValue) and not hasattr(value, "md_str"):
        return str(value.value)
    text = value.md_str if hasattr(value, "md_str") else str(value)
    found = re.search(r'\]\(\S+ "((?:[^"\\]|\\.)*)"\)$', text)
    if not found:
        raise ValueError(f"not a path_markdown value: {text[:80]!r}")
    return re.sub(r"\\(.)", r"\1", found.group(1))


def preview_markdown(
    df: pl.DataFrame,
    rows: int = PREVIEW_ROWS,
    width: int = 40,
    limit: int | None = UI_INLINE_MARKDOWN_CHARS,
    columns_chars: int | None = UI_TABLE_CHARS,
) -> str:
    """``df``'s first ``rows`` rows as a Markdown table shaped for the asset page (#31 item 7): floats
    to :data:`METADATA_DIGITS` digits, cells cut at ``width`` characters, and — unless ``limit`` is
    None — as many rows as fit in ``limit`` characters, so it renders in place; a last line says how
    many rows were left out. Unless ``columns_chars`` is None, only the columns that fit in that
    many characters side by side (in the frame's order; a wide one is skipped for the narrower
    ones after it) so none is cut off at 1,366 px; a line names the others (#42 item 7)."""
    if df.width == 0:
        return "_empty table_"
    head = df.head(rows)

    if columns_chars is not None:
        width = min(width, columns_chars - UI_CELL_PADDING)  # one cell never wider than the table may be

    def cell(v) -> str:
        if isinstance(v, float):
            v = round(v, METADATA_DIGITS)
        text = "" if v is None else str(v).replace("|", "\\|").replace("\n", " ")
        return text if len(text) <= width else text[: width - 1] + "…"

    cols, hidden = list(head.columns), []
    if columns_chars is not None:
        room, cols = columns_chars, []
        for name in head.columns:
            if head.height and head[name].null_count() == head.height:
                hidden.append(name)  # nothing to see in the rows shown: room for a column with values
                continue
            need = max([len(name), *(len(cell(v)) for v in head[name])]) + UI_CELL_PADDING
            if need <= room:
                cols.append(name)
                room -= need
            else:
                hidden.append(name)
        if not cols:  # one column wider than the room: show it cut rather than nothing
            cols, hidden = hidden[:1], hidden[1:]
        head = head.select(cols)

    note = ""
    if hidden:
        names = ", ".join(hidden)
        note = f"\n_{len(hidden)} more column(s), in the artifact: {names if len(names) <= 240 else names[:239] + '…'}_"
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in head.iter_rows()]
    if limit is not None:
        size = sum(len(line) + 1 for line in lines) + len(note)
        kept = []
        for line in body:
            if size + len(line) + 1 > limit - 40:  # room for the "rows left out" line
                break
            kept.append(line)
            size += len(line) + 1
        left_out = df.height - len(kept)
        body = kept + ([f"\n_{left_out} more row(s): the full table is the artifact_"] if left_out > 0 else [])
    if note:
        body.append(note)
    return "\n".join(lines + body)


def list_markdown(items: list[str], more: str = "in the artifact", limit: int = UI_INLINE_MARKDOWN_CHARS) -> str:
    """``items`` as a Markdown bullet list: unlike a table row, a list item wraps in the value
    column, so long text (a stage's reasons) reads whole at 1,366 px (#42 item 7). As many items as
    keep it under ``limit`` characters (it renders in place); a last line says how many more, where."""
    out, size = [], 0
    for i, item in enumerate(items):
        line = "- " + item.replace("\n", " ")
        if size + len(line) + 1 > limit - 80:
            out.append(f"\n_{len(items) - i} more, {more}_")
            break
        out.append(line)
        size += len(line) + 1
    return "\n".join(out) or "_none_"


def schema_markdown(schema) -> str:
    """A frame's columns and types as a list that renders in place (#42 item 7): the conversations'
    nested types made it ~1,500 characters, behind "[Show Markdown]"; a long type is cut (the
    artifact's Parquet schema has it whole)."""
    items = []
    for name, dtype in schema.items():
        kind = str(dtype)
        items.append(f"`{name}`: {kind if len(kind) <= 60 else kind[:59] + '…'}")
    return list_markdown(items, more="in the artifact's schema")


def code_markdown(
    text: str, lang: str = "", more: str = "the whole text is the artifact", width: int = UI_TABLE_CHARS - 1
) -> str:
    """``text`` as a code block that renders in place on the asset page at 1,366 px (#42 item 7):
    lines cut to ``width``, the value column's (a code line does not wrap; a page whose keys are
    short has a wider one), as many lines as keep it under the inline limit; a last line says how
    many more, where."""
    lines = [line if len(line) <= width else line[: width - 1] + "…" for line in text.splitlines()]
    kept, size = [], len(lang) + 8 + 80
    for line in lines:
        if size + len(line) + 1 > UI_INLINE_MARKDOWN_CHARS:
            break
        kept.append(line)
        size += len(line) + 1
    note = f"\n_{len(lines) - len(kept)} more line(s): {more}_" if len(kept) < len(lines) else ""
    return f"```{lang}\n" + "\n".join(kept) + "\n```" + note


METADATA_DIGITS = 3  # rates and shares as the UI shows them: 0.167, not 0.16666666666666666


def rounded(value):
    """A metadata value with its floats rounded to :data:`METADATA_DIGITS` (also in JSON values)."""
    if isinstance(value, float):
        return round(value, METADATA_DIGITS)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    kind = type(value).__name__
    if kind == "FloatMetadataValue" and value.value is not None:
        return MetadataValue.float(round(value.value, METADATA_DIGITS))
    if kind == "JsonMetadataValue":
        return MetadataValue.json(rounded(value.data))
    return value


def artifact_output(df: pl.DataFrame, **metadata) -> Output:
    """Wrap an asset's table: content hash as data version plus the caller's metadata (floats rounded)."""
    with warnings.catch_warnings():
        # `Output(data_version=...)` is marked beta; it is the documented way to version content.
        warnings.simplefilter("ignore")
        return Output(
            df, data_version=DataVersion(content_hash(df)), metadata={k: rounded(v) for k, v in metadata.items()}
        )


def keyed_output(rows: pl.DataFrame, key, legacy_fill: dict | None = None, **metadata) -> Output:
    """A growing table's output: only this run's rows and their key. The IO manager merges them into
    the rows stored *when it writes* (under a lock or compare-and-swap), so two runs writing the same
    table at once both keep their rows (issue 34 item 1); the stored total is ``dagster/row_count``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Output(
            KeyedRows(rows, tuple(key), tuple((legacy_fill or {}).items())),
            data_version=DataVersion(content_hash(rows)),
            metadata={k: rounded(v) for k, v in metadata.items()},
        )


def _run_id(context: OutputContext) -> str | None:
    """The producing run (recorded in the distributed version history), if the context has one."""
    try:
        return context.run_id
    except (DagsterInvariantViolationError, AttributeError):  # a context built outside a run (tests)
        return None


class VersionedParquetIOManager(ConfigurableIOManager):
    """Writes polars DataFrames as immutable Parquet versions under ``base_dir``."""

    base_dir: str | None = None  # default: $QUANDARY_ARTIFACTS_URL if set (a bucket), else $QUANDARY_HOME/artifacts
    _heartbeat = PrivateAttr(default=None)

    def __init__(self, **data):
        from assets.shared.checked_config import check_resource_config_on_launch
        from assets.shared.resources import check_paths_on_launch

        super().__init__(**data)
        check_resource_config_on_launch(self, check_paths_on_launch(write=("base_dir",)))

    def setup_for_execution(self, context: InitResourceContext) -> None:
        from storage.state_db import state_engine

        engine = state_engine()
        run = context.run  # None when the resource is built outside a run
        if engine is not None and run is not None:  # distributed mode: beat while this run executes
            from storage.heartbeats import Heartbeat

            self._heartbeat = Heartbeat(engine, run.run_id).start()

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None

    def _store(self):
        """The store chosen by the deployment (storage.backends.artifact_store), or ``base_dir``."""
        return artifact_store(self.base_dir or None)

    def handle_output(self, context: OutputContext, obj: pl.DataFrame) -> None:
        if obj is None:
            return
        partition = context.partition_key if context.has_partition_key else None
        if isinstance(obj, KeyedRows):
            version, merged = self._store().upsert(obj, _asset_name(context), partition, run_id=_run_id(context))
            self._describe(
                context,
                version,
                merged.frame,
                stored_rows_added=MetadataValue.int(merged.added),
                stored_rows_replaced=MetadataValue.int(merged.replaced),
                stored_rows_kept=MetadataValue.int(merged.kept),
            )
            return
        if not isinstance(obj, pl.DataFrame):
            raise TypeError(
                f"{context.asset_key.to_user_string()} returned {type(obj).__name__}; expected a polars DataFrame"
            )
        if obj.width == 0:
            # a frame without columns has no schema: every later reader (export, audit, the next
            # run's upsert) would find the stored file unreadable (#31 item 1); zero rows is fine
            raise ValueError(
                f"{context.asset_key.to_user_string()} produced a table with no columns; nothing was stored"
            )
        _refuse_empty_replacement(context, self._store(), _asset_name(context), partition, obj)
        version = self._store().write_version(obj, _asset_name(context), partition, run_id=_run_id(context))
        self._describe(context, version, obj)

    @staticmethod
    def _describe(context: OutputContext, version, obj: pl.DataFrame, **extra) -> None:
        context.add_output_metadata(
            {
                "path": path_markdown(str(version.path)),
                "dagster/row_count": MetadataValue.int(version.row_count),
                "content_hash": MetadataValue.text(short_hash(version.content_hash)),
                "schema": MetadataValue.md(schema_markdown(obj.schema)),
                "preview": MetadataValue.md(preview_markdown(obj)),
                **extra,
            }
        )

    def load_input(self, context: InputContext) -> pl.DataFrame:
        asset = _asset_name(context)
        store = self._store()
        if context.has_asset_partitions:
            keys = list(context.asset_partition_keys)
        else:
            keys = [None]
        frames = []
        for key in keys:
            frames.append(store.read_latest(asset, key))  # FileNotFoundError: "materialize it first"
        return frames[0] if len(frames) == 1 else pl.concat(frames, how="diagonal_relaxed")
