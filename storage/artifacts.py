"""Content-addressed, immutable Parquet artifacts (plain Python; the IO manager wraps this).

Layout under ``$QUANDARY_HOME/artifacts``::

    <asset>/<partition>/<sha256[:20]>.parquet   one file per distinct content, never overwritten
    <asset>/<partition>/LATEST                  name of the latest version (atomically replaced)
    <asset>/<partition>/versions.jsonl          append-only history: file, hash, rows, time

Unpartitioned assets use the partition folder ``__all__``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipelines.paths import artifacts_dir

UNPARTITIONED = "__all__"


@dataclass(frozen=True)
class ArtifactVersion:
    asset: str
    partition: str
    path: Path
    content_hash: str
    row_count: int


def parquet_bytes(df: pl.DataFrame) -> bytes:
    buf = io.BytesIO()
    # Fixed settings so equal frames give equal bytes (and so equal content hashes).
    df.write_parquet(buf, compression="zstd", statistics=False)
    return buf.getvalue()


def content_hash(df: pl.DataFrame) -> str:
    return hashlib.sha256(parquet_bytes(df)).hexdigest()


def _folder(asset: str, partition: str | None, root: Path | None) -> Path:
    return (root or artifacts_dir()) / asset / (partition or UNPARTITIONED)


def write_version(
    df: pl.DataFrame, asset: str, partition: str | None = None, root: Path | None = None
) -> ArtifactVersion:
    """Store ``df`` as a new immutable version (or reuse identical content) and mark it latest."""
    folder = _folder(asset, partition, root)
    folder.mkdir(parents=True, exist_ok=True)
    data = parquet_bytes(df)
    digest = hashlib.sha256(data).hexdigest()
    path = folder / f"{digest[:20]}.parquet"
    if not path.exists():
        tmp = folder / f".{path.name}.{os.getpid()}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, path)
    pointer_tmp = folder / f".LATEST.{os.getpid()}.tmp"
    pointer_tmp.write_text(path.name)
    os.replace(pointer_tmp, folder / "LATEST")
    with open(folder / "versions.jsonl", "a") as fh:
        fh.write(json.dumps({"file": path.name, "hash": digest, "rows": df.height, "at": time.time()}) + "\n")
    return ArtifactVersion(asset, partition or UNPARTITIONED, path, digest, df.height)


def latest_path(asset: str, partition: str | None = None, root: Path | None = None) -> Path | None:
    pointer = _folder(asset, partition, root) / "LATEST"
    if not pointer.exists():
        return None
    path = pointer.parent / pointer.read_text().strip()
    return path if path.exists() else None


def read_latest(asset: str, partition: str | None = None, root: Path | None = None) -> pl.DataFrame:
    path = latest_path(asset, partition, root)
    if path is None:
        where = f"{asset}[{partition}]" if partition else asset
        raise FileNotFoundError(f"no materialized version of {where}; materialize it first")
    return pl.read_parquet(path)


def latest_paths_by_asset(root: Path | None = None) -> dict[str, list[Path]]:
    """Every asset's latest file per partition (what the audit catalog exposes)."""
    base = root or artifacts_dir()
    out: dict[str, list[Path]] = {}
    if not base.exists():
        return out
    for asset_dir in sorted(p for p in base.iterdir() if p.is_dir()):
        paths = []
        for part_dir in sorted(p for p in asset_dir.iterdir() if p.is_dir()):
            path = latest_path(asset_dir.name, part_dir.name, base)
            if path is not None:
                paths.append(path)
        if paths:
            out[asset_dir.name] = paths
    return out
