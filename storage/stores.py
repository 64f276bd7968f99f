"""Artifact stores behind one interface (issue 21 part 2): the one-machine folder store and the
object store shared by many machines.

:class:`LocalArtifactStore` is :mod:`storage.artifacts` as it always was (``LATEST`` +
``versions.jsonl`` under ``$QUANDARY_HOME/artifacts``). :class:`ObjectArtifactStore` keeps the same
guarantees — content-addressed, immutable, self-verifying — on an :class:`~storage.backends.ObjectBackend`
(an S3-compatible bucket) where many writers meet, with this layout per ``<asset>/<partition>/``::

    <sha256[:20]>.parquet            content, written create-only: a second writer of the same hash
                                     finds it, verifies size + sha256 and succeeds (a damaged one is
                                     replaced by compare-and-swap on its etag)
    LATEST                           JSON {file, hash, size, rows, seq, at}, replaced only by
                                     compare-and-swap on its etag: each writer reads it, claims
                                     seq + 1 and retries on a lost race, so no update is ever lost
    versions/<seq:012d>-<hash20>.json  the history, one create-only object per version (no appends)

In distributed mode (a shared-state database, :mod:`storage.state_db`) the history is a table
instead of ``versions/`` objects (:mod:`storage.versions_db`): inserting the row claims the seq, then
``LATEST`` is moved forward to it by compare-and-swap, never back.

Writing content equal to the current latest is a no-op (one hash, one version), so two nodes that
compute the same table record it once. Every reader of the history calls ``store.versions()``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import time
import warnings
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import polars as pl

from storage import artifacts as A
from storage.backends import ARTIFACTS_URL_ENV, ObjectBackend, PreconditionFailed, backend_for
from storage.paths import UnsafePathError, artifacts_dir, path_segment

CAS_ATTEMPTS = 200
# Object-store prefixes that are no asset: one level deep (``charts/<hash>.png``, ``seeds/<hash>.<ext>``),
# so the ``<asset>/<partition>/`` listing never takes them for a partition.
CHARTS_PREFIX, SEEDS_PREFIX = "charts", "seeds"


@dataclass(frozen=True)
class StoredVersion:
    asset: str
    partition: str
    path: str  # a local path or the object's URL
    content_hash: str
    row_count: int
    seq: int | None = None


class LocalArtifactStore:
    """The one-machine default: :mod:`storage.artifacts` under a folder (default ``$QUANDARY_HOME/artifacts``)."""

    def __init__(self, root: Path | None):
        self._root = root

    @property
    def root(self) -> Path:
        return self._root or artifacts_dir()

    @property
    def url(self) -> str:
        return self.root.as_uri()

    def write_version(self, df: pl.DataFrame, asset: str, partition: str | None = None, *, run_id: str | None = None):
        # run_id is not recorded here: versions.jsonl keeps its one-machine format byte for byte
        return A.write_version(df, asset, partition, self.root)

    def upsert(self, rows: A.KeyedRows, asset: str, partition: str | None = None, *, run_id: str | None = None):
        """Merge ``rows`` into the latest stored rows under the partition's lock: ``(version, Upsert)``."""
        return A.upsert_version(rows, asset, partition, self.root)

    def versions(self, asset: str, partition: str | None = None) -> list[dict]:
        """``versions.jsonl``, oldest first, numbered from 1 in file order."""
        return [{"seq": i, **e} for i, e in enumerate(A.read_versions(A._folder(asset, partition, self.root)), 1)]

    def latest_location(self, asset: str, partition: str | None = None) -> str | None:
        path = A.latest_path(asset, partition, self.root)
        return None if path is None else str(path)

    def read_latest(self, asset: str, partition: str | None = None) -> pl.DataFrame:
        return A.read_latest(asset, partition, self.root)

    def latest_locations_by_asset(self, on_damaged=None) -> dict[str, list[str]]:
        return {a: [str(p) for p in ps] for a, ps in A.latest_paths_by_asset(self.root, on_damaged).items()}

    def register_duckdb(self, con) -> None:
        return None

    def put_chart(self, path: Path) -> str:
        """Charts already sit beside the artifacts (``storage.charts``): the local path, unchanged."""
        return str(path)


def _folder_key(asset: str, partition: str | None) -> str:
    partition = A.UNPARTITIONED if partition is None else partition
    return f"{path_segment(asset, 'asset name')}/{path_segment(partition, 'partition key')}"


def put_verified(backend: ObjectBackend, key: str, data: bytes, digest: str) -> None:
    """Create-only write of content-addressed bytes; an existing object of the same name must verify
    (size + sha256), and a damaged one is replaced by compare-and-swap on its etag."""
    for _ in range(CAS_ATTEMPTS):
        try:
            backend.put(key, data, if_none_match=True)
            return
        except PreconditionFailed:
            pass
        existing = backend.get(key)
        if existing is None:
            continue  # deleted between the two calls: create again
        if len(existing.data) == len(data) and hashlib.sha256(existing.data).hexdigest() == digest:
            return  # the other writer stored exactly these bytes
        try:  # damaged (truncated, overwritten): replace exactly that damaged object
            backend.put(key, data, if_match=existing.etag)
            return
        except PreconditionFailed:
            continue
    raise TimeoutError(f"could not store {key}: too many concurrent writers")


def _backoff(attempt: int) -> None:
    time.sleep(random.uniform(0, min(0.05, 0.002 * (attempt + 1))))  # back off, then re-read


class ObjectArtifactStore:
    """Content-addressed Parquet versions on an object backend shared by many writers."""

    def __init__(self, backend: ObjectBackend, history_engine=None):
        self.backend = backend
        # the shared-state database (PostgreSQL) for the version history, else the bucket's versions/
        self.history_engine = history_engine

    @property
    def url(self) -> str:
        return self.backend.url

    # -- writing -----------------------------------------------------------------------------------

    def write_version(
        self, df: pl.DataFrame, asset: str, partition: str | None = None, *, run_id: str | None = None
    ) -> StoredVersion:
        A.refuse_schemaless(df, asset)
        folder = _folder_key(asset, partition)
        data = A.parquet_bytes(df)
        digest = hashlib.sha256(data).hexdigest()
        name = f"{digest[:20]}.parquet"
        put_verified(self.backend, f"{folder}/{name}", data, digest)
        entry = {
            "file": name,
            "hash": digest,
            "size": len(data),
            "rows": df.height,
            **({"run_id": run_id} if run_id else {}),
        }
        seq = (self._claim_in_table if self.history_engine is not None else self._claim_in_bucket)(
            folder, asset, partition, entry
        )
        return StoredVersion(
            asset, partition or A.UNPARTITIONED, self.backend.uri(f"{folder}/{name}"), digest, df.height, seq
        )

    def upsert(self, rows: A.KeyedRows, asset: str, partition: str | None = None, *, run_id: str | None = None):
        """Merge ``rows`` into the latest stored rows by their key and store the result as the next
        version, conditional on the latest version being the one merged into: a writer that lost the
        race (``LATEST`` moved, or the history row of that seq exists) re-reads and merges again, so
        concurrent writers on any number of machines each keep the other's rows."""
        folder = _folder_key(asset, partition)
        for attempt in range(CAS_ATTEMPTS):
            current = self.backend.get(f"{folder}/LATEST")
            pointer = _parse_pointer(current.data) if current is not None else None
            base = pointer
            if self.history_engine is not None:
                from storage.versions_db import newest_version  # lazy: sqlalchemy, distributed mode only

                newest = newest_version(self.history_engine, self.url, asset, partition or A.UNPARTITIONED)
                if newest is not None and (base is None or newest["seq"] > base["seq"]):
                    base = newest
            if base is None and current is not None:  # LATEST garbled: the newest intact version is the base
                base = next((e for e in reversed(self.versions(asset, partition)) if self._verified(folder, e)), None)
            stored = None
            if base is not None:
                data = self._verified(folder, base)
                if data is None:
                    raise A.DamagedArtifactError(
                        f"artifact {self.backend.uri(folder + '/' + base['file'])} is damaged or missing; "
                        f"rematerialize {asset} to rewrite it"
                    )
                stored = pl.read_parquet(io.BytesIO(data))
            merged = rows.merge_into(stored)
            data = A.parquet_bytes(merged.frame)
            digest = hashlib.sha256(data).hexdigest()
            name = f"{digest[:20]}.parquet"
            if base is not None and base["hash"] == digest:  # nothing changed: one hash, one version
                return StoredVersion(
                    asset,
                    partition or A.UNPARTITIONED,
                    self.backend.uri(f"{folder}/{name}"),
                    digest,
                    merged.frame.height,
                    base["seq"],
                ), merged
            put_verified(self.backend, f"{folder}/{name}", data, digest)
            entry = {
                "file": name,
                "hash": digest,
                "size": len(data),
                "rows": merged.frame.height,
                **({"run_id": run_id} if run_id else {}),
            }
            seq = self._claim_after(folder, asset, partition, entry, base, current)
            if seq is not None:
                version = StoredVersion(
                    asset,
                    partition or A.UNPARTITIONED,
                    self.backend.uri(f"{folder}/{name}"),
                    digest,
                    merged.frame.height,
                    seq,
                )
                return version, merged
            _backoff(attempt)
        raise TimeoutError(f"could not update {folder}/LATEST: too many concurrent writers")

    def _claim_after(self, folder: str, asset: str, partition, entry: dict, base: dict | None, current) -> int | None:
        """Record ``entry`` as the version right after ``base``; None when another writer got there first."""
        seq = (base["seq"] if base is not None else 0) + 1
        if self.history_engine is not None:
            from storage.versions_db import VersionConflict, claim_version

            try:
                version, _ = claim_version(
                    self.history_engine,
                    self.url,
                    asset,
                    partition or A.UNPARTITIONED,
                    entry,
                    previous=base,
                    run_id=entry.get("run_id"),
                    expect_seq=seq - 1,
                )
            except VersionConflict:
                return None
            self._advance_latest(folder, {k: v for k, v in version.items() if v is not None})
            return version["seq"]
        if base is None:
            seq = self._last_seq(folder) + 1
        return seq if self._swap_latest(folder, current, entry, seq) else None

    def _swap_latest(self, folder: str, current, entry: dict, seq: int) -> bool:
        """Compare-and-swap LATEST to ``entry`` as version ``seq`` (create-only when there is none yet),
        then write its history object; False when another writer moved LATEST first."""
        body = json.dumps({**entry, "seq": seq, "at": time.time()}, sort_keys=True).encode()
        try:
            if current is None:
                self.backend.put(f"{folder}/LATEST", body, if_none_match=True)
            else:
                self.backend.put(f"{folder}/LATEST", body, if_match=current.etag)
        except PreconditionFailed:
            return False
        try:
            self.backend.put(f"{folder}/versions/{seq:012d}-{entry['hash'][:20]}.json", body, if_none_match=True)
        except PreconditionFailed:
            pass  # written already (a retried request)
        return True

    def _claim_in_bucket(self, folder: str, asset: str, partition: str | None, entry: dict) -> int:
        """The seq is claimed by the compare-and-swap of LATEST; the history is one object per version."""
        for attempt in range(CAS_ATTEMPTS):
            current = self.backend.get(f"{folder}/LATEST")
            pointer = _parse_pointer(current.data) if current is not None else None
            if pointer is not None and pointer["hash"] == entry["hash"]:
                return pointer["seq"]
            seq = (pointer["seq"] if pointer is not None else self._last_seq(folder)) + 1
            if self._swap_latest(folder, current, entry, seq):
                return seq
            _backoff(attempt)
        raise TimeoutError(f"could not update {folder}/LATEST: too many concurrent writers")

    def _claim_in_table(self, folder: str, asset: str, partition: str | None, entry: dict) -> int:
        """The seq is claimed by inserting the history row (unique per store, asset, partition, seq);
        then LATEST is moved forward to it by compare-and-swap, never back: of two writers that
        claimed seq 5 and 6, whichever updates LATEST last, it ends at 6."""
        from storage.versions_db import claim_version  # lazy: sqlalchemy, only in distributed mode

        current = self.backend.get(f"{folder}/LATEST")
        pointer = _parse_pointer(current.data) if current is not None else None
        version, _created = claim_version(
            self.history_engine,
            self.url,
            asset,
            partition or A.UNPARTITIONED,
            entry,
            previous=pointer,
            run_id=entry.get("run_id"),
        )
        # also when nothing was inserted: a writer that died between its insert and LATEST left it behind
        self._advance_latest(folder, {k: v for k, v in version.items() if v is not None})
        return version["seq"]

    def _advance_latest(self, folder: str, version: dict) -> None:
        body = json.dumps(version, sort_keys=True).encode()
        for attempt in range(CAS_ATTEMPTS):
            current = self.backend.get(f"{folder}/LATEST")
            pointer = _parse_pointer(current.data) if current is not None else None
            if pointer is not None and pointer["seq"] >= version["seq"]:
                return  # a newer version (or this one) is latest already
            try:
                if current is None:
                    self.backend.put(f"{folder}/LATEST", body, if_none_match=True)
                else:
                    self.backend.put(f"{folder}/LATEST", body, if_match=current.etag)
                return
            except PreconditionFailed:
                _backoff(attempt)
        raise TimeoutError(f"could not update {folder}/LATEST: too many concurrent writers")

    # -- reading -----------------------------------------------------------------------------------

    def versions(self, asset: str, partition: str | None = None) -> list[dict]:
        """The history, oldest first: rows of the shared-state table in distributed mode, else the
        bucket's ``versions/`` objects (entries that do not parse are skipped)."""
        folder = _folder_key(asset, partition)
        if self.history_engine is not None:
            from storage.versions_db import history  # lazy: sqlalchemy, only in distributed mode

            return history(self.history_engine, self.url, asset, partition or A.UNPARTITIONED)
        out = []
        for key in self.backend.list(f"{folder}/versions"):
            blob = self.backend.get(key)
            entry = _parse_pointer(blob.data) if blob is not None else None
            if entry is not None:
                out.append(entry)
        return sorted(out, key=lambda e: e["seq"])

    def _last_seq(self, folder: str) -> int:
        seqs = [
            int(k.rsplit("/", 1)[1].split("-", 1)[0])
            for k in self.backend.list(f"{folder}/versions")
            if k.rsplit("/", 1)[1].split("-", 1)[0].isdigit()
        ]
        return max(seqs, default=0)

    def _verified(self, folder: str, entry: dict) -> bytes | None:
        blob = self.backend.get(f"{folder}/{entry['file']}")
        if blob is None or len(blob.data) != entry["size"] or hashlib.sha256(blob.data).hexdigest() != entry["hash"]:
            return None
        return blob.data

    def _latest(self, asset: str, partition: str | None, on_recovered=None) -> tuple[str, bytes] | None:
        folder = _folder_key(asset, partition)
        current = self.backend.get(f"{folder}/LATEST")
        pointer = _parse_pointer(current.data) if current is not None else None
        where = f"{asset}[{partition}]" if partition else asset
        if pointer is not None:
            data = self._verified(folder, pointer)
            if data is None:
                raise A.DamagedArtifactError(
                    f"artifact {self.backend.uri(folder + '/' + pointer['file'])} is damaged or missing (its content "
                    f"does not match its hash); rematerialize {where} to rewrite it"
                )
            return pointer["file"], data
        for entry in reversed(self.versions(asset, partition)):  # LATEST lost or garbled: newest intact version
            data = self._verified(folder, entry)
            if data is not None:
                if current is not None:
                    (on_recovered or (lambda m: warnings.warn(m, UserWarning, stacklevel=4)))(
                        f"artifact {where}: LATEST is unreadable; serving version {entry['seq']} ({entry['file']})"
                    )
                return entry["file"], data
        return None

    def latest_location(self, asset: str, partition: str | None = None) -> str | None:
        found = self._latest(asset, partition)
        return None if found is None else self.backend.uri(f"{_folder_key(asset, partition)}/{found[0]}")

    def read_latest(self, asset: str, partition: str | None = None) -> pl.DataFrame:
        found = self._latest(asset, partition)
        if found is None:
            where = f"{asset}[{partition}]" if partition else asset
            raise FileNotFoundError(f"no materialized version of {where} in {self.url}; materialize it first")
        return pl.read_parquet(io.BytesIO(found[1]))

    def latest_locations_by_asset(self, on_damaged=None) -> dict[str, list[str]]:
        warn = on_damaged or (lambda m: warnings.warn(m, stacklevel=3))
        folders = sorted({tuple(k.split("/")[:2]) for k in self.backend.list("") if k.count("/") >= 2})
        out: dict[str, list[str]] = {}
        for asset, partition in folders:
            try:
                found = self._latest(asset, partition, on_recovered=warn)
            except (A.DamagedArtifactError, UnsafePathError) as exc:
                warn(str(exc))
                continue
            if found is not None:
                out.setdefault(asset, []).append(self.backend.uri(f"{asset}/{partition}/{found[0]}"))
        return out

    def register_duckdb(self, con) -> None:
        self.backend.register_duckdb(con)

    def put_chart(self, path: Path) -> str:
        """A chart (PNG) where every node sees it: ``charts/<sha256[:20]>.png``, content-addressed and
        create-only like the Parquet content; returns its URL."""
        data = Path(path).read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        key = f"{CHARTS_PREFIX}/{digest[:20]}{Path(path).suffix or '.png'}"
        put_verified(self.backend, key, data, digest)
        return self.backend.uri(key)


def _parse_pointer(data: bytes) -> dict | None:
    try:
        entry = json.loads(data)
    except ValueError:
        return None
    if not (
        isinstance(entry, dict)
        and isinstance(entry.get("file"), str)
        and isinstance(entry.get("hash"), str)
        and isinstance(entry.get("seq"), int)
        and isinstance(entry.get("size"), int)
    ):
        return None
    if "/" in entry["file"] or not entry["file"].endswith(".parquet"):
        return None
    return entry


def artifact_store(base_dir: str | os.PathLike | None = None):
    """The artifact store this process uses: ``base_dir`` (a local folder) if given, else the store
    named by ``$QUANDARY_ARTIFACTS_URL`` (the deployment's environment, never run config) with its
    version history in the shared-state database when one is configured
    (:func:`storage.state_db.state_engine`), else the one-machine default under
    ``$QUANDARY_HOME/artifacts``."""
    if base_dir is not None:
        return LocalArtifactStore(Path(base_dir))
    url = os.environ.get(ARTIFACTS_URL_ENV, "").strip()
    if url:
        from storage.state_db import state_engine  # lazy: sqlalchemy, only in distributed mode

        return ObjectArtifactStore(backend_for(url), history_engine=state_engine())
    return LocalArtifactStore(None)


def latest_partitions(store, asset: str) -> list[str]:
    """The partitions of ``asset`` that have a readable latest version in ``store``."""

    return sorted(PurePosixPath(loc).parent.name for loc in store.latest_locations_by_asset().get(asset, []))


def latest_frame(asset: str, partition: str | None = None, store=None) -> pl.DataFrame | None:
    """The latest version of ``asset[partition]`` in ``store`` (default: the deployment's), or None
    when nothing is stored: what readers outside the IO manager (CLI reports, exports) call."""
    try:
        return (store or artifact_store()).read_latest(asset, partition)
    except FileNotFoundError:
        return None
