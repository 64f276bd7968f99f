"""Safe execution of untrusted SQL against seed databases (SQLite and DuckDB).

Generated SQL is untrusted input. Every query runs:

* on a read-only connection (SQLite ``mode=ro`` URI + ``PRAGMA query_only``; DuckDB
  ``read_only`` with external access and extension loading disabled), so the seed file stays
  byte-identical;
* as exactly one read-only statement (SELECT / WITH ... SELECT / VALUES);
* behind an authorizer (SQLite) that denies ATTACH, PRAGMA, writes, temp objects and dangerous
  functions such as ``load_extension``;
* under a wall-clock timeout that interrupts the engine (SQLite progress handler, DuckDB
  ``interrupt()`` from a timer thread);
* with a cap on rows fetched and on the bytes of the result (a few huge values are as bad as
  many rows);
* under a memory bound: SQLite gets a per-value length limit (``SQLITE_LIMIT_LENGTH``) and a
  process-wide hard heap limit; DuckDB gets ``memory_limit`` / ``max_temp_directory_size`` set
  before the configuration is locked. Exceeding any of these is the typed failure ``too_large``.

The deadline holds within 1.5x the budget even for single huge values because no single
operation may allocate more than the length/memory limits (an allocation is where neither engine
checks its interrupt flag), and a watchdog thread interrupts the engine besides the SQLite
progress handler.

Plain Python (no Dagster): ``execute_sql(path, sql)`` returns a :class:`QueryResult` or a
:class:`QueryFailure`, never raises for a bad query.
"""

from __future__ import annotations

import functools
import math
import os
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

DEFAULT_TIMEOUT_S = 3.0  # as in the ABISS reference code
DEFAULT_MAX_ROWS = 100_000
# Memory bounds for untrusted SQL; env overrides for large legitimate seed databases.
DEFAULT_MAX_RESULT_BYTES = int(os.environ.get("QUANDARY_SQL_MAX_RESULT_MB", "64")) << 20
SQLITE_MAX_VALUE_BYTES = int(os.environ.get("QUANDARY_SQL_MAX_VALUE_MB", "16")) << 20
SQLITE_HEAP_LIMIT_BYTES = int(os.environ.get("QUANDARY_SQL_SQLITE_HEAP_MB", "384")) << 20
DUCKDB_MEMORY_LIMIT = os.environ.get("QUANDARY_SQL_DUCKDB_MEMORY", "256MB")
DUCKDB_MAX_TEMP = os.environ.get("QUANDARY_SQL_DUCKDB_MAX_TEMP", "1GB")
_DUCKDB_THREADS = int(os.environ.get("QUANDARY_SQL_DUCKDB_THREADS", "2"))

SQLITE_SUFFIXES = {".sqlite", ".sqlite3", ".db", ".db3"}
DUCKDB_SUFFIXES = {".duckdb", ".ddb"}


class FailureKind(str, Enum):
    SYNTAX = "syntax"
    RUNTIME = "runtime"
    TIMEOUT = "timeout"
    FORBIDDEN = "forbidden"
    TOO_MANY_ROWS = "too_many_rows"
    TOO_LARGE = "too_large"  # a value, the result or the engine's memory exceeded its bound


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple]
    elapsed_ms: float
    ok: bool = field(default=True, init=False)

    @property
    def row_count(self) -> int:
        return len(self.rows)


@dataclass(frozen=True)
class QueryFailure:
    kind: FailureKind
    message: str
    elapsed_ms: float = 0.0
    ok: bool = field(default=False, init=False)

    def one_line(self) -> str:
        return f"{self.kind.value}: {' '.join(self.message.split())}"


Outcome = QueryResult | QueryFailure


def engine_of(path: str | Path) -> str:
    """'sqlite' or 'duckdb', by magic bytes first and file suffix second."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            head = fh.read(16)
    except OSError:
        head = b""
    if head.startswith(b"SQLite format 3\x00"):
        return "sqlite"
    if len(head) >= 12 and head[8:12] == b"DUCK":
        return "duckdb"
    return "duckdb" if p.suffix.lower() in DUCKDB_SUFFIXES else "sqlite"


def check_timeout(timeout_s) -> float:
    """A usable timeout: a finite number of seconds > 0 (``nan``/``inf`` would disable the deadline)."""
    try:
        value = float(timeout_s)
    except (TypeError, ValueError):
        raise ValueError(f"timeout must be a number of seconds, got {timeout_s!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"timeout must be a finite number of seconds > 0, got {timeout_s!r}")
    return value


def timeout_arg(text: str) -> float:
    """argparse ``type=`` for ``--timeout``: refuses nan, inf, 0 and negatives with one line."""
    import argparse

    try:
        return check_timeout(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def execute_sql(
    db_path: str | Path,
    sql: str,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_rows: int = DEFAULT_MAX_ROWS,
    max_bytes: int = DEFAULT_MAX_RESULT_BYTES,
) -> Outcome:
    """Run one untrusted read-only statement; return rows or a typed failure.

    Raises ``ValueError`` only for a non-finite or non-positive ``timeout_s`` (a caller's error)."""
    timeout_s = check_timeout(timeout_s)
    if not isinstance(sql, str) or not sql.strip():
        return QueryFailure(FailureKind.SYNTAX, "empty SQL")
    path = Path(db_path)
    if not path.is_file():
        return QueryFailure(FailureKind.RUNTIME, f"database not found: {path}")
    if os.environ.get("QUANDARY_SQL_WORKER") == "1" or os.environ.get("QUANDARY_SQL_IN_PROCESS") == "1":
        return execute_in_process(str(path), sql, timeout_s, max_rows, max_bytes)
    return _POOL.run((str(path), sql, timeout_s, max_rows, max_bytes), timeout_s)


def execute_in_process(path: str, sql: str, timeout_s: float, max_rows: int, max_bytes: int) -> Outcome:
    """Run in this process (the sandbox worker calls this; its memory is capped by RLIMIT_AS)."""
    path = Path(path)
    if engine_of(path) == "duckdb":
        return _execute_duckdb(path, sql, timeout_s, max_rows, max_bytes)
    return _execute_sqlite(path, sql, timeout_s, max_rows, max_bytes)


def value_bytes(value) -> int:
    """Approximate size of one result value (what bounds the Python copy of a result)."""
    if isinstance(value, (str, bytes, bytearray, memoryview)):
        return len(value) + 16
    if isinstance(value, (list, tuple)):
        return 16 + sum(value_bytes(v) for v in value)
    if isinstance(value, dict):
        return 16 + sum(value_bytes(k) + value_bytes(v) for k, v in value.items())
    return 16


def _fetch_bounded(cur, max_rows: int, max_bytes: int, start: float, chunk: int) -> Outcome | list[tuple]:
    """Fetch at most ``max_rows`` rows and ``max_bytes`` bytes; a typed failure past either."""
    rows: list[tuple] = []
    size = 0
    while True:
        batch = cur.fetchmany(chunk)
        if not batch:
            return rows
        for r in batch:
            size += sum(value_bytes(v) for v in r)
            if size > max_bytes:
                return QueryFailure(FailureKind.TOO_LARGE, f"result larger than {max_bytes >> 20} MB", _ms(start))
            rows.append(tuple(r))
            if len(rows) > max_rows:
                return QueryFailure(FailureKind.TOO_MANY_ROWS, f"more than {max_rows} rows", _ms(start))


# ----------------------------------------------------------------------------------- SQLite

# Authorizer action codes (sqlite3.h); the sqlite3 module exposes most but not all of them.
_SQLITE_ALLOWED_ACTIONS = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    getattr(sqlite3, "SQLITE_RECURSIVE", 33),
}
# Functions that touch files, load code or expose internals; everything else is pure.
_SQLITE_DENIED_FUNCTIONS = {
    "load_extension",
    "readfile",
    "writefile",
    "edit",
    "fts3_tokenizer",
    "zipfile",
    "sqlar_compress",
    "sqlar_uncompress",
}


def _sqlite_authorizer(action, arg1, arg2, db_name, trigger):
    if action not in _SQLITE_ALLOWED_ACTIONS:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _SQLITE_DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_READ and db_name not in (None, "main"):
        return sqlite3.SQLITE_DENY  # e.g. temp schema
    return sqlite3.SQLITE_OK


def _classify_sqlite_error(exc: Exception, timed_out: bool) -> FailureKind:
    msg = str(exc).lower()
    if isinstance(exc, (MemoryError, OverflowError)) or "too big" in msg or "out of memory" in msg:
        return FailureKind.TOO_LARGE
    if timed_out or "interrupted" in msg:
        return FailureKind.TIMEOUT
    if any(s in msg for s in ("not authorized", "authorization denied", "one statement at a time", "readonly")):
        return FailureKind.FORBIDDEN
    if "syntax error" in msg or "incomplete input" in msg or "unrecognized token" in msg:
        return FailureKind.SYNTAX
    return FailureKind.RUNTIME


def open_sqlite_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection for trusted inspection code (catalog); no authorizer."""
    uri = f"{path.resolve().as_uri()}?mode=ro"
    con = sqlite3.connect(uri, uri=True, check_same_thread=False)
    con.execute("PRAGMA query_only = ON")
    return con


_heap_limit_lock = threading.Lock()
_heap_limit_set = False


def _bound_sqlite_memory(con: sqlite3.Connection) -> None:
    """Per-value length limit on this connection; a process-wide hard heap limit (set once)."""
    global _heap_limit_set
    con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, SQLITE_MAX_VALUE_BYTES)
    con.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, 1 << 20)
    # Sorts and temp b-trees stay in the (heap-limited) memory instead of filling the disk.
    con.execute("PRAGMA temp_store = MEMORY")
    with _heap_limit_lock:
        if not _heap_limit_set:
            # The pragma only ever lowers the limit; it bounds every SQLite connection of the
            # process (the call log needs a few MB of page cache, far below it).
            con.execute(f"PRAGMA hard_heap_limit = {int(SQLITE_HEAP_LIMIT_BYTES)}")
            _heap_limit_set = True


class _Watchdog:
    """Interrupts the engine at the deadline from another thread (a second line of defence
    beside the SQLite progress handler; the only one for DuckDB)."""

    def __init__(self, timeout_s: float, interrupt):
        self.fired = False
        self._interrupt = interrupt
        self._timer = threading.Timer(timeout_s, self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        self.fired = True
        try:
            self._interrupt()
        except Exception:  # noqa: BLE001 - the connection may be closing
            pass

    def start(self) -> None:
        self._timer.start()

    def cancel(self) -> None:
        self._timer.cancel()


def _execute_sqlite(path: Path, sql: str, timeout_s: float, max_rows: int, max_bytes: int) -> Outcome:
    start = time.perf_counter()
    try:
        con = open_sqlite_readonly(path)
        _bound_sqlite_memory(con)
    except sqlite3.Error as exc:
        return QueryFailure(FailureKind.RUNTIME, f"cannot open database: {exc}")
    deadline = time.monotonic() + timeout_s
    state = {"timed_out": False}

    def progress() -> int:
        if time.monotonic() > deadline:
            state["timed_out"] = True
            return 1  # non-zero aborts the running statement
        return 0

    watchdog = _Watchdog(timeout_s, con.interrupt)
    try:
        con.set_authorizer(_sqlite_authorizer)
        con.set_progress_handler(progress, 1000)
        watchdog.start()
        cur = con.execute(sql)
        if cur.description is None:
            return QueryFailure(FailureKind.FORBIDDEN, "statement returns no rows (not a query)")
        columns = [d[0] for d in cur.description]
        rows = _fetch_bounded(cur, max_rows, max_bytes, start, chunk=1)  # one row at a time: a row can be 16 MB
        if isinstance(rows, QueryFailure):
            return rows
        return QueryResult(columns, rows, _ms(start))
    except (sqlite3.Error, sqlite3.Warning, OverflowError, ValueError, MemoryError) as exc:
        kind = _classify_sqlite_error(exc, state["timed_out"] or watchdog.fired)
        message = f"exceeded {timeout_s:g} s" if kind is FailureKind.TIMEOUT else str(exc)
        if kind is FailureKind.TOO_LARGE:
            message = f"{exc} (values are limited to {SQLITE_MAX_VALUE_BYTES >> 20} MB)"
        return QueryFailure(kind, message, _ms(start))
    finally:
        watchdog.cancel()
        con.close()


# ----------------------------------------------------------------------------------- DuckDB


def _duckdb_spill_dir() -> str:
    # Spill next to nothing the user owns: a private temp folder, bounded by max_temp_directory_size.
    d = Path(tempfile.gettempdir()) / f"quandary-duckdb-spill-{os.getuid() if hasattr(os, 'getuid') else 0}"
    d.mkdir(parents=True, exist_ok=True)
    return str(d)


def open_duckdb_readonly(path: Path, *, threads: int | None = None):
    import duckdb

    config = {
        "enable_external_access": False,
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
        "allow_community_extensions": False,
        # Memory bounds must be set before lock_configuration, or SQL could raise them again.
        "memory_limit": DUCKDB_MEMORY_LIMIT,
        "max_memory": DUCKDB_MEMORY_LIMIT,
        "temp_directory": _duckdb_spill_dir(),
        "max_temp_directory_size": DUCKDB_MAX_TEMP,
        "lock_configuration": True,
    }
    if threads:
        config["threads"] = threads
    return duckdb.connect(str(path), read_only=True, config=config)


def _execute_duckdb(path: Path, sql: str, timeout_s: float, max_rows: int, max_bytes: int) -> Outcome:
    import duckdb

    start = time.perf_counter()
    try:
        con = open_duckdb_readonly(path, threads=_DUCKDB_THREADS)
    except duckdb.Error as exc:
        return QueryFailure(FailureKind.RUNTIME, f"cannot open database: {exc}")
    try:
        return run_duckdb_statement(con, sql, timeout_s, max_rows, max_bytes, start)
    finally:
        con.close()


# Process-wide, not per thread: DuckDB may run a UDF on one of its own threads.
_udf_interrupts: list[BaseException] = []


def keeps_interrupts(fn: Callable) -> Callable:
    """Wrap a Python UDF so an interrupt raised inside it (Ctrl-C, SIGTERM, Dagster's interrupt:
    DuckDB runs UDFs on the calling thread, so the signal lands there) stays an interrupt. DuckDB
    turns whatever a UDF raises into an ordinary ``InvalidInputException``, which a caller would
    record as one failed query and go on to the next; :func:`run_duckdb_statement` re-raises it."""
    @functools.wraps(fn)  # DuckDB reads the arity from the signature (functools keeps it)
    def udf(*args):
        try:
            return fn(*args)
        except Exception:
            raise
        except BaseException as exc:
            _udf_interrupts.append(exc)
            raise
    return udf


def _reraise_udf_interrupt() -> None:
    if _udf_interrupts:
        exc = _udf_interrupts[0]
        _udf_interrupts.clear()
        raise exc


def run_duckdb_statement(con, sql: str, timeout_s: float, max_rows: int, max_bytes: int,
                         start: float | None = None) -> Outcome:
    """One untrusted statement on an open locked read-only connection (see open_duckdb_readonly):
    exactly one SELECT, the watchdog deadline, the row and byte caps, typed failures."""
    import duckdb

    start = time.perf_counter() if start is None else start
    if not isinstance(sql, str) or not sql.strip():
        return QueryFailure(FailureKind.SYNTAX, "empty SQL")
    watchdog = _Watchdog(timeout_s, con.interrupt)
    try:
        try:
            statements = con.extract_statements(sql)
        except duckdb.Error as exc:
            return QueryFailure(FailureKind.SYNTAX, str(exc), _ms(start))
        if len(statements) != 1:
            return QueryFailure(
                FailureKind.FORBIDDEN,
                f"expected exactly one statement, got {len(statements)}",
                _ms(start),
            )
        if statements[0].type != duckdb.StatementType.SELECT:
            return QueryFailure(
                FailureKind.FORBIDDEN,
                f"only SELECT queries are allowed, got {statements[0].type.name}",
                _ms(start),
            )
        watchdog.start()
        cur = con.execute(sql)
        columns = [d[0] for d in cur.description or []]
        rows = _fetch_bounded(cur, max_rows, max_bytes, start, chunk=64)
        if isinstance(rows, QueryFailure):
            return rows
        return QueryResult(columns, rows, _ms(start))
    except duckdb.Error as exc:
        _reraise_udf_interrupt()
        msg = str(exc)
        if isinstance(exc, duckdb.OutOfMemoryException) or "out of memory" in msg.lower():
            return QueryFailure(FailureKind.TOO_LARGE,
                                f"query exceeds the memory bound of untrusted SQL: {msg.splitlines()[0]}", _ms(start))
        if watchdog.fired or isinstance(exc, duckdb.InterruptException):
            return QueryFailure(FailureKind.TIMEOUT, f"exceeded {timeout_s:g} s", _ms(start))
        if isinstance(exc, duckdb.ParserException):
            kind = FailureKind.SYNTAX
        elif isinstance(exc, duckdb.PermissionException) or "read-only" in msg.lower():
            kind = FailureKind.FORBIDDEN
        else:
            kind = FailureKind.RUNTIME
        return QueryFailure(kind, msg, _ms(start))
    except MemoryError:
        return QueryFailure(FailureKind.TOO_LARGE, "result does not fit in memory", _ms(start))
    except (TypeError, ValueError, UnicodeDecodeError, OverflowError) as exc:
        # e.g. invalid UTF-8 stored in a VARCHAR: the value cannot become a Python str
        return QueryFailure(FailureKind.RUNTIME, f"cannot convert a result value: {exc}", _ms(start))
    finally:
        watchdog.cancel()


def warm_up() -> None:
    """Load both engines and their allocators (the worker measures its baseline after this)."""
    import duckdb

    con = duckdb.connect(":memory:", config={"threads": _DUCKDB_THREADS})
    con.execute("SELECT sum(range) FROM range(100000)").fetchall()
    con.close()
    sqlite3.connect(":memory:").execute("SELECT 1").fetchall()


# ------------------------------------------------------------------------- sandbox workers

# Grace past the budget before a silent worker is killed; keeps every query within 1.5x.
KILL_AFTER_FACTOR = 1.25
KILL_AFTER_MIN_GRACE_S = 0.1
_WORKER_START_TIMEOUT_S = 120.0  # a loaded machine can take long to start Python + DuckDB


class _Worker:
    def __init__(self):
        import subprocess
        import sys

        repo_root = str(Path(__file__).resolve().parents[1])
        env = dict(os.environ, MALLOC_ARENA_MAX="2", PYTHONPATH=os.pathsep.join(
            p for p in (repo_root, os.environ.get("PYTHONPATH")) if p))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "resources.sql_worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env=env, cwd=repo_root, close_fds=True,
        )
        ready = self._read(_WORKER_START_TIMEOUT_S)
        if not isinstance(ready, dict) or not ready.get("ready"):
            self.kill()
            raise RuntimeError("the SQL sandbox worker did not start")
        self.memory_limit = int(ready.get("limit") or 0)
        self.baseline_rss = int(ready.get("rss") or 0)
        self.pid = self.proc.pid

    def _read(self, timeout_s: float):
        import pickle
        import select

        from resources.sql_worker import HEADER

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
            buf, need, header_done = buf[HEADER.size:], n, True

    def call(self, request: tuple, timeout_s: float) -> Outcome:
        from resources.sql_worker import write_msg

        start = time.perf_counter()
        try:
            write_msg(self.proc.stdin, request)
            return self._read(timeout_s * KILL_AFTER_FACTOR + KILL_AFTER_MIN_GRACE_S)
        except TimeoutError:
            self.kill()
            return QueryFailure(FailureKind.TIMEOUT, f"exceeded {timeout_s:g} s", _ms(start))
        except (EOFError, BrokenPipeError, OSError):
            code = self.kill()
            # An engine that aborts on a failed allocation takes the worker down (SIGABRT/SIGKILL).
            return QueryFailure(FailureKind.TOO_LARGE,
                                f"the query's sandbox died (exit {code}), most likely out of memory "
                                f"(limit {self.memory_limit >> 20} MB)", _ms(start))

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


import atexit  # noqa: E402

atexit.register(close_workers)


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


# --------------------------------------------------------------- in-process DuckDB session

class SessionPrepareError(Exception):
    pass


class DuckDBSession:
    """One locked read-only DuckDB connection reused for many untrusted queries.

    Same guarantees as :func:`execute_sql` per query (one SELECT, timeout, row cap; read-only, no
    external access, configuration locked), without paying the connection open per query, e.g. for
    AI-operator evaluations that run hundreds of small queries with the same UDFs registered once
    by ``prepare(con)``. Not thread-safe: one query at a time.
    """

    def __init__(self, path: str | Path, *, threads: int | None = None, prepare: Callable | None = None):
        import duckdb

        self.path = Path(path)
        self.con = open_duckdb_readonly(self.path, threads=threads)
        if prepare is not None:
            try:
                prepare(self.con)
            except duckdb.Error as exc:
                self.con.close()
                raise SessionPrepareError(str(exc)) from None

    def __enter__(self) -> "DuckDBSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.con.close()

    def execute(self, sql: str, *, timeout_s: float = DEFAULT_TIMEOUT_S, max_rows: int = DEFAULT_MAX_ROWS,
                max_bytes: int = DEFAULT_MAX_RESULT_BYTES, _start: float | None = None) -> Outcome:
        # In this process (the UDFs call back into it), bounded by the connection's memory_limit.
        return run_duckdb_statement(self.con, sql, timeout_s, max_rows, max_bytes, _start)


