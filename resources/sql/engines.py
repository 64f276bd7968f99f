"""The two engines in this process: read-only SQLite and DuckDB connections, the SQLite authorizer,
watchdog interrupts, bounded fetches and memory classification (see ``resources/sql/__init__.py`` for
the guarantees). The sandbox worker runs queries through :func:`execute_in_process`."""

from __future__ import annotations

import dataclasses
import functools
import os
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from resources.sql.results import (
    _DUCKDB_THREADS,
    DUCKDB_MAX_TEMP,
    DUCKDB_MEMORY_LIMIT,
    SQLITE_HEAP_LIMIT_BYTES,
    SQLITE_MAX_VALUE_BYTES,
    FailureKind,
    Outcome,
    QueryFailure,
    QueryResult,
    _ms,
    engine_of,
    value_bytes,
)
from resources.sql.values import digest_rows


def execute_in_process(
    path: str, sql: str, timeout_s: float, max_rows: int, max_bytes: int, digest: bool = False
) -> Outcome:
    """Run in this process (the sandbox worker calls this; its memory is capped by RLIMIT_AS)."""
    path = Path(path)
    if engine_of(path) == "duckdb":
        return _execute_duckdb(path, sql, timeout_s, max_rows, max_bytes, digest)
    return _execute_sqlite(path, sql, timeout_s, max_rows, max_bytes, digest)


def _fetch_bounded(
    cur, max_rows: int, max_bytes: int, start: float, chunk: int, digest: bool = False
) -> Outcome | list[tuple]:
    """Fetch at most ``max_rows`` rows and ``max_bytes`` bytes; a typed failure past either.

    ``digest``: past a cap, keep reading (under the same deadline) but hold no row: every row is
    folded into a :class:`~resources.sql.values.ResultDigest`, and the failure carries the row
    count and the digests, so two large results can still be compared as bags (#30 item 4)."""
    rows: list[tuple] = []
    size = 0
    while True:
        batch = cur.fetchmany(chunk)
        if not batch:
            return rows
        for r in batch:
            size += sum(value_bytes(v) for v in r)
            rows.append(tuple(r))
            if size > max_bytes:
                failure = QueryFailure(FailureKind.TOO_LARGE, f"result larger than {max_bytes >> 20} MB", _ms(start))
            elif len(rows) > max_rows:
                failure = QueryFailure(FailureKind.TOO_MANY_ROWS, f"more than {max_rows} rows", _ms(start))
            else:
                continue
            if not digest:
                return failure
            return _digest_rest(cur, rows, failure, start, chunk)


def _digest_rest(cur, held: list[tuple], failure: QueryFailure, start: float, chunk: int) -> QueryFailure:
    folded = digest_rows(held)
    held.clear()  # from here on no row is kept
    try:
        while batch := cur.fetchmany(max(chunk, 256)):
            for r in batch:
                folded.add(r)
    except Exception as exc:  # noqa: BLE001 - the deadline (or a bound) stopped the digest: no digest
        # Never a timeout of the query itself: it did answer, past the cap; the caller cannot compare.
        why = f"{failure.message}; digest stopped after {folded.rows} rows ({type(exc).__name__})"
        return dataclasses.replace(failure, message=why, elapsed_ms=_ms(start))
    columns = [d[0] for d in cur.description or []]
    return dataclasses.replace(
        failure,
        elapsed_ms=_ms(start),
        columns=columns,
        row_total=folded.rows,
        bag_digest=folded.bag,
        ordered_digest=folded.ordered,
    )


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


def _execute_sqlite(
    path: Path, sql: str, timeout_s: float, max_rows: int, max_bytes: int, digest: bool = False
) -> Outcome:
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
        rows = _fetch_bounded(cur, max_rows, max_bytes, start, 1, digest)  # one row at a time: a row can be 16 MB
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
    # lazy: duckdb loaded before the SQL worker redirects sys.stdout writes into the protocol pipe
    # (a long query then fails as a corrupt 'too large' message); a lazy import keeps it after.
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


def _execute_duckdb(
    path: Path, sql: str, timeout_s: float, max_rows: int, max_bytes: int, digest: bool = False
) -> Outcome:
    import duckdb  # lazy: the SQL worker loads it only after its stdout is redirected

    start = time.perf_counter()
    try:
        con = open_duckdb_readonly(path, threads=_DUCKDB_THREADS)
    except duckdb.Error as exc:
        return QueryFailure(FailureKind.RUNTIME, f"cannot open database: {exc}")
    try:
        return run_duckdb_statement(con, sql, timeout_s, max_rows, max_bytes, start, digest)
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


# Forwarding UDFs: registered from data (name, DuckDB parameter types, return type), answered by
# whoever runs the query (the worker: a round trip to its parent; in process: the session's answer).
_udf_answerer: list[Callable] = []  # the answer(name, columns) -> values of the query running now


def set_udf_answerer(answer: Callable | None) -> None:
    _udf_answerer[:] = [answer] if answer is not None else []


def _with_arity(n: int, run: Callable) -> Callable:
    # DuckDB reads the arity from the Python signature, so each arity needs its own function
    return {
        1: lambda a: run([a]),
        2: lambda a, b: run([a, b]),
        3: lambda a, b, c: run([a, b, c]),
        4: lambda a, b, c, d: run([a, b, c, d]),
    }[n]


def register_forwarding_udfs(con, udfs) -> None:
    """Register each ``(name, params, returns)`` as a vectorised (arrow) UDF whose values come from
    the answerer set with :func:`set_udf_answerer`: one call per DuckDB vector, with its columns as
    Python lists."""
    import pyarrow as pa  # lazy: as duckdb; keeps `quandary` start-up light

    arrow = {"BOOLEAN": pa.bool_(), "DOUBLE": pa.float64(), "VARCHAR": pa.string(), "BIGINT": pa.int64()}

    def forward(name: str, returns: str, cols) -> pa.Array:
        if not _udf_answerer:
            raise RuntimeError(f"{name} called outside a session query")
        return pa.array(_udf_answerer[0](name, [c.to_pylist() for c in cols]), type=arrow[returns])

    for name, params, returns in udfs:
        if returns not in arrow:
            raise ValueError(f"UDF {name}: return type {returns!r} is not one of {', '.join(arrow)}")
        fn = _with_arity(len(params), functools.partial(forward, name, returns))
        try:
            con.create_function(name, keeps_interrupts(fn), list(params), returns, type="arrow", side_effects=False)
        except Exception as exc:  # noqa: BLE001 - duckdb.CatalogException: the shared instance has it
            if "already exists" not in str(exc):
                raise


def _reraise_udf_interrupt() -> None:
    if _udf_interrupts:
        exc = _udf_interrupts[0]
        _udf_interrupts.clear()
        raise exc


def run_duckdb_statement(
    con, sql: str, timeout_s: float, max_rows: int, max_bytes: int, start: float | None = None, digest: bool = False
) -> Outcome:
    """One untrusted statement on an open locked read-only connection (see open_duckdb_readonly):
    exactly one SELECT, the watchdog deadline, the row and byte caps, typed failures."""
    import duckdb  # lazy: the SQL worker loads it only after its stdout is redirected

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
        rows = _fetch_bounded(cur, max_rows, max_bytes, start, 64, digest)
        if isinstance(rows, QueryFailure):
            return rows
        return QueryResult(columns, rows, _ms(start))
    except duckdb.Error as exc:
        _reraise_udf_interrupt()
        msg = str(exc)
        if isinstance(exc, duckdb.OutOfMemoryException) or "out of memory" in msg.lower():
            return QueryFailure(
                FailureKind.TOO_LARGE,
                f"query exceeds the memory bound of untrusted SQL: {msg.splitlines()[0]}",
                _ms(start),
            )
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
    import duckdb  # lazy: the SQL worker loads it only after its stdout is redirected

    con = duckdb.connect(":memory:", config={"threads": _DUCKDB_THREADS})
    con.execute("SELECT sum(range) FROM range(100000)").fetchall()
    con.close()
    sqlite3.connect(":memory:").execute("SELECT 1").fetchall()
