"""An inter-process exclusive lock on a file (``fcntl.flock``): the lock dies with its process,
so a ``kill -9`` never leaves a stale lock behind."""

import contextlib
import os
from pathlib import Path


@contextlib.contextmanager
def file_lock(path: str | Path):
    """Hold an exclusive lock on ``path`` (created if missing) for the ``with`` block."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            import fcntl  # lazy: POSIX only
        except ImportError:  # not POSIX: no inter-process lock available
            fcntl = None
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the flock
