"""The session: one locked read-only DuckDB connection reused for many untrusted queries, in this
process (AI-operator UDFs call back into it)."""

from collections.abc import Callable
from pathlib import Path

from resources.sql.engines import open_duckdb_readonly, run_duckdb_statement
from resources.sql.results import DEFAULT_MAX_RESULT_BYTES, DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_S, Outcome, check_timeout


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
        timeout_s = check_timeout(timeout_s)  # nan/inf/0/-1 would switch the watchdog off (issue 23 item 2)
        return run_duckdb_statement(self.con, sql, timeout_s, max_rows, max_bytes, _start)
