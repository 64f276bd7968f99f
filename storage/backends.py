"""Storage backends: where artifact bytes live (issue 21 part 2).

Two interfaces, one per level:

* :class:`ObjectBackend` — a flat key → bytes store with the two conditional writes that make a
  shared store safe without a lock service: **create-only** (``if_none_match``: fails if the key
  exists) and **compare-and-swap** (``if_match=etag``: fails if the key changed since it was read).
  :class:`LocalBackend` implements it on a folder (``file://``), :class:`S3Backend` on any
  S3-compatible bucket (``s3://bucket/prefix``) through ``s3fs`` (fsspec), whose raw client sends
  S3's ``If-None-Match: *`` / ``If-Match`` headers.
* the artifact store (:func:`storage.stores.artifact_store`): what the IO manager and the audit
  catalog call. The default is the one-machine store of :mod:`storage.artifacts` under
  ``$QUANDARY_HOME/artifacts`` (layout and behaviour unchanged); ``$QUANDARY_ARTIFACTS_URL`` set to
  ``s3://…`` (or ``file://…``) selects :class:`storage.stores.ObjectArtifactStore` over the
  matching backend. The URL comes from the deployment's environment only, never from run config.

Why s3fs rather than obstore: the audit catalog reads artifacts with DuckDB, which cannot install
``httpfs`` offline but can read through a registered fsspec filesystem — s3fs *is* that filesystem,
so writes and the catalog share one client, one configuration and one set of credentials. Its
``call_s3`` passes S3's conditional-write parameters through unchanged.

S3 settings are the standard AWS variables (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_DEFAULT_REGION``), plus ``$QUANDARY_S3_ENDPOINT_URL`` for a non-AWS server (MinIO, Ceph,
SeaweedFS, moto) — falling back to botocore's own ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

ARTIFACTS_URL_ENV = "QUANDARY_ARTIFACTS_URL"
S3_ENDPOINT_ENV = "QUANDARY_S3_ENDPOINT_URL"


class PreconditionFailed(Exception):
    """A conditional write lost: the key exists (create-only) or changed since read (compare-and-swap)."""


@dataclass(frozen=True)
class Blob:
    data: bytes
    etag: str


class ObjectBackend(ABC):
    """A flat key → bytes store with create-only and compare-and-swap writes. Keys are ``/``-joined
    segments already checked by :func:`storage.paths.path_segment`."""

    url: str

    @abstractmethod
    def get(self, key: str) -> Blob | None:
        """The object and its etag, or ``None`` if absent."""

    @abstractmethod
    def put(self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None) -> None:
        """Write ``data``; with ``if_none_match`` only if absent, with ``if_match`` only if the current
        etag is that one. Raises :class:`PreconditionFailed` when the condition does not hold."""

    @abstractmethod
    def list(self, prefix: str) -> list[str]:
        """Keys under ``prefix`` (recursive), relative to the backend's root."""

    def exists(self, key: str) -> bool:
        """Whether the object exists, without reading it."""
        return key in self.list(key.rsplit("/", 1)[0] if "/" in key else "")

    @abstractmethod
    def uri(self, key: str) -> str:
        """The key as a path DuckDB can read once :meth:`register_duckdb` ran on the connection."""

    @abstractmethod
    def register_duckdb(self, con) -> None:
        """Make :meth:`uri` paths readable by ``con`` (before its configuration is locked)."""


# -- local folder -----------------------------------------------------------------------------------


class LocalBackend(ObjectBackend):
    """A folder as an object store (``file:///path``): create-only by hard-linking a fully written
    temp file (atomic, fails if the name exists), compare-and-swap under an exclusive ``flock`` with
    the etag = sha256 of the bytes. For one machine or a POSIX shared filesystem with working locks."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.url = self.root.as_uri()

    def _path(self, key: str) -> Path:
        return self.root.joinpath(*key.split("/"))

    def get(self, key: str) -> Blob | None:
        try:
            data = self._path(key).read_bytes()
        except FileNotFoundError:
            return None
        return Blob(data, hashlib.sha256(data).hexdigest())

    def _tmp(self, path: Path, data: bytes) -> Path:
        tmp = path.parent / f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        return tmp

    def put(self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._tmp(path, data)
        try:
            if if_none_match:
                try:
                    os.link(tmp, path)
                except FileExistsError:
                    raise PreconditionFailed(f"{key} exists") from None
                return
            with open(path.parent / f".{path.name}.lock", "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if if_match is not None:
                    current = self.get(key)
                    if current is None or current.etag != if_match:
                        raise PreconditionFailed(f"{key} changed since it was read")
                os.replace(tmp, path)
        finally:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass

    def list(self, prefix: str) -> list[str]:
        base = self._path(prefix) if prefix else self.root
        if not base.is_dir():
            return []
        return sorted(
            p.relative_to(self.root).as_posix() for p in base.rglob("*") if p.is_file() and not p.name.startswith(".")
        )

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def uri(self, key: str) -> str:
        return str(self._path(key))

    def register_duckdb(self, con) -> None:
        return None  # plain local files


# -- S3-compatible bucket ---------------------------------------------------------------------------

_filesystems: dict[str, object] = {}
_filesystems_lock = threading.Lock()


def _s3_filesystem(endpoint_url: str | None = None):
    """One s3fs filesystem per endpoint and process. Creating one builds a botocore client on its
    first call (service model JSON, endpoint rules, TLS contexts: ~0.25 s of CPU), and every
    ``artifact_store()`` makes a backend: a fresh filesystem each time was a third of a waiting
    run's CPU. The pid is in the key: a forked child must not reuse its parent's connections."""
    import s3fs  # lazy: s3fs, only for a bucket, slow to import

    endpoint = endpoint_url or os.environ.get(S3_ENDPOINT_ENV) or None
    key = f"{os.getpid()}:{endpoint or ''}"
    with _filesystems_lock:
        fs = _filesystems.get(key)
        if fs is None:
            client_kwargs = {"endpoint_url": endpoint} if endpoint else {}
            # No listings cache: another node's writes must be visible at once.
            fs = _filesystems[key] = s3fs.S3FileSystem(
                client_kwargs=client_kwargs, use_listings_cache=False, skip_instance_cache=True
            )
        return fs


class S3Backend(ObjectBackend):
    """An S3-compatible bucket (``s3://bucket/prefix``) through s3fs, with S3's conditional writes
    (``If-None-Match: *`` and ``If-Match: <etag>``, supported by AWS S3 since 2024, MinIO, Ceph RGW
    and moto)."""

    def __init__(self, url: str, *, endpoint_url: str | None = None, fs=None):
        if not url.startswith("s3://"):
            raise ValueError(f"not an s3:// URL: {url!r}")
        self.url = url.rstrip("/")
        bucket_prefix = self.url[len("s3://") :]
        self.bucket, _, self.prefix = bucket_prefix.partition("/")
        if not self.bucket:
            raise ValueError(f"no bucket in {url!r}")
        self.fs = fs or _s3_filesystem(endpoint_url)

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _call(self, method: str, **kwargs):
        return self.fs.call_s3(method, Bucket=self.bucket, **kwargs)

    def get(self, key: str) -> Blob | None:
        try:
            resp = self._call("get_object", Key=self._key(key))
        except FileNotFoundError:
            return None
        body = resp["Body"]
        from fsspec.asyn import sync  # lazy: fsspec, only for a bucket

        async def _read():
            async with body:
                return await body.read()

        data = sync(self.fs.loop, _read)
        return Blob(data, resp["ETag"])

    def put(self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None) -> None:
        kwargs = {}
        if if_none_match:
            kwargs["IfNoneMatch"] = "*"
        if if_match is not None:
            kwargs["IfMatch"] = if_match
        try:
            self._call("put_object", Key=self._key(key), Body=data, **kwargs)
        except Exception as exc:  # s3fs maps errors to OSError subclasses; the code is in the cause
            if _precondition_failed(exc):
                raise PreconditionFailed(f"{self.url}/{key}: {exc}") from None
            raise

    def list(self, prefix: str) -> list[str]:
        root = f"{self.bucket}/{self.prefix}".rstrip("/")
        base = f"{root}/{prefix}".rstrip("/")
        try:
            found = self.fs.find(base)
        except FileNotFoundError:
            return []
        return sorted(p[len(root) + 1 :] for p in found if p.startswith(root + "/"))

    def exists(self, key: str) -> bool:
        try:
            self._call("head_object", Key=self._key(key))
        except FileNotFoundError:
            return False
        return True

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._key(key)}"

    def register_duckdb(self, con) -> None:
        con.register_filesystem(self.fs)


def _precondition_failed(exc: BaseException) -> bool:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        response = getattr(exc, "response", None)
        if isinstance(response, dict):
            code = str(response.get("Error", {}).get("Code", ""))
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            # 412: the condition failed; 409 ConditionalRequestConflict: a concurrent conditional write won
            if code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412):
                return True
        if getattr(exc, "errno", None) == errno.EEXIST:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def backend_for(url: str) -> ObjectBackend:
    if url.startswith("s3://"):
        return S3Backend(url)
    if url.startswith("file://"):
        return LocalBackend(unquote(urlparse(url).path))
    raise ValueError(f"${ARTIFACTS_URL_ENV} must be an s3:// or file:// URL, got {url!r}")
