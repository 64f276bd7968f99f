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
* with a cap on rows fetched.

Plain Python (no Dagster): ``execute_sql(path, sql)`` returns a :class:`QueryResult` or a
:class:`QueryFailure`, never raises for a bad query.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

DEFAULT_TIMEOUT_S = 3.0  # as in the ABISS reference code
DEFAULT_MAX_ROWS = 100_000

SQLITE_SUFFIXES = {".sqlite", ".sqlite3", ".db", ".db3"}
DUCKDB_SUFFIXES = {".duckdb", ".ddb"}


class FailureKind(str, Enum):
    SYNTAX = "syntax"
    RUNTIME = "runtime"
    TIMEOUT = "timeout"
    FORBIDDEN = "forbidden"
    TOO_MANY_ROWS = "too_many_rows"


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


def execute_sql(
    db_path: str | Path,
    sql: str,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_rows: int = DEFAULT_MAX_ROWS,
    prepare: Callable | None = None,
    threads: int | None = None,
) -> Outcome:
    """Run one untrusted read-only statement; return rows or a typed failure.

    DuckDB only: ``prepare(con)`` runs on the locked read-only connection before the query (e.g. to
    register Python UDFs such as the AI operators; it cannot change settings or open files), and
    ``threads`` pins DuckDB's thread count (1 makes LIMIT without ORDER BY reproducible). An
    exception raised from inside a UDF surfaces as a RUNTIME failure whose message carries it.
    """
    if not isinstance(sql, str) or not sql.strip():
        return QueryFailure(FailureKind.SYNTAX, "empty SQL")
    path = Path(db_path)
    if not path.is_file():
        return QueryFailure(FailureKind.RUNTIME, f"database not found: {path}")
    if engine_of(path) == "duckdb":
        return _execute_duckdb(path, sql, timeout_s, max_rows, prepare=prepare, threads=threads)
    if prepare is not None:
        return QueryFailure(FailureKind.FORBIDDEN, "UDF registration (prepare) is only supported for DuckDB")
    return _execute_sqlite(path, sql, timeout_s, max_rows)


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


def _execute_sqlite(path: Path, sql: str, timeout_s: float, max_rows: int) -> Outcome:
    start = time.perf_counter()
    try:
        con = open_sqlite_readonly(path)
    except sqlite3.Error as exc:
        return QueryFailure(FailureKind.RUNTIME, f"cannot open database: {exc}")
    deadline = time.monotonic() + timeout_s
    state = {"timed_out": False}

    def progress() -> int:
        if time.monotonic() > deadline:
            state["timed_out"] = True
            return 1  # non-zero aborts the running statement
        return 0

    try:
        con.set_authorizer(_sqlite_authorizer)
        con.set_progress_handler(progress, 1000)
        cur = con.execute(sql)
        if cur.description is None:
            return QueryFailure(FailureKind.FORBIDDEN, "statement returns no rows (not a query)")
        columns = [d[0] for d in cur.description]
        rows = cur.fetchmany(max_rows + 1)
        if len(rows) > max_rows:
            return QueryFailure(
                FailureKind.TOO_MANY_ROWS,
                f"more than {max_rows} rows",
                _ms(start),
            )
        return QueryResult(columns, [tuple(r) for r in rows], _ms(start))
    except (sqlite3.Error, sqlite3.Warning, OverflowError, ValueError) as exc:
        kind = _classify_sqlite_error(exc, state["timed_out"])
        message = f"exceeded {timeout_s:g} s" if kind is FailureKind.TIMEOUT else str(exc)
        return QueryFailure(kind, message, _ms(start))
    finally:
        con.close()


# ----------------------------------------------------------------------------------- DuckDB


def open_duckdb_readonly(path: Path, threads: int | None = None):
    import duckdb

    extra = {"threads": int(threads)} if threads else {}
    return duckdb.connect(
        str(path),
        read_only=True,
        config={
            **extra,
            "enable_external_access": False,
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "allow_community_extensions": False,
            "lock_configuration": True,
        },
    )


def _execute_duckdb(path: Path, sql: str, timeout_s: float, max_rows: int, prepare: Callable | None = None,
                    threads: int | None = None) -> Outcome:
    import duckdb

    start = time.perf_counter()
    try:
        session = DuckDBSession(path, threads=threads, prepare=prepare)
    except duckdb.Error as exc:
        return QueryFailure(FailureKind.RUNTIME, f"cannot open database: {exc}")
    except SessionPrepareError as exc:
        return QueryFailure(FailureKind.RUNTIME, f"cannot prepare connection: {exc}")
    try:
        return session.execute(sql, timeout_s=timeout_s, max_rows=max_rows, _start=start)
    finally:
        session.close()


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
                _start: float | None = None) -> Outcome:
        import duckdb

        start = _start if _start is not None else time.perf_counter()
        if not isinstance(sql, str) or not sql.strip():
            return QueryFailure(FailureKind.SYNTAX, "empty SQL")
        con = self.con
        state = {"timed_out": False}

        def on_timeout() -> None:
            state["timed_out"] = True
            con.interrupt()

        timer = threading.Timer(timeout_s, on_timeout)
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
            timer.start()
            cur = con.execute(sql)
            columns = [d[0] for d in cur.description or []]
            rows = cur.fetchmany(max_rows + 1)
            if len(rows) > max_rows:
                return QueryFailure(FailureKind.TOO_MANY_ROWS, f"more than {max_rows} rows", _ms(start))
            return QueryResult(columns, [tuple(r) for r in rows], _ms(start))
        except duckdb.Error as exc:
            msg = str(exc)
            if state["timed_out"] or isinstance(exc, duckdb.InterruptException):
                return QueryFailure(FailureKind.TIMEOUT, f"exceeded {timeout_s:g} s", _ms(start))
            if isinstance(exc, duckdb.ParserException):
                kind = FailureKind.SYNTAX
            elif isinstance(exc, duckdb.PermissionException) or "read-only" in msg.lower():
                kind = FailureKind.FORBIDDEN
            else:
                kind = FailureKind.RUNTIME
            return QueryFailure(kind, msg, _ms(start))
        finally:
            timer.cancel()


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)
