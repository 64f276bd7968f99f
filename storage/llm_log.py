"""The LLM call cache and call log: one table ``llm_calls``, in ``$QUANDARY_HOME/llm_calls.sqlite`` on
one machine, or ``quandary_llm_calls`` in the deployment's PostgreSQL database when many machines
share it (:func:`open_call_log`; ``storage/llm_log_pg.py``).

Why one table for both: a cache hit *is* the audit record of the answer a stage used, and a
resumed run finds every finished call by its key and makes no request for it.

- ``call_id`` (primary key) = sha256 of the canonical JSON of (model, messages, sampling params incl.
  seed, output schema) — see :func:`call_key`. The server address is not part of it, so the
  embedded server's random port does not invalidate the cache.
- ``status``: ``ok`` (parsed), ``parse_failed`` (the model answered but unusably) or ``call_failed``
  (transport failure after retries). Only ``ok`` is a cache hit: a provider that answered HTTP 200
  with garbage must not poison the cache, so a later run asks again and overwrites the row, adding
  to ``attempts`` (issue #13 item 5).
- Single flight: a process about to send an uncached request claims its key with an ``in_flight``
  row naming its ``owner`` and a ``lease_until``; a heartbeat thread renews the leases of the keys
  it is sending; any process (on any machine) waits while the lease lives and takes the key over
  once it has expired — a dead owner's key within one lease (``$QUANDARY_CALL_LEASE_S``, 30 s).
  Expiry is judged by the database's clock, never by a node's.
- Every write is one statement. Columns are plain TEXT/INTEGER/REAL (JSON as TEXT) so the audit
  catalog can expose the table as a view; ``owner`` and ``lease_until`` are bookkeeping, not audit.

:class:`~storage.llm_log_rules.CallLogRules` holds every rule above once; :class:`CallLog`
(SQLite, here) and ``PostgresCallLog`` (storage/llm_log_pg.py) only run its statements, whose SQL is
shared (named ``:params``; the only dialect pieces are the clock and the column types).
"""

import contextlib
import os
import random
import socket
import sqlite3
import threading
import time
import warnings
from pathlib import Path

from storage.faults import CORRUPT, storage_cause
from storage.llm_log_rules import (  # noqa: F401 - the call log's public names live here
    AUDIT_COLUMNS,
    CACHEABLE_STATUSES,
    COLUMN_SPEC,
    DEFAULT_LEASE_S,
    LEASE_COLUMNS,
    LEASE_ENV,
    TABLE,
    CallLogDamaged,
    CallLogError,
    CallLogRules,
    CallRecord,
    call_key,
    canonical_json,
    lease_seconds,
    owner_id,
    schema_sql,
    spill_dir,
)
from storage.paths import llm_calls_path
from storage.state_db import state_url


class CallLog(CallLogRules):
    """The SQLite call log (the one-machine default). One connection per thread (sqlite3 objects are
    not shareable across threads); each statement is its own short transaction (WAL)."""

    table = TABLE
    NOW = "((julianday('now') - 2440587.5) * 86400.0)"  # unix seconds: lease_until is REAL here
    LEASE_UNTIL = f"({NOW} + :lease_s)"
    DB_ERRORS = (sqlite3.Error, OSError)

    def __init__(self, path: str | Path, *, lease_s: float | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._init_rules(str(self.path.resolve()), lease_s)
        existed = self.path.exists()
        self._noted = False  # the marker holds a count above 0 (set at open or at the first record)
        try:
            self._retry(self._init_schema)
        except (sqlite3.Error, OSError) as exc:
            raise self._storage_error(exc) from exc
        self._merge_spilled()
        self._check_not_lost(existed)

    @property
    def marker(self) -> Path:
        """``<log>.rows``: how many calls the log held when last opened (to notice it vanish)."""
        return self.path.with_name(self.path.name + ".rows")

    def _check_not_lost(self, existed: bool) -> None:
        """A deleted or emptied call log must not start anew silently (issue 34 item 6): every cached
        answer is gone and each call will be made (and paid for) again. The count of calls is kept
        beside it (at open, and at this process's first record: a log written once and then emptied
        is noticed too, #45 item 5); finding none where there were some is a warning naming the file."""
        try:
            now = int(self._conn().execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0])
        except sqlite3.Error:
            return
        if (note := lost_calls_note(self.path, now, existed)) is not None:
            warnings.warn(note, UserWarning, stacklevel=3)
            self._noted = True
            return  # the marker stays: the warning repeats until the log holds calls again
        self._note_count(now)

    def _note_count(self, now: int) -> None:
        if now != noted_calls(self.path):
            try:
                self.marker.write_text(str(now))
            except OSError:
                pass  # a read-only home: nothing to compare next time
        self._noted = now > 0

    def record(self, rec: CallRecord) -> None:
        super().record(rec)
        if not self._noted:  # once per process: the log now holds calls; note it beside the file
            try:
                self._note_count(int(self._conn().execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0]))
            except sqlite3.Error:
                pass

    def _cause(self, exc: BaseException) -> str | None:
        return storage_cause(exc, self.path)

    def _describe(self, exc: BaseException, cause: str) -> CallLogError:
        if cause == CORRUPT:
            return CallLogDamaged(
                f"local storage error: the call log {self.path} is damaged ({exc}); move it away (its cached "
                "answers are lost) or restore it, then rerun",
                cause,
                self.path,
            )
        return super()._describe(exc, cause)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            conn.execute("PRAGMA busy_timeout=30000")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # durable at checkpoint; atomic always (WAL)
            conn.row_factory = sqlite3.Row
            self._local.conn = conn
        return conn

    def _init_schema(self) -> None:
        conn = self._conn()
        conn.executescript(";\n".join(schema_sql(TABLE, {}, "REAL")) + ";")
        have = {r[1] for r in conn.execute(f"PRAGMA table_info({TABLE})")}
        for col, kind in (("owner", "TEXT"), ("lease_until", "REAL")):
            if col not in have:  # a log written before leases (claims kept their owner in `error`)
                try:
                    conn.execute(f"ALTER TABLE {TABLE} ADD COLUMN {col} {kind}")
                except sqlite3.OperationalError as e:
                    if "duplicate column" not in str(e):
                        raise

    @staticmethod
    def _retry(fn, *args, attempts: int = 8):
        # busy_timeout covers most contention; WAL checkpoints and schema creation can still report
        # "database is locked" immediately, so retry those with jittered backoff.
        for i in range(attempts):
            try:
                return fn(*args)
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) and "busy" not in str(e) or i == attempts - 1:
                    raise
                time.sleep(min(2.0, 0.05 * 2**i) * (0.5 + random.random()))

    def _fetch(self, sql: str, params: dict) -> list[dict]:
        return self._retry(lambda: [dict(r) for r in self._conn().execute(sql, params).fetchall()])

    def _execute(self, sql: str, params: dict) -> int:
        return self._retry(lambda: self._conn().execute(sql, params).rowcount)

    @contextlib.contextmanager
    def transaction(self):
        """This thread's log operations inside the block share one transaction (one commit): the
        council's log thread batches the claims and records that queued up meanwhile. Rolled back
        if the block raises."""
        conn = self._conn()
        self._guard(self._retry, conn.execute, "BEGIN IMMEDIATE")
        try:
            yield
            self._guard(self._retry, conn.execute, "COMMIT")
        except BaseException:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise

    @contextlib.contextmanager
    def durable_transaction(self):
        """WAL with ``synchronous=NORMAL`` may lose the last commits on power loss: a spill merge
        needs its commit on disk before it removes the spill file."""
        conn = self._conn()
        conn.execute("PRAGMA synchronous=FULL")
        try:
            with self.transaction():
                yield
        finally:
            conn.execute("PRAGMA synchronous=NORMAL")

    def _owner_is_dead(self, owner: str | None) -> bool:
        """One machine: an owner on this host whose pid is gone died (kill -9) — take its key now."""
        host, pid = _owner_host_pid(owner)
        if host != socket.gethostname() or pid is None or pid == os.getpid():
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
        return False

    def close(self) -> None:
        super().close()
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


def noted_calls(path: Path) -> int:
    """How many calls the log at ``path`` held when last noted (``<log>.rows``; 0 when none)."""
    try:
        return int(path.with_name(path.name + ".rows").read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


def lost_calls_note(path: Path, now: int, existed: bool | None = None) -> str | None:
    """The warning for a call log that held calls and now holds ``now`` = 0 (deleted or emptied),
    else None; shared by the log itself and the audit catalog's ``llm_calls`` view."""
    had = noted_calls(path)
    if had <= 0 or now > 0:
        return None
    existed = path.exists() if existed is None else existed
    return (
        f"call log {path} held {had} calls and is now {'empty' if existed else 'gone'}: every cached "
        f"answer is lost and each call will be made again; stop and restore it from a backup, or delete "
        f"{path.with_name(path.name + '.rows')} to accept the empty log"
    )


def _owner_host_pid(owner: str | None) -> tuple[str, int | None]:
    parts = (owner or "").split(":")
    if len(parts) >= 3 and parts[-2].isdigit():  # host:pid:nonce
        return ":".join(parts[:-2]), int(parts[-2])
    if len(parts) >= 2 and parts[-1].isdigit():  # host:pid (logs written before leases)
        return ":".join(parts[:-1]), int(parts[-1])
    return "", None


def call_log_location(path: str | Path | None = None) -> str:
    """Where :func:`open_call_log` would open the log: the database URL (no password) + table, or
    the resolved file — the key under which a process shares one handle."""

    if path is None and state_url():
        from storage.llm_log_pg import location  # lazy: sqlalchemy, only in distributed mode

        return location(state_url())

    return str(Path(path or llm_calls_path()).resolve())


def open_call_log(path: str | Path | None = None, *, lease_s: float | None = None) -> CallLogRules:
    """The deployment's call log: PostgreSQL in distributed mode ($QUANDARY_STATE_URL or
    $QUANDARY_DAGSTER_PG_URL, storage.state_db) unless a file is named, else the SQLite file
    (default ``$QUANDARY_HOME/llm_calls.sqlite``)."""

    if path is None and state_url():
        from storage.llm_log_pg import PostgresCallLog  # lazy: sqlalchemy, only in distributed mode

        return PostgresCallLog(state_url(), lease_s=lease_s)

    return CallLog(path or llm_calls_path(), lease_s=lease_s)
