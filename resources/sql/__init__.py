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

Modules, each one job: ``results`` (outcome types, limits), ``engines`` (SQLite / DuckDB execution in
this process), ``protocol`` (the pool <-> worker wire format), ``pool`` (worker processes,
``execute_sql``), ``worker`` (the sandbox process), ``session`` (a reused DuckDB connection in a
sandbox worker whose UDFs are answered by the caller: AI-operator SQL).
"""

from resources.sql.engines import keeps_interrupts, open_duckdb_readonly, run_duckdb_statement
from resources.sql.pool import close_workers, execute_sql
from resources.sql.results import (
    DEFAULT_MAX_RESULT_BYTES,
    DEFAULT_MAX_ROWS,
    DEFAULT_TIMEOUT_S,
    MAX_TIMEOUT_S,
    FailureKind,
    Outcome,
    QueryFailure,
    QueryResult,
    check_timeout,
    engine_of,
    timeout_arg,
)
from resources.sql.session import SandboxSession

__all__ = [
    "DEFAULT_MAX_RESULT_BYTES",
    "DEFAULT_MAX_ROWS",
    "DEFAULT_TIMEOUT_S",
    "FailureKind",
    "Outcome",
    "QueryFailure",
    "QueryResult",
    "SandboxSession",
    "MAX_TIMEOUT_S",
    "check_timeout",
    "close_workers",
    "engine_of",
    "execute_sql",
    "keeps_interrupts",
    "open_duckdb_readonly",
    "run_duckdb_statement",
    "timeout_arg",
]
