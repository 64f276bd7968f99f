"""Seed databases by content hash in the shared store (issue 21 item 5).

A registered database is known by its path on the node that registered it and by its sha256. In
distributed mode (``$QUANDARY_ARTIFACTS_URL`` set) ``db register`` also uploads the file to
``seeds/<sha256><suffix>`` in the artifact store's bucket — create-only, and an existing object must
verify (size + sha256) — and a node whose local path is missing or holds other bytes fetches the
registered bytes by hash into ``$QUANDARY_HOME/seeds/<sha256><suffix>``, verified before any step
reads them. The suffix (``.sqlite``, ``.duckdb`` …) is kept: it tells the engine.

Files travel whole through memory (one GET / PUT): fine for the seed databases of text-to-SQL
benchmarks (BIRD's largest is a few hundred MB); multi-GB seeds want a multipart upload.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from storage.artifacts import file_sha256
from storage.backends import ARTIFACTS_URL_ENV, ObjectBackend, backend_for
from storage.paths import path_segment, quandary_home
from storage.stores import SEEDS_PREFIX, put_verified


class SeedUnavailableError(LookupError):
    """The seed's bytes are neither on this node nor in the shared store (or they do not verify)."""


def seed_backend() -> ObjectBackend | None:
    """The shared store seeds go to, or None on one machine."""
    url = os.environ.get(ARTIFACTS_URL_ENV, "").strip()
    return backend_for(url) if url else None


def seed_key(sha256: str, suffix: str) -> str:
    return f"{SEEDS_PREFIX}/{path_segment(sha256 + suffix.lower(), 'seed file name')}"


def upload_seed(path: str | Path, sha256: str, backend: ObjectBackend | None = None) -> str | None:
    """Put the seed file in the shared store under its hash; its URL, or None on one machine."""

    backend = backend or seed_backend()
    if backend is None:
        return None
    data = Path(path).read_bytes()
    if hashlib.sha256(data).hexdigest() != sha256:
        raise SeedUnavailableError(f"{path} changed while it was being registered (sha256 differs); register it again")
    key = seed_key(sha256, Path(path).suffix)
    put_verified(backend, key, data, sha256)
    return backend.uri(key)


def seed_cache_path(sha256: str, suffix: str) -> Path:
    return quandary_home() / "seeds" / path_segment(sha256 + suffix.lower(), "seed file name")


def fetch_seed(sha256: str, suffix: str, backend: ObjectBackend | None = None, *, verified=None) -> Path:
    """The local copy of the seed with this hash: ``$QUANDARY_HOME/seeds/<sha256><suffix>``, downloaded
    from the shared store when missing or damaged, and verified (sha256) before it is returned.
    ``verified(path) -> sha256`` hashes a local file (the caller's cached hash), default: read it."""
    local = seed_cache_path(sha256, suffix)
    digest = verified or _sha256_file
    try:
        if local.is_file() and digest(local) == sha256:
            return local
    except OSError:
        pass
    backend = backend or seed_backend()
    if backend is None:
        raise SeedUnavailableError("no shared store is configured ($QUANDARY_ARTIFACTS_URL)")
    key = seed_key(sha256, suffix)
    blob = backend.get(key)
    if blob is None:
        raise SeedUnavailableError(f"{backend.uri(key)} does not exist")
    if hashlib.sha256(blob.data).hexdigest() != sha256:
        raise SeedUnavailableError(
            f"{backend.uri(key)} is damaged (its sha256 differs); register the file again from a node that has it"
        )
    local.parent.mkdir(parents=True, exist_ok=True)
    tmp = local.with_name(f".{local.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(blob.data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o444)  # a seed is never written by anything Quandary runs
        os.replace(tmp, local)
    finally:
        tmp.unlink(missing_ok=True)
    return local


def _sha256_file(path: Path) -> str:
    return file_sha256(path)
