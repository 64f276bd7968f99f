"""`quandary import`: ABISS JSON files into a dataset-like artifact, streamed (issue 23 item 9).

A 56 MB file took 82 s: the whole file became Python objects at once and sqlglot parsed every
gold query (bench/bench_import.py). Now records are decoded one at a time
(:mod:`pipelines.core.jsonstream`), checked one at a time with the record checks of
:mod:`pipelines.abiss.outputs` (SQLite's own parser first), and converted in batches of
``outputs.BATCH_ROWS`` rows into columnar frames staged on disk, one folder per partition. Only when
every file has been read to its end is anything stored, one artifact version per partition: a
truncated or damaged file, or one bad record, writes nothing. Memory holds one batch of records
and, at the end, one partition's table (which every reader of the artifact loads anyway).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import polars as pl

from pipelines.abiss.outputs import AbissFormatError, iter_abiss_batches, number_interpretations
from storage.artifacts import ArtifactVersion
from storage.faults import storage_cause, storage_error
from storage.paths import quandary_home
from storage.stores import StoredVersion, artifact_store


class ImportFileError(AbissFormatError):
    """A file of the import is unreadable, not an ABISS list, or holds a bad record; ``path`` names it."""

    def __init__(self, path: str | Path, message: str):
        super().__init__(message)
        self.path = str(path)


def _file_batches(path: str | Path, batch: int | None) -> Iterator[pl.DataFrame]:
    """:func:`iter_abiss_batches`, its failures as :class:`ImportFileError` naming ``path``."""
    try:
        yield from iter_abiss_batches(path, batch)
    except AbissFormatError as exc:
        raise ImportFileError(path, str(exc)) from None
    except OSError as exc:  # missing, unreadable, a folder
        raise ImportFileError(path, exc.strerror or str(exc)) from None


def _stage(paths: Sequence[str | Path], staging: Path, batch: int | None) -> dict[str, list[Path]]:
    """Every file's records, checked, as Parquet parts per partition under ``staging`` (in file order)."""
    parts: dict[str, list[Path]] = {}
    folders: dict[str, Path] = {}  # numbered: a db_id is data, not a path, until the store checks it
    for path in paths:
        for frame in _file_batches(path, batch):
            for (db_id,), part in frame.group_by("db_id", maintain_order=True):
                if db_id not in folders:
                    folders[db_id] = staging / str(len(folders))
                    folders[db_id].mkdir()
                out = folders[db_id] / f"{len(parts.setdefault(db_id, [])):06d}.parquet"
                try:
                    part.write_parquet(out, compression="lz4", statistics=False)
                except Exception as exc:  # polars reports a full disk as a ComputeError (#45 item 5)
                    if isinstance(exc, OSError) or storage_cause(exc, out):
                        raise storage_error(exc, out, "cannot stage the import in") from None
                    raise
                parts[db_id].append(out)
    return parts


def import_abiss_files(
    paths: Sequence[str | Path],
    asset: str,
    batch: int | None = None,
    on_version: Callable[[ArtifactVersion | StoredVersion], None] | None = None,
) -> list[ArtifactVersion | StoredVersion]:
    """Read every file, then store one version of ``asset`` per database id, in id order.

    Nothing is stored unless every file reads to its end with every record valid
    (:class:`ImportFileError` otherwise). Several files are one import: a partition's version holds
    its records from all of them, in the order given."""
    versions = []
    store = artifact_store()  # the deployment's store: a shared bucket in distributed mode
    with tempfile.TemporaryDirectory(prefix=".import-staging-", dir=quandary_home()) as tmp:
        parts = _stage(paths, Path(tmp), batch)
        for db_id in sorted(parts):
            frame = number_interpretations(pl.read_parquet(parts[db_id]))
            versions.append(version := store.write_version(frame, asset, db_id))
            if on_version:
                on_version(version)
    return versions
