"""The session: untrusted queries with forwarding UDFs on one read-only DuckDB connection that is
reused across queries, in a sandbox worker process (AI-operator SQL, issue 23 item 2).

The worker (:mod:`resources.sql.worker`) holds the connection and the UDFs; each UDF call (one
DuckDB vector) comes back over the pipe to ``answer(name, columns) -> values`` in this process, so
the caller keeps its own state (an AI runtime's council, cache, budget) and the worker never
imports it. Every query is bounded like :func:`resources.sql.execute_sql`: the worker's address
space limit, DuckDB ``memory_limit``, one SELECT, read-only, no external access, row and byte caps
(the inputs of one UDF call are capped too), the watchdog interrupt at the deadline and the kill
at 1.25x it, typed failures.

Why a worker and not DuckDB's own limits plus a watchdog in this process (both measured in
``bench/bench_aisql_sandbox.py``, numbers in ``bench/README.md``): DuckDB's ``memory_limit`` does not
count string functions such as ``repeat``, and its interrupt is not checked inside one long
allocation, so three ``repeat('x', 1e9)`` grew the calling process by 1.9 GB and ran 12 s on a 1 s
budget (in the worker: ``too_large`` after 0.07 s, the caller unchanged); only an address-space
limit on a separate process bounds them, and only a kill keeps the deadline. The price: the
worker's start (under a second) once per session and a round trip of a few milliseconds per UDF
call (one vector of up to 2,048 rows) on a loaded 2-core machine.

``in_process=True`` (or ``QUANDARY_SQL_IN_PROCESS=1``) runs the same connection and UDFs in this
process instead, for debugging and the bench only: no memory bound, no kill.
"""

import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from resources.sql.results import DEFAULT_MAX_RESULT_BYTES, DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_S, Outcome, check_timeout


class SandboxSession:
    """Queries on ``path`` with ``udfs`` — ``(name, DuckDB parameter types, return type)`` — answered
    by ``answer``. One query at a time; the worker starts at the first query and again after one
    was killed (deadline missed, out of memory). :meth:`close` stops it."""

    def __init__(
        self,
        path: str | Path,
        *,
        udfs: Iterable = (),
        answer: Callable | None = None,
        threads: int | None = 1,
        in_process: bool | None = None,
    ):
        self.path = Path(path).absolute()  # the worker's working directory is the repository
        self.udfs = tuple((name, tuple(params), returns) for name, params, returns in udfs)
        self.answer = answer
        self.threads = threads
        self.in_process = os.environ.get("QUANDARY_SQL_IN_PROCESS") == "1" if in_process is None else in_process
        self._lock = threading.Lock()
        self._worker = None
        self._served = None  # the database the worker's connection is on (it opens one at a query)
        self._con = None

    def __enter__(self) -> "SandboxSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def worker_pid(self) -> int | None:
        """The pid of the running sandbox worker, if one is running."""
        w = self._worker
        return w.pid if w is not None and w.alive() else None

    def start(self) -> None:
        """Start the worker now if none is running (else the next query starts it), so that a
        caller's own deadline need not pay for it."""
        with self._lock:
            self._ensure_worker()

    def rebind(self, path: str | Path) -> None:
        """Serve ``path`` from now on, keeping the worker (its start costs a few tenths of a second):
        the worker opens the new database at the next query and closes the old one then. A path the
        worker's connection is still on (the same path again, or one left with no query since: a
        file replaced in place) stops the worker: it would keep reading the old file."""
        new = Path(path).absolute()
        with self._lock:
            worker = self._worker if new in (self.path, self._served) else None
            if worker is not None:
                self._worker = None
            self.path = new
            con, self._con = self._con, None
        if worker is not None:
            worker.close()
        if con is not None:
            con.close()

    def _ensure_worker(self) -> None:
        from resources.sql.pool import _Worker  # lazy: import cycle (through resources/sql/__init__.py)
        from resources.sql.worker import SESSION_WORKER_ENV, UDF_WORKER_ENV

        if not self.in_process and (self._worker is None or not self._worker.alive()):
            role = {SESSION_WORKER_ENV: "1", **({UDF_WORKER_ENV: "1"} if self.udfs else {})}
            self._worker = _Worker(extra_env=role)
            self._served = None

    def execute(
        self,
        sql: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_rows: int = DEFAULT_MAX_ROWS,
        max_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    ) -> Outcome:
        """One statement; rows or a typed failure. Raises ``ValueError`` for a bad ``timeout_s``, and
        whatever ``answer`` raises that is not an ``Exception`` (Ctrl-C) after killing the worker."""
        # lazy: the worker module loads pyarrow; keeps start-up light
        from resources.sql.worker import MESSAGE_SLACK_BYTES

        timeout_s = check_timeout(timeout_s)  # nan/inf/0/-1 would switch the deadline off
        with self._lock:
            if self.in_process:
                return self._execute_here(sql, timeout_s, max_rows, max_bytes)
            self._ensure_worker()
            self._served = self.path
            request = {
                "session": (str(self.path), self.threads, self.udfs),
                "sql": sql,
                "timeout_s": timeout_s,
                "max_rows": max_rows,
                "max_bytes": max_bytes,
            }
            return self._worker.call(
                request, timeout_s, on_callback=self._callback, max_msg=max_bytes + MESSAGE_SLACK_BYTES
            )

    def _callback(self, msg: dict) -> dict:
        try:
            return {"values": list(self._answer(msg["callback"], msg["args"]))}
        except Exception as exc:  # noqa: BLE001 - the query fails in the worker with this message
            return {"error": f"{type(exc).__name__}: {exc}"}

    def _answer(self, name: str, columns: list) -> list:
        if self.answer is None:
            raise RuntimeError(f"no answer for UDF {name}")
        return self.answer(name, columns)

    def _execute_here(self, sql: str, timeout_s: float, max_rows: int, max_bytes: int) -> Outcome:
        from resources.sql import engines  # lazy: import cycle (through resources/sql/__init__.py)

        if self._con is None:
            self._con = engines.open_duckdb_readonly(self.path, threads=self.threads)
            engines.register_forwarding_udfs(self._con, self.udfs)
        engines.set_udf_answerer(self._answer)
        try:
            return engines.run_duckdb_statement(self._con, sql, timeout_s, max_rows, max_bytes)
        finally:
            engines.set_udf_answerer(None)

    def close(self) -> None:
        with self._lock:
            worker, self._worker = self._worker, None
            con, self._con = self._con, None
        if worker is not None:
            worker.close()
        if con is not None:
            con.close()
