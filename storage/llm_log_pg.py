"""The call log on PostgreSQL: one table ``quandary_llm_calls`` that every node of a distributed
deployment shares (issue 21 item 3), behind the same rules as the SQLite log
(:class:`storage.llm_log.CallLogRules`: keys, statuses, single flight, audit columns).

Only what differs lives here: the connection (SQLAlchemy Core on :func:`storage.state_db.state_engine`),
the column types (BIGINT, DOUBLE PRECISION, TEXT with the "C" collation so text sorts as in SQLite,
``lease_until TIMESTAMPTZ``), the database's clock ``now()`` for leases — no node's clock decides
whether a claim expired — and one message for a database that cannot be reached.
"""

from __future__ import annotations

import contextlib
import threading

from storage.faults import IO
from storage.llm_log_rules import CallLogError, CallLogRules, schema_sql
from storage.state_db import TABLE_PREFIX, state_engine

TABLE = f"{TABLE_PREFIX}llm_calls"
_TYPES = {"TEXT": 'TEXT COLLATE "C"', "INTEGER": "BIGINT", "REAL": "DOUBLE PRECISION"}
_SCHEMA_LOCK = 0x71C411  # pg_advisory_xact_lock key: nodes starting at once create the table once


def location(url: str) -> str:
    """The log's name in messages and spill files: the URL without its password, and the table."""
    from sqlalchemy.engine import make_url  # lazy: sqlalchemy, only in distributed mode

    return f"{make_url(url).render_as_string(hide_password=True)} (table {TABLE})"


class PostgresCallLog(CallLogRules):
    table = TABLE
    NOW = "now()"
    LEASE_UNTIL = "(now() + make_interval(secs => :lease_s))"

    def __init__(self, url: str, *, lease_s: float | None = None):
        from sqlalchemy.exc import SQLAlchemyError  # lazy: sqlalchemy, only in distributed mode

        self.DB_ERRORS = (SQLAlchemyError,)
        self.url = url
        self.path = location(url)
        self.engine = state_engine(url)
        self._tx = threading.local()  # this thread's open transaction (transaction()), if any
        self._init_rules(self.path, lease_s)
        self._guard(self._init_schema)
        self._merge_spilled()

    def _init_schema(self) -> None:
        from sqlalchemy import text  # lazy: sqlalchemy, only in distributed mode

        with self.engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _SCHEMA_LOCK})
            for stmt in schema_sql(TABLE, _TYPES, "TIMESTAMPTZ"):
                conn.execute(text(stmt))

    def _connection(self):
        """This thread's open transaction, else a new one for one statement."""
        conn = getattr(self._tx, "conn", None)
        return contextlib.nullcontext(conn) if conn is not None else self.engine.begin()

    def _fetch(self, sql: str, params: dict) -> list[dict]:
        from sqlalchemy import text  # lazy: sqlalchemy, only in distributed mode

        with self._connection() as conn:
            return [dict(r._mapping) for r in conn.execute(text(sql), params)]

    def _execute(self, sql: str, params: dict) -> int:
        from sqlalchemy import text  # lazy: sqlalchemy, only in distributed mode

        with self._connection() as conn:
            return conn.execute(text(sql), params).rowcount

    @contextlib.contextmanager
    def transaction(self):
        """This thread's log operations inside the block share one transaction (one commit), as for
        SQLite: the council's log thread batches what queued up meanwhile. Rolled back if the block
        raises (a deadlock between two nodes' batches included: the log thread then runs each
        operation alone)."""
        with self.engine.begin() as conn:
            self._tx.conn = conn
            try:
                yield
            finally:
                self._tx.conn = None

    def _cause(self, exc: BaseException) -> str | None:
        from sqlalchemy.exc import InterfaceError, OperationalError  # lazy: sqlalchemy, only in distributed mode

        # the server is down, unreachable or out of space: not a bug in a statement
        return IO if isinstance(exc, (OperationalError, InterfaceError)) else None

    def _describe(self, exc: BaseException, cause: str) -> CallLogError:
        detail = " ".join(str(getattr(exc, "orig", None) or exc).split())[:200]
        return CallLogError(
            f"call log database {self.path}: cannot be read or written ({type(exc).__name__}: {detail}); check "
            "that PostgreSQL is up and reachable at $QUANDARY_STATE_URL (or $QUANDARY_DAGSTER_PG_URL), then "
            "rerun (completed calls are kept)",
            cause,
            self.path,
        )
