"""Local storage errors classified by cause (issue 23 item 4).

A write that fails because the disk is full is not a damaged file, and the remedies differ: free
space (keep the file), make the folder writable, fix its permissions, or — only for real
corruption — move the file away. :func:`storage_cause` reads the cause from an ``OSError``'s errno
or an ``sqlite3`` error code (with the file system's state as a tie-breaker for SQLite's vaguer
codes); :func:`storage_message` renders one line naming the file, the cause and what to do.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from contextlib import contextmanager
from pathlib import Path

NO_SPACE = "no_space"
READ_ONLY = "read_only"
PERMISSION = "permission"
CORRUPT = "corrupt"
IO = "io"

WHAT = {
    NO_SPACE: "no space left on the device (ENOSPC)",
    READ_ONLY: "the file system is read-only (EROFS)",
    PERMISSION: "permission denied (EACCES)",
    CORRUPT: "the file is damaged",
    IO: "an I/O error",
}

REMEDY = {
    NO_SPACE: "free space on that disk (or point QUANDARY_HOME at another one), then rerun; the file is intact, "
    "keep it",
    READ_ONLY: "the folder is on a read-only file system: remount it writable or point QUANDARY_HOME at a "
    "writable folder, then rerun; the file is intact, keep it",
    PERMISSION: "give this user write access to the file and its folder (or point QUANDARY_HOME at a folder "
    "you own), then rerun; the file is intact, keep it",
    CORRUPT: "move the file away (what it held is lost) or restore it from a backup, then rerun",
    IO: "check the disk (dmesg, SMART) and rerun; the file is not known to be damaged, keep it",
}

_ERRNO = {
    errno.ENOSPC: NO_SPACE,
    errno.EDQUOT: NO_SPACE,
    errno.EFBIG: NO_SPACE,
    errno.EROFS: READ_ONLY,
    errno.EACCES: PERMISSION,
    errno.EPERM: PERMISSION,
    errno.EIO: IO,
}

_OS_TEXT = {
    "No space left on device": NO_SPACE,
    "Disk quota exceeded": NO_SPACE,
    "Read-only file system": READ_ONLY,
}

# SQLite primary result codes (the low byte of the extended code)
_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_CANTOPEN, _SQLITE_NOTADB = 8, 10, 11, 13, 14, 26


class StorageError(OSError):
    """A local write or read failed; ``cause`` is one of the constants above, ``path`` the file."""

    def __init__(self, message: str, cause: str, path: Path | str | None = None):
        super().__init__(message)
        self.cause = cause
        self.path = path

    def __str__(self) -> str:
        return self.args[0]


def exception_chain(exc: BaseException):
    """``exc``, then its causes and contexts, each once (also what the LLM failure classifier walks)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _fs_state(path: Path | str | None) -> str | None:
    """What the file system says about ``path`` (its nearest existing folder): full, read-only, not ours."""
    if path is None:
        return None
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        st = os.statvfs(p)
    except OSError:
        return None
    if st.f_flag & os.ST_RDONLY:
        return READ_ONLY
    if st.f_bavail == 0 and os.geteuid() != 0 or st.f_bfree == 0:
        return NO_SPACE
    folder = p if p.is_dir() else p.parent
    if not os.access(p, os.W_OK) or not os.access(folder, os.W_OK):
        return PERMISSION
    return None


def storage_cause(exc: BaseException, path: Path | str | None = None) -> str | None:
    """The cause of a storage failure, or ``None`` if ``exc`` is not one (e.g. a locked database)."""
    for e in exception_chain(exc):
        if isinstance(e, StorageError):
            return e.cause
        if isinstance(e, OSError) and e.errno in _ERRNO:
            return _ERRNO[e.errno]
    for e in exception_chain(exc):
        # DuckDB's and polars' errors carry no errno, only the operating system's message (#45 item 5)
        if not isinstance(e, sqlite3.Error) and getattr(e, "errno", None) is None:
            for message, cause in _OS_TEXT.items():
                if message in str(e):
                    return cause
        if isinstance(e, sqlite3.Error):
            code = getattr(e, "sqlite_errorcode", None)
            primary = code & 0xFF if isinstance(code, int) else None
            text = str(e).lower()
            if primary == _SQLITE_FULL or "disk is full" in text:
                return NO_SPACE
            if primary in (_SQLITE_CORRUPT, _SQLITE_NOTADB) or "malformed" in text or "not a database" in text:
                return CORRUPT
            if "locked" in text or "busy" in text:
                return None
            if primary == _SQLITE_READONLY or "readonly" in text or "read-only" in text:
                return _fs_state(path) if _fs_state(path) in (READ_ONLY, PERMISSION) else PERMISSION
            if primary in (_SQLITE_IOERR, _SQLITE_CANTOPEN) or "disk i/o error" in text or "unable to open" in text:
                return _fs_state(path) or IO
            if isinstance(e, sqlite3.DatabaseError) and not isinstance(e, sqlite3.OperationalError):
                return CORRUPT
            return None
    return None


def storage_message(exc: BaseException, path: Path | str, what: str = "file", cause: str | None = None) -> str:
    """One line: ``<what> <path>: <cause> (<detail>); <remedy>``."""
    cause = cause or storage_cause(exc, path) or IO
    detail = " ".join(str(exc).split())[:200]
    return f"{what} {path}: {WHAT[cause]} ({type(exc).__name__}: {detail}); {REMEDY[cause]}"


@contextmanager
def written_via_temp(path: Path, what: str = "file"):
    """Yields a temporary sibling of ``path`` to build, which replaces ``path`` when the block ends;
    on any failure the temporary file (and a DuckDB ``.wal`` beside it) is removed, and a storage
    failure (a full disk) is raised as one :class:`StorageError` line (issue 45 item 5)."""
    tmp = path.with_suffix(".tmp")
    leftovers = (tmp, tmp.with_name(tmp.name + ".wal"))
    for f in leftovers:
        f.unlink(missing_ok=True)
    try:
        yield tmp
        tmp.replace(path)
    except BaseException as exc:
        for f in leftovers:
            f.unlink(missing_ok=True)
        if isinstance(exc, Exception) and not isinstance(exc, StorageError) and storage_cause(exc, tmp):
            raise storage_error(exc, path, f"cannot write {what}") from exc
        raise


def storage_error(exc: BaseException, path: Path | str, what: str = "file") -> StorageError:
    """``exc`` as a :class:`StorageError` whose message names the file, the cause and the remedy."""
    cause = storage_cause(exc, path) or IO
    return StorageError(storage_message(exc, path, what, cause), cause, path)
