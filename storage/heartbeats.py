"""Run heartbeats in the shared-state database (issue 21 item 7): is a run's worker still alive,
whichever machine it runs on?

One machine judges a run by its pid (``cli.runs``); across machines a pid means nothing, and
Dagster's run monitoring asks the run launcher, whose default one cannot tell (it has no health
check). So in distributed mode every run's worker process writes a heartbeat row — run id, host,
pid, and the *database's* clock time — every :func:`interval_s` seconds while the run executes
(:class:`Heartbeat`, started by the IO manager, the one resource every step of every job opens),
and deletes it when the run ends. A run whose row is older than :func:`timeout_s` has lost its
worker (``kill -9``, a crash, its machine gone): :func:`liveness` says so, and both the daemon's
run monitoring (``assets.shared.run_launcher``) and ``quandary rerun`` (``cli.runs``) use it.
Times are the database's own, so clocks that differ between machines do not matter.

``$QUANDARY_HEARTBEAT_S`` (default 10) and ``$QUANDARY_HEARTBEAT_TIMEOUT_S`` (default 6 beats)
set the two; a run is declared dead at most about ``timeout + the monitor's poll interval`` after
its worker stopped.
"""

from __future__ import annotations

import os
import socket
import threading
from dataclasses import dataclass

from sqlalchemy import Column, Float, Integer, String, Table, delete, insert, literal_column, select, update
from sqlalchemy.exc import IntegrityError

from storage.state_tables import METADATA, ensure_tables

HEARTBEAT_ENV, HEARTBEAT_TIMEOUT_ENV = "QUANDARY_HEARTBEAT_S", "QUANDARY_HEARTBEAT_TIMEOUT_S"

HEARTBEATS = Table(
    "quandary_run_heartbeats",
    METADATA,
    Column("run_id", String, primary_key=True),
    Column("host", String, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("beat_at", Float, nullable=False),  # seconds since the epoch, by the database's clock
)


def interval_s() -> float:
    return float(os.environ.get(HEARTBEAT_ENV) or 10.0)


def timeout_s() -> float:
    return float(os.environ.get(HEARTBEAT_TIMEOUT_ENV) or 6 * interval_s())


def _db_now(dialect: str):
    """The database's current time in epoch seconds, as a SQL expression."""
    if dialect == "postgresql":
        return literal_column("extract(epoch from clock_timestamp())")
    return literal_column("((julianday('now') - 2440587.5) * 86400.0)")  # SQLite (unit tests)


def beat(engine, run_id: str, host: str | None = None, pid: int | None = None) -> None:
    """Record that ``run_id``'s worker is alive now."""
    ensure_tables(engine, HEARTBEATS)
    values = {"host": host or socket.gethostname(), "pid": pid or os.getpid(), "beat_at": _db_now(engine.dialect.name)}
    with engine.begin() as con:
        if con.execute(update(HEARTBEATS).where(HEARTBEATS.c.run_id == run_id).values(**values)).rowcount:
            return
        try:
            with con.begin_nested():
                con.execute(insert(HEARTBEATS).values(run_id=run_id, **values))
        except IntegrityError:  # the same run's other beat got there first
            pass


def end(engine, run_id: str) -> None:
    """The run's worker stopped normally: forget its heartbeat."""
    ensure_tables(engine, HEARTBEATS)
    with engine.begin() as con:
        con.execute(delete(HEARTBEATS).where(HEARTBEATS.c.run_id == run_id))


@dataclass(frozen=True)
class Liveness:
    """``alive`` is None when the run has no heartbeat (it never wrote one: not started yet, started
    before heartbeats existed, or on one machine) — a caller then cannot tell and must not judge."""

    alive: bool | None
    host: str = ""
    pid: int = 0
    silent_s: float = 0.0

    def describe(self) -> str:
        return f"its worker ({self.host}, pid {self.pid}) sent no heartbeat for {self.silent_s:.0f} s"


def liveness(engine, run_id: str, timeout: float | None = None) -> Liveness:
    ensure_tables(engine, HEARTBEATS)
    now = _db_now(engine.dialect.name)
    with engine.connect() as con:
        row = (
            con.execute(
                select(HEARTBEATS.c.host, HEARTBEATS.c.pid, (now - HEARTBEATS.c.beat_at).label("silent")).where(
                    HEARTBEATS.c.run_id == run_id
                )
            )
            .mappings()
            .first()
        )
    if row is None:
        return Liveness(None)
    silent = float(row["silent"])
    return Liveness(silent <= (timeout_s() if timeout is None else timeout), row["host"], row["pid"], silent)


class Heartbeat:
    """A daemon thread that beats for one run until :meth:`stop` (which deletes the row). A failed
    beat (the database briefly unreachable) is retried at the next interval, never raised into
    the run."""

    def __init__(self, engine, run_id: str):
        self.engine, self.run_id = engine, run_id
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"quandary-heartbeat-{run_id[:8]}", daemon=True)

    def start(self) -> Heartbeat:
        beat(self.engine, self.run_id)  # the first one before any step runs (errors surface here)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(interval_s()):
            try:
                beat(self.engine, self.run_id)
            except Exception:  # noqa: BLE001 - next interval; a long outage shows as a dead run
                pass

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        try:
            end(self.engine, self.run_id)
        except Exception:  # noqa: BLE001 - the row then just ages out
            pass
