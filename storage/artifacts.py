"""Content-addressed, immutable Parquet artifacts (plain Python; the IO manager wraps this).

Layout under ``$QUANDARY_HOME/artifacts``::

    <asset>/<partition>/<sha256[:20]>.parquet   one file per distinct content, never overwritten
    <asset>/<partition>/LATEST                  name of the latest version (atomically replaced)
    <asset>/<partition>/versions.jsonl          append-only history: file, hash, rows, time

Unpartitioned assets use the partition folder ``__all__``.

Self-healing (issue #13 item 2): a file is trusted only if its size and sha256 match its name and
history, so a truncated or damaged file is rewritten when the same content is written again
(instead of "already exists" forever) and never served. Every write is tmp file + fsync + rename
+ fsync of the folder. A damaged ``LATEST`` is recovered from the newest verified line of
``versions.jsonl``; damaged history lines (a torn append) are skipped, and the next append starts
on a fresh line.

Growing tables (keyed upsert): :func:`upsert_rows` merges new rows into the latest stored rows of
an asset by a key. A row whose key is new is added, a row whose key is stored replaces the stored
row, every other stored row is kept as it is. The asset returns the merged frame, which is stored
as the next version like any other (nothing is ever dropped that the run did not mean to replace).

Concurrent keyed writers (issue 34 item 1): a run that read the stored rows, worked for minutes and
then wrote ``stored + its rows`` back dropped every row another run stored meanwhile (the last writer
won). A growing table is therefore written as :class:`KeyedRows` — only the run's own rows and the
key — and merged into the latest stored rows *at write time*: :func:`upsert_version` holds an
exclusive ``flock`` on the partition's ``.upsert.lock`` while it reads, merges and writes (one
machine, or a POSIX shared folder); the object store does the same with compare-and-swap on
``LATEST`` and a retried merge (:meth:`storage.stores.ObjectArtifactStore.upsert`).
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from storage.faults import StorageError, storage_error
from storage.paths import UnsafePathError, artifacts_dir, path_segment

UNPARTITIONED = "__all__"


@dataclass(frozen=True)
class ArtifactVersion:
    asset: str
    partition: str
    path: Path
    content_hash: str
    row_count: int


class SchemalessFrame(ValueError):
    """A frame with no columns: stored, it would be a file no reader can use (#31 item 1)."""


def refuse_schemaless(df: pl.DataFrame, asset: str) -> None:
    if df.width == 0:
        raise SchemalessFrame(f"{asset}: refusing to store a table with no columns (it has no schema)")


def parquet_bytes(df: pl.DataFrame) -> bytes:
    buf = io.BytesIO()
    # Fixed settings so equal frames give equal bytes (and so equal content hashes).
    df.write_parquet(buf, compression="zstd", statistics=False)
    return buf.getvalue()


def content_hash(df: pl.DataFrame) -> str:
    return hashlib.sha256(parquet_bytes(df)).hexdigest()


def _folder(asset: str, partition: str | None, root: Path | None) -> Path:
    partition = UNPARTITIONED if partition is None else partition
    return (root or artifacts_dir()) / path_segment(asset, "asset name") / path_segment(partition, "partition key")


class DamagedArtifactError(OSError):
    """A stored artifact's bytes do not match its content hash (truncated or overwritten)."""


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_atomic(path: Path, data: bytes) -> None:
    """tmp + fsync + rename; on failure the temp file is removed and a :class:`StorageError` names
    ``path`` and the cause (no space, read-only, permission)."""
    tmp = path.parent / f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp"
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        if isinstance(exc, StorageError):
            raise
        raise storage_error(exc, path, "cannot write artifact") from exc
    _fsync_dir(path.parent)


LOCK_NAME = ".lock"  # per partition: writers hold it exclusively from LATEST to the history line


class _PartitionLock:
    """``flock`` on ``<partition>/.lock``; a store that cannot hold it (read-only) goes without."""

    def __init__(self, folder: Path, exclusive: bool):
        self.folder, self.mode, self.fh = folder, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, None

    def __enter__(self):
        try:
            self.fh = open(self.folder / LOCK_NAME, "a")
        except OSError:
            if self.mode == fcntl.LOCK_EX:
                raise
            return self  # a reader of a read-only store: nothing writes there
        fcntl.flock(self.fh, self.mode)  # released when the file closes (also if the process dies)
        return self

    def __exit__(self, *exc):
        if self.fh is not None:
            self.fh.close()


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB chunks (the one helper: artifacts, the seed catalog, AmbiQT)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify_file(path: Path, digest: str | None = None, size: int | None = None) -> bool:
    """True if ``path`` holds exactly the content its name (``sha256[:20]``) and history promise."""
    try:
        if size is not None and path.stat().st_size != size:
            return False
        actual = file_sha256(path)
    except OSError:
        return False
    if digest is not None:
        return actual == digest
    return actual.startswith(path.stem)


def read_versions(folder: Path) -> list[dict]:
    """The history lines that parse (a torn or garbled line is skipped, not fatal)."""
    history = folder / "versions.jsonl"
    try:
        text = history.read_text(errors="replace")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("file"), str) and isinstance(entry.get("hash"), str):
            out.append(entry)
    return out


def _append_version(folder: Path, entry: dict) -> None:
    history = folder / "versions.jsonl"
    line = json.dumps(entry) + "\n"
    with open(history, "ab+") as fh:
        fh.seek(0, os.SEEK_END)
        if fh.tell() > 0:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":  # the previous append was torn: do not glue onto it
                line = "\n" + line
        fh.write(line.encode())
        fh.flush()
        os.fsync(fh.fileno())


def write_version(
    df: pl.DataFrame, asset: str, partition: str | None = None, root: Path | None = None, *, _locked: bool = False
) -> ArtifactVersion:
    """Store ``df`` as a new immutable version (or reuse identical content) and mark it latest.

    An existing file of the same name is reused only if its size and hash verify; otherwise it is
    damaged and rewritten. LATEST and the history line are written under the partition's lock, so a
    reader never takes the moment between them for a stale LATEST."""
    refuse_schemaless(df, asset)
    folder = _folder(asset, partition, root)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise storage_error(exc, folder, "cannot create artifact folder") from exc
    data = parquet_bytes(df)
    digest = hashlib.sha256(data).hexdigest()
    path = folder / f"{digest[:20]}.parquet"
    if not (path.exists() and verify_file(path, digest, len(data))):
        _write_atomic(path, data)
    if _locked:
        _mark_latest(folder, path, digest, len(data), df.height)
    else:
        try:
            lock = _PartitionLock(folder, exclusive=True).__enter__()
        except OSError as exc:
            raise storage_error(exc, folder / LOCK_NAME, "cannot lock artifact folder") from exc
        try:
            _mark_latest(folder, path, digest, len(data), df.height)
        finally:
            lock.__exit__(None, None, None)
    return ArtifactVersion(asset, partition or UNPARTITIONED, path, digest, df.height)


def _mark_latest(folder: Path, path: Path, digest: str, size: int, rows: int) -> None:
    _write_atomic(folder / "LATEST", path.name.encode())
    try:
        _append_version(folder, {"file": path.name, "hash": digest, "size": size, "rows": rows, "at": time.time()})
    except OSError as exc:  # LATEST already names the file; the history line is the only loss
        raise storage_error(exc, folder / "versions.jsonl", "cannot append to artifact history") from exc


def _recover_latest(folder: Path) -> Path | None:
    """LATEST is unreadable: the newest history entry, if its file verifies (LATEST is rewritten)."""
    versions = read_versions(folder)
    if not versions:
        return None
    entry = versions[-1]
    path = folder / Path(entry["file"]).name
    if not (path.exists() and verify_file(path, entry["hash"], entry.get("size"))):
        return None
    try:
        _write_atomic(folder / "LATEST", path.name.encode())
    except OSError:
        pass  # read-only store: still serve the verified file
    return path


def _recover_from_content(folder: Path, where: str, on_recovered, missing: str | None = None) -> Path | None:
    """LATEST and history lost (issue 23 item 5), or the latest version's file deleted (issue 34 item
    6): the newest content file (by mtime) whose bytes match its name, with a warning naming the
    partition; LATEST is rewritten and the history restarted."""
    files = sorted(folder.glob("*.parquet"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    lost = (
        f"its latest version {missing} is missing (deleted?)"
        if missing
        else "LATEST and versions.jsonl are missing or unusable"
    )
    for path in files:
        if verify_file(path):
            on_recovered(
                f"artifact {where}: {lost}; serving the newest "
                f"intact content file {path.name} (by modification time) and rewriting LATEST — check "
                f"it is the version you expect, or rematerialize {where}"
            )
            try:
                _write_atomic(folder / "LATEST", path.name.encode())
                _append_version(
                    folder,
                    {
                        "file": path.name,
                        "hash": file_sha256(path),
                        "size": path.stat().st_size,
                        "rows": None,
                        "at": time.time(),
                        "recovered": True,
                    },
                )
            except OSError:
                pass  # read-only store: still serve the verified file
            return path
    if files:
        on_recovered(
            f"artifact {where}: LATEST and versions.jsonl are missing and none of its {len(files)} "
            f"content files is intact; rematerialize {where}"
        )
    elif missing:
        on_recovered(f"artifact {where}: {lost} and no other version is stored; rematerialize {where}")
    return None


def latest_path(
    asset: str,
    partition: str | None = None,
    root: Path | None = None,
    *,
    verify: bool = True,
    on_recovered=None,
    _locked: bool = False,
) -> Path | None:
    """The latest version's file, verified against its content hash.

    A damaged LATEST pointer (empty, garbage, naming a missing file) is recovered from the newest
    entry of the history; a LATEST that names an *older* version than the history's newest is healed
    to the newest with a warning; a latest version whose file is gone, with nothing intact to fall
    back on, is reported (never left out silently: issue 34 item 6). A latest file whose bytes do not
    match its hash raises :class:`DamagedArtifactError` (never silently served, never silently
    replaced by an older version); rematerializing rewrites it. ``None`` if nothing is stored."""
    folder = _folder(asset, partition, root)
    where = f"{asset}[{partition}]" if partition else asset
    report = on_recovered or (lambda m: warnings.warn(m, UserWarning, stacklevel=4))
    pointer = folder / "LATEST"
    if not pointer.exists() and not (folder / "versions.jsonl").exists() and not folder.is_dir():
        return None
    try:
        name = pointer.read_text(errors="replace").strip()
    except OSError:
        name = ""
    path = folder / name if name and "/" not in name and name.endswith(".parquet") else None
    if path is not None and path.exists():
        path = _heal_stale_latest(folder, path, where, report, _locked)
    else:
        missing = path.name if path is not None else None
        path = _recover_latest(folder)
        if path is None:
            history = read_versions(folder)
            missing = missing or (Path(history[-1]["file"]).name if history else None)
            path = _recover_from_content(folder, where, report, missing)
        elif missing is not None:
            report(
                f"artifact {where}: LATEST names {missing}, which is missing; serving {path.name}, the newest "
                f"version in versions.jsonl (rewrote LATEST)"
            )
        if path is None:
            return None
    if verify and not verify_file(path):
        raise DamagedArtifactError(
            f"artifact {path} is damaged (its content does not match its hash); rematerialize {asset}"
            f"{f' for partition {partition}' if partition else ''} to rewrite it"
        )
    return path


def _heal_stale_latest(folder: Path, path: Path, where: str, report, locked: bool) -> Path:
    """LATEST names ``path``; if the history's newest entry is a *later* version (LATEST was
    overwritten with an older name), serve and point LATEST at the newest intact one, with a warning."""
    history = read_versions(folder)
    if not history or Path(history[-1]["file"]).name == path.name:
        return path
    names = [Path(e["file"]).name for e in history]
    if path.name not in names:
        return path  # a version newer than its history line (a torn append): LATEST is the truth
    # re-read under the partition lock: a writer between its LATEST and its history line is no damage
    with _PartitionLock(folder, exclusive=False) if not locked else _NoLock():
        try:
            current = (folder / "LATEST").read_text(errors="replace").strip()
        except OSError:
            current = path.name
        history = read_versions(folder)
        names = [Path(e["file"]).name for e in history]
        newest = history[-1] if history else None
        if newest is None or current != path.name or names[-1] == path.name:
            return folder / current if current.endswith(".parquet") and (folder / current).exists() else path
        candidate = folder / names[-1]
        if not (candidate.exists() and verify_file(candidate, newest["hash"], newest.get("size"))):
            report(
                f"artifact {where}: LATEST names {path.name}, an older version than the newest in versions.jsonl "
                f"({names[-1]}), which is missing or damaged; serving {path.name} — rematerialize {where}"
            )
            return path
        report(
            f"artifact {where}: LATEST named {path.name}, an older version than the newest in versions.jsonl; "
            f"serving the newest, {candidate.name}, and rewriting LATEST"
        )
        try:
            _write_atomic(folder / "LATEST", candidate.name.encode())
        except OSError:
            pass  # read-only store: still serve the newest version
        return candidate


class _NoLock:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def read_latest(asset: str, partition: str | None = None, root: Path | None = None) -> pl.DataFrame:
    path = latest_path(asset, partition, root)
    if path is None:
        where = f"{asset}[{partition}]" if partition else asset
        raise FileNotFoundError(f"no materialized version of {where}; materialize it first")
    return pl.read_parquet(path)


def latest_paths_by_asset(root: Path | None = None, on_damaged=None) -> dict[str, list[Path]]:
    """Every asset's latest file per partition (what the audit catalog exposes).

    A damaged latest file is left out and reported through ``on_damaged(message)`` (default: a
    Python warning), so one bad file never hides the others."""
    base = root or artifacts_dir()
    out: dict[str, list[Path]] = {}
    if not base.exists():
        return out
    for asset_dir in sorted(p for p in base.iterdir() if p.is_dir()):
        paths = []
        for part_dir in sorted(p for p in asset_dir.iterdir() if p.is_dir()):
            try:
                path = latest_path(
                    asset_dir.name,
                    part_dir.name,
                    base,
                    on_recovered=on_damaged or (lambda m: warnings.warn(m, stacklevel=3)),
                )
            except (DamagedArtifactError, UnsafePathError) as exc:
                (on_damaged or (lambda m: warnings.warn(m, stacklevel=3)))(str(exc))
                continue
            if path is not None:
                paths.append(path)
        if paths:
            out[asset_dir.name] = paths
    return out


@dataclass(frozen=True)
class Upsert:
    """The merged table and what the merge did (counts of rows)."""

    frame: pl.DataFrame
    added: int
    replaced: int
    kept: int


def upsert_rows(stored: pl.DataFrame | None, new: pl.DataFrame, key: tuple[str, ...] | list[str]) -> Upsert:
    """Keyed upsert of ``new`` into ``stored``: rows of ``new`` add or replace the stored rows of
    the same key; stored rows of other keys are kept unchanged, in their order, with the new rows
    after them. Columns present on one side only are filled with nulls on the other. Duplicate keys
    within ``new`` keep the last row. A key column missing on either side is an error (a key that
    cannot be compared must not silently merge or drop rows)."""
    key = list(key)
    for side, df in (("new rows", new), ("stored rows", stored)):
        if df is not None and (missing := [k for k in key if k not in df.columns]):
            raise KeyError(f"upsert: {side} lack key column(s) {missing}")
    new = new.unique(key, keep="last", maintain_order=True)
    if stored is None or stored.height == 0:
        return Upsert(new, new.height, 0, 0)
    hit = stored.join(new.select(key), on=key, how="semi", nulls_equal=True)
    kept = stored.join(new.select(key), on=key, how="anti", nulls_equal=True)
    merged = pl.concat([kept, new], how="diagonal_relaxed")
    return Upsert(merged, new.height - hit.height, hit.height, kept.height)


@dataclass(frozen=True)
class KeyedRows:
    """The rows a run adds or replaces in a growing table keyed by ``key``: what an asset returns so
    the store merges them into the rows stored *when it writes* (never a stale copy read earlier)."""

    frame: pl.DataFrame
    key: tuple[str, ...]
    # key columns a table stored before they existed lacks, with the value its old rows stand for
    legacy_fill: tuple[tuple[str, object], ...] = ()

    def merge_into(self, stored: pl.DataFrame | None) -> Upsert:
        if stored is not None and (
            fill := [pl.lit(v).alias(c) for c, v in self.legacy_fill if c not in stored.columns]
        ):
            stored = stored.with_columns(fill)
        return upsert_rows(stored, self.frame, self.key)


def upsert_version(
    rows: KeyedRows, asset: str, partition: str | None = None, root: Path | None = None
) -> tuple[ArtifactVersion, Upsert]:
    """Merge ``rows`` into the latest stored rows by their key and store the result as the next
    version, under the partition's exclusive lock so concurrent writers each see the other's rows."""
    folder = _folder(asset, partition, root)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = _PartitionLock(folder, exclusive=True).__enter__()
    except OSError as exc:
        raise storage_error(exc, folder / LOCK_NAME, "cannot lock artifact folder") from exc
    try:
        path = latest_path(asset, partition, root, _locked=True)
        merged = rows.merge_into(pl.read_parquet(path) if path is not None else None)
        return write_version(merged.frame, asset, partition, root, _locked=True), merged
    finally:
        lock.__exit__(None, None, None)
