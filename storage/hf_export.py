"""A Hugging Face datasets layout for any table Quandary stores (#24 item 5)::

    <out>/README.md                        dataset card: YAML header (licence, configs, features) + text
    <out>/data/<split>-00000-of-00001.parquet

``datasets.load_dataset("parquet", data_dir="<out>/data")``, ``datasets.load_dataset("<out>")`` (the
card's ``configs`` name each split's files) and ``polars.read_parquet("<out>/data/*.parquet")`` load
it. The card lists the features (column types), counts per split and per grouping column, and the
provenance the caller passes (source database hash, council members and models, prompt and code
versions, licence).
"""

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import yaml

SPLIT_FILE = "{split}-00000-of-00001.parquet"


@dataclass
class DatasetCard:
    name: str  # e.g. "quandary-dataset-university"
    description: str
    license: str  # SPDX-like id or a sentence ("other: the seed database's own")
    provenance: dict = field(default_factory=dict)  # key -> value (str, list or dict)
    count_by: tuple[str, ...] = ()  # columns to count rows by (subcategory, corpus, ...)
    attachments: dict = field(default_factory=dict)  # file name -> Markdown written beside README.md (linked from it)


def split_name(value) -> str:
    """A split name the datasets library accepts (``\\w+``)."""
    name = re.sub(r"\W+", "_", str(value or "test")).strip("_")
    return name or "test"


def _value(dtype: pl.DataType) -> str:
    """A scalar column's ``datasets`` Value type."""
    if dtype == pl.String or dtype == pl.Categorical:
        return "string"
    if dtype == pl.Boolean:
        return "bool"
    if dtype.is_integer() or dtype.is_float():
        return str(dtype).lower()
    if dtype == pl.Datetime:
        return "timestamp[us]"
    if dtype == pl.Date:
        return "date32"
    return "string"


def _feature(dtype: pl.DataType) -> dict:
    """One column's type in the card format ``datasets`` reads (``Features._to_yaml_list``, #42 item
    6): ``dtype: string``; a list ``list: string``, or ``list:`` the fields of its struct; a struct
    ``struct:`` a list of ``{name, dtype | list | struct}`` (a mapping there made
    ``datasets.load_dataset(PATH)`` fail with "'str' object is not a mapping")."""
    if isinstance(dtype, pl.List | pl.Array):
        inner = _feature(dtype.inner)
        only = next(iter(inner.values())) if len(inner) == 1 and set(inner) <= {"dtype", "struct"} else None
        return {"list": only if only is not None else inner}
    if isinstance(dtype, pl.Struct):
        return {"struct": [{"name": f.name, **_feature(f.dtype)} for f in dtype.fields]}
    return {"dtype": _value(dtype)}


def _features(df: pl.DataFrame) -> list[dict]:
    return [{"name": name, **_feature(dtype)} for name, dtype in df.schema.items()]


def typed(df: pl.DataFrame, schema: dict | None = None) -> pl.DataFrame:
    """``df`` with a fixed schema: the columns of ``schema`` first, in its order and types (a missing
    one all null of its type), then the others; a column with no type (``Null``: no row had a
    value) becomes a string column, so the Parquet file's schema is the card's and does not change
    with the next export (#31 item 5)."""
    schema = schema or {}
    if schema:
        df = df.with_columns(
            (pl.col(c) if c in df.columns else pl.lit(None)).cast(t).alias(c) for c, t in schema.items()
        ).select([*schema, *(c for c in df.columns if c not in schema)])
    nulls = {c: _untyped(t) for c, t in df.schema.items() if _has_null(t)}
    return df.with_columns(pl.col(c).cast(t) for c, t in nulls.items()) if nulls else df


def _has_null(dtype: pl.DataType) -> bool:
    if dtype == pl.Null:
        return True
    if isinstance(dtype, pl.List):
        return _has_null(dtype.inner)
    if isinstance(dtype, pl.Struct):
        return any(_has_null(f.dtype) for f in dtype.fields)
    return False


def _untyped(dtype: pl.DataType) -> pl.DataType:
    if dtype == pl.Null:
        return pl.String
    if isinstance(dtype, pl.List):
        return pl.List(_untyped(dtype.inner))
    if isinstance(dtype, pl.Struct):
        return pl.Struct([pl.Field(f.name, _untyped(f.dtype)) for f in dtype.fields])
    return dtype


def splits_of(df: pl.DataFrame, split_column: str | None = "split", default: str = "test") -> dict[str, pl.DataFrame]:
    """Rows by their ``split_column`` value (sanitised), or all in ``default``."""
    if split_column and split_column in df.columns and df.height:
        return {
            split_name(key[0]): part for key, part in sorted(df.group_by(split_column), key=lambda kv: str(kv[0][0]))
        }
    return {split_name(default): df}


def write_hf_dataset(out: Path, splits: dict[str, pl.DataFrame], card: DatasetCard) -> dict[str, int]:
    """Write the layout under ``out`` (created; existing split files are replaced). Returns rows per split."""
    out = Path(out)
    data = out / "data"
    data.mkdir(parents=True, exist_ok=True)
    for old in data.glob("*-00000-of-00001.parquet"):
        old.unlink()
    splits = {name: typed(df) for name, df in splits.items()}
    counts, sizes, files = {}, {}, 0
    for split, df in splits.items():
        path = data / SPLIT_FILE.format(split=split)
        df.write_parquet(path)
        counts[split] = df.height
        sizes[split] = int(df.to_arrow().nbytes)
        files += path.stat().st_size
    first = next(iter(splits.values()))
    header = {
        "license": card.license,
        "pretty_name": card.name,
        "configs": [
            {"config_name": "default", "data_files": [{"split": s, "path": f"data/{s}-*.parquet"} for s in splits]}
        ],
        "dataset_info": {
            "features": _features(first),
            # what `datasets` requires of each split: name, num_bytes (Arrow size), num_examples
            "splits": [{"name": s, "num_bytes": sizes[s], "num_examples": n} for s, n in counts.items()],
            "download_size": files,
            "dataset_size": sum(sizes.values()),
        },
    }
    lines = [
        "---",
        yaml.safe_dump(header, sort_keys=False, allow_unicode=True).rstrip(),
        "---",
        "",
        f"# {card.name}",
        "",
        card.description,
        "",
        "## Loading",
        "",
        "```python",
        "import datasets, polars as pl",
        f'ds = datasets.load_dataset("parquet", data_dir="{out.name}/data")',
        f'df = pl.read_parquet("{out.name}/data/*.parquet")',
        "```",
        "",
        "## Features",
        "",
        "| column | type |",
        "|---|---|",
    ]
    lines += [f"| `{name}` | {dtype} |" for name, dtype in first.schema.items()]
    lines += ["", "## Counts", "", "| split | rows |", "|---|---|"]
    lines += [f"| {s} | {n} |" for s, n in counts.items()]
    everything = pl.concat(list(splits.values()), how="diagonal_relaxed") if splits else first
    for column in card.count_by:
        if column in everything.columns and everything.height:
            lines += ["", f"| {column} | rows |", "|---|---|"]
            lines += [
                f"| {k} | {n} |" for k, n in sorted(everything.group_by(column).len().rows(), key=lambda kv: str(kv[0]))
            ]
    lines += ["", "## Provenance", "", "| | |", "|---|---|"]
    for key, value in card.provenance.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
        lines.append(f"| {key} | {text.replace('|', '/')} |")
    lines += ["", f"Licence: {card.license}.", ""]
    (out / "README.md").write_text("\n".join(lines))
    for name, text in card.attachments.items():
        (out / name).write_text(text)
    return counts
