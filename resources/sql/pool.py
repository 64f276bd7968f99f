"""The sandbox worker pool: untrusted queries run in reused worker processes (``resources.sql.worker``)
with an address-space limit; a worker that misses its deadline by 1.25x is killed."""

import atexit
import os
import pickle
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

from resources.sql.engines import execute_in_process
from resources.sql.protocol import HEADER, MessageTooLarge, write_msg
from resources.sql.results import (
    DEFAULT_MAX_RESULT_BYTES,
    DEFAULT_MAX_ROWS,
    DEFAULT_TIMEOUT_S,
    FailureKind,
    Outcome,
    QueryFailure,
    _ms,
    check_timeout,
)


def execute_sql(
    db_path: str | Path,
    sql: str,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_rows: int = DEFAULT_MAX_ROWS,
    max_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    digest_beyond_cap: bool = False,
) -> Outcome:
    """Run one untrusted read-only statement; return rows or a typed failure.

    ``digest_beyond_cap``: a result past the row or byte cap is still read to its end (within the
    deadline), folded into a digest without holding its rows; the ``too_many_rows`` / ``too_large``
    failure then carries ``row_total`` and the bag and ordered digests (#30 item 4).

    Raises ``ValueError`` only for a non-finite or non-positive ``timeout_s`` (a caller's error)."""
    timeout_s = check_timeout(timeout_s)
    if not isinstance(sql, str) or not sql.strip():
        return QueryFailure(FailureKind.SYNTAX, "empty SQL")
    # The worker runs with the repository as its working directory: a relative path means the
    # caller's, so make it absolute before it crosses the process boundary (issue 23 item 3).
    path = Path(db_path).absolute()
    if not path.is_file():
        return QueryFailure(FailureKind.RUNTIME, f"database not found: {path}")
    if os.environ.get("QUANDARY_SQL_WORKER") == "1" or os.environ.get("QUANDARY_SQL_IN_PROCESS") == "1":
        return execute_in_process(str(path), sql, timeout_s, max_rows, max_bytes, digest_beyond_cap)
    return _POOL.run((str(path), sql, timeout_s, max_rows, max_bytes, digest_beyond_cap), timeout_s)


# Grace past the budget before a silent worker is killed; keeps every query within 1.5x.
KILL_AFTER_FACTOR = 1.25


KILL_AFTER_MIN_GRACE_S = 0.1


_WORKER_START_TIMEOUT_S = 120.0  # a loaded machine can take long to start Python + DuckDB


class _Worker:
    def __init__(self, module: str = "resources.sql.worker", extra_env: dict | None = None):
        repo_root = str(Path(__file__).resolve().parents[2])
        env = dict(
            os.environ,
            MALLOC_ARENA_MAX="2",
            PYTHONPATH=os.pathsep.join(p for p in (repo_root, os.environ.get("PYTHONPATH")) if p),
            **(extra_env or {}),
        )
        env["QUANDARY_SQL_PARENT_PID"] = str(os.getpid())  # the worker exits when this process is gone
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL if module == "resources.sql.worker" else None,
            env=env,
            cwd=repo_root,
            close_fds=True,
        )
        try:
            ready = self._read(_WORKER_START_TIMEOUT_S)
        except (EOFError, TimeoutError, OSError):  # died or hung while starting
            ready = None
        except BaseException:  # Ctrl-C while it starts: do not leave it behind
            self.kill()
            raise
        if not isinstance(ready, dict) or not ready.get("ready"):
            self.kill()
            raise RuntimeError("the SQL sandbox worker did not start")
        self.ready = ready
        self.memory_limit = int(ready.get("limit") or 0)
        self.baseline_rss = int(ready.get("rss") or 0)
        self.pid = self.proc.pid

    def _read(self, timeout_s: float, limit: int | None = None):
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        buf = b""
        need = HEADER.size
        header_done = False
        while True:
            while len(buf) < need:
                left = deadline - time.monotonic()
                if not header_done and left <= 0:
                    raise TimeoutError
                ready, _, _ = select.select([fd], [], [], max(0.0, left) if not header_done else None)
                if not ready:
                    continue
                chunk = os.read(fd, max(need - len(buf), 1 << 16))
                if not chunk:
                    raise EOFError
                buf += chunk
            if header_done:
                return pickle.loads(buf)
            (n,) = HEADER.unpack(buf[: HEADER.size])
            if limit is not None and n > limit:  # never hold more than the caller's cap
                raise MessageTooLarge(f"a {n >> 20} MB message from the sandbox (limit {limit >> 20} MB)")
            buf, need, header_done = buf[HEADER.size :], n, True

    def call(self, request, timeout_s: float, *, on_callback=None, max_msg: int | None = None) -> Outcome:
        """Send ``request`` and return the worker's answer; kill the worker past 1.25x ``timeout_s``.

        ``on_callback(msg) -> reply`` answers the worker's ``{"callback": ...}`` messages (UDF calls)
        on this thread; the time it takes counts against the same deadline. An interrupt while it
        waits or answers (Ctrl-C, a stopped run: any BaseException) kills the worker, then goes on."""
        start = time.perf_counter()
        kill_at = time.monotonic() + timeout_s * KILL_AFTER_FACTOR + KILL_AFTER_MIN_GRACE_S
        try:
            write_msg(self.proc.stdin, request)
            while True:
                msg = self._read(kill_at - time.monotonic(), max_msg)
                if on_callback is None or not (isinstance(msg, dict) and "callback" in msg):
                    return msg
                reply = on_callback(msg)
                if time.monotonic() >= kill_at:
                    raise TimeoutError
                write_msg(self.proc.stdin, reply)
        except TimeoutError:
            self.kill()
            return QueryFailure(FailureKind.TIMEOUT, f"exceeded {timeout_s:g} s", _ms(start))
        except MessageTooLarge as exc:
            self.kill()
            return QueryFailure(FailureKind.TOO_LARGE, str(exc), _ms(start))
        except (EOFError, BrokenPipeError, OSError):
            code = self.kill()
            # An engine that aborts on a failed allocation takes the worker down (SIGABRT/SIGKILL).
            return QueryFailure(
                FailureKind.TOO_LARGE,
                f"the query's sandbox died (exit {code}), most likely out of memory "
                f"(limit {self.memory_limit >> 20} MB)",
                _ms(start),
            )
        except BaseException:  # Ctrl-C, a stopped run: the worker must not run on alone
            self.kill()
            raise

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self):
        try:
            self.proc.kill()
        except OSError:
            pass
        try:
            return self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001
            return None

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except Exception:  # noqa: BLE001
            self.kill()


class _WorkerPool:
    """Idle sandbox workers, reused across queries; one per concurrent caller."""

    MAX_IDLE = 4
    # At most this many sandboxes run at once per process, so the worst case is bounded too
    # (MAX_WORKERS x the per-worker cap); further callers wait their turn before their deadline starts.
    MAX_WORKERS = int(os.environ.get("QUANDARY_SQL_WORKERS", "4"))

    def __init__(self):
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._slots = threading.BoundedSemaphore(max(1, self.MAX_WORKERS))

    def run(self, request: tuple, timeout_s: float) -> Outcome:
        with self._slots:
            worker = self._checkout()
            try:
                return worker.call(request, timeout_s)
            finally:
                self._checkin(worker)

    def _checkout(self) -> _Worker:
        with self._lock:
            if self._pid != os.getpid():  # forked: the parent's workers are not ours
                self._idle, self._pid = [], os.getpid()
                self._slots = threading.BoundedSemaphore(max(1, self.MAX_WORKERS))
            while self._idle:
                w = self._idle.pop()
                if w.alive():
                    return w
        return _Worker()

    def _checkin(self, worker: _Worker) -> None:
        if not worker.alive():
            return
        with self._lock:
            if len(self._idle) < self.MAX_IDLE:
                self._idle.append(worker)
                return
        worker.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for w in idle:
            w.close()


_POOL = _WorkerPool()


def close_workers() -> None:
    """Stop the idle sandbox workers (they also exit by themselves when this process ends)."""
    _POOL.close()


atexit.register(close_workers)
