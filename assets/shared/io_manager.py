"""Dagster IO manager over :mod:`storage.artifacts`: versioned, content-addressed Parquet.

Every materialization writes an immutable Parquet file named by its content hash (identical
content is reused, never overwritten) and records path, row count, schema, content hash and a
preview as metadata. Loading returns the latest version of the requested partition(s); a
downstream asset that depends on several partitions gets them concatenated.

Assets should return :func:`artifact_output`, which also sets the content hash as the Dagster
data version, so the UI's staleness and lineage reflect content, not run time.
"""

import warnings

import polars as pl
from dagster import (
    ConfigurableIOManager,
    DataVersion,
    InputContext,
    MetadataValue,
    Output,
    OutputContext,
)

from storage.paths import artifacts_dir
from storage.artifacts import content_hash, latest_path, write_version

PREVIEW_ROWS = 5



def _asset_name(context) -> str:
    return "__".join(context.asset_key.path)


def preview_markdown(df: pl.DataFrame, rows: int = PREVIEW_ROWS, width: int = 60) -> str:
    if df.width == 0:
        return "_empty table_"
    head = df.head(rows)
    cols = head.columns
    def cell(v) -> str:
        text = "" if v is None else str(v).replace("|", "\\|").replace("\n", " ")
        return text if len(text) <= width else text[: width - 1] + "…"
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in head.iter_rows()]
    return "\n".join(lines)


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
        return Output(df, data_version=DataVersion(content_hash(df)),
                      metadata={k: rounded(v) for k, v in metadata.items()})


class VersionedParquetIOManager(ConfigurableIOManager):
    """Writes polars DataFrames as immutable Parquet versions under ``base_dir``."""

    base_dir: str | None = None  # default: $QUANDARY_HOME/artifacts

    def _root(self):
        from pathlib import Path

        return Path(self.base_dir) if self.base_dir else artifacts_dir()

    def handle_output(self, context: OutputContext, obj: pl.DataFrame) -> None:
        if obj is None:
            return
        if not isinstance(obj, pl.DataFrame):
            raise TypeError(f"{context.asset_key.to_user_string()} returned {type(obj).__name__}; expected a polars DataFrame")
        partition = context.partition_key if context.has_partition_key else None
        version = write_version(obj, _asset_name(context), partition, self._root())
        context.add_output_metadata(
            {
                "path": MetadataValue.path(str(version.path)),
                "dagster/row_count": MetadataValue.int(version.row_count),
                "content_hash": MetadataValue.text(version.content_hash),
                "schema": MetadataValue.md(
                    "\n".join(f"- `{name}`: {dtype}" for name, dtype in obj.schema.items())
                ),
                "preview": MetadataValue.md(preview_markdown(obj)),
            }
        )

    def load_input(self, context: InputContext) -> pl.DataFrame:
        asset = _asset_name(context)
        root = self._root()
        if context.has_asset_partitions:
            keys = list(context.asset_partition_keys)
        else:
            keys = [None]
        frames = []
        for key in keys:
            path = latest_path(asset, key, root)
            if path is None:
                where = f"{asset}[{key}]" if key else asset
                raise FileNotFoundError(f"no materialized version of {where}; materialize it first")
            frames.append(pl.read_parquet(path))
        return frames[0] if len(frames) == 1 else pl.concat(frames, how="diagonal_relaxed")
