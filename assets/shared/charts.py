"""Charts on an asset's page: where an asset's PNG goes, and the metadata that shows it.

Why a module of its own: every asset with a chart wants the same two things, a file that an
earlier materialization's chart is never overwritten by, and the image shown on the asset page
(Dagster renders Markdown metadata, so the PNG travels inline as a base64 data URI beside its
path); a report too long for the page goes the same way as a text file. The drawing itself is domain code writing through ``storage.charts.png_chart``::

    png = funnel_png(funnel, chart_path(context, "rejection_report", df))
    yield artifact_output(df, **chart_metadata(png, "validation funnel"))
"""

import base64
import os
from pathlib import Path

import polars as pl
from dagster import AssetExecutionContext, MetadataValue

from assets.shared.io_manager import path_markdown
from storage.artifacts import content_hash
from storage.charts import publish_chart
from storage.paths import artifacts_dir, path_segment


def chart_path(context: AssetExecutionContext, asset_folder: str, df: pl.DataFrame) -> Path:
    """``<artifacts>/<asset_folder>/charts/<partition>_<content hash of df>.png``: named by the data
    it shows, so, like the Parquet artifacts, an earlier chart is never overwritten. The partition key
    must be a safe file name (``storage.paths.path_segment``)."""
    partition = path_segment(context.partition_key, "partition key")
    return artifacts_dir() / asset_folder / "charts" / f"{partition}_{content_hash(df)[:16]}.png"


def chart_metadata(
    png: Path, alt: str, *, image_key: str = "chart", path_key: str = "chart_path"
) -> dict[str, MetadataValue]:
    """The chart as asset metadata: the image itself (``image_key``, Markdown with the PNG inline)
    and where it is kept (``path_key``): the file on one machine, its object in a shared store."""
    data = base64.b64encode(Path(png).read_bytes()).decode()
    return {
        image_key: MetadataValue.md(f"![{alt}](data:image/png;base64,{data})"),
        path_key: path_markdown(publish_chart(png)),
    }


def report_file_metadata(
    context: AssetExecutionContext, asset_folder: str, df: pl.DataFrame, text: str, *, key: str = "report_path"
) -> dict[str, MetadataValue]:
    """A report too long to read in place on the asset page (#42 item 7) as a text file named and
    kept like the charts (:func:`chart_path`, ``.txt``) and published the same way; its path as
    metadata (``key``)."""
    path = chart_path(context, asset_folder, df).with_suffix(".txt")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.txt")
    tmp.write_text(text + "\n", encoding="utf-8")
    os.replace(tmp, path)  # readers see the old file or the new one, never half of one
    return {key: path_markdown(publish_chart(path))}
