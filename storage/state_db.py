"""Quandary's own shared state on PostgreSQL in a distributed deployment (issue 21).

One machine keeps its state in local files (SQLite call log, ``versions.jsonl``); many machines
need one place every node sees. That place is a PostgreSQL database reached through SQLAlchemy
Core (installed with Dagster). The switch is the environment, never code:

* ``$QUANDARY_STATE_URL`` — a SQLAlchemy URL for Quandary's tables;
* else ``$QUANDARY_DAGSTER_PG_URL`` — the distributed Dagster instance's database, so one
  PostgreSQL serves both (Quandary's tables are prefixed ``quandary_`` and never touch Dagster's);
* else nothing: the one-machine default.

URLs must name the driver (``postgresql+psycopg2://``): SQLAlchemy 2.1 maps a bare
``postgresql://`` to psycopg 3, which is not installed; a bare scheme is rewritten to psycopg2 here
so that the same URL works for Dagster's storage and for ours.
"""

from __future__ import annotations

import os
import threading

STATE_URL_ENV = "QUANDARY_STATE_URL"
DAGSTER_PG_URL_ENV = "QUANDARY_DAGSTER_PG_URL"
TABLE_PREFIX = "quandary_"

_engines: dict[str, object] = {}
_lock = threading.Lock()


def state_url() -> str | None:
    """The shared-state database URL of this deployment, or None on one machine."""
    url = os.environ.get(STATE_URL_ENV) or os.environ.get(DAGSTER_PG_URL_ENV)
    if not url:
        return None
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        url = "postgresql+psycopg2://" + url.split("://", 1)[1]
    return url


def state_engine(url: str | None = None):
    """A process-wide SQLAlchemy engine for ``url`` (default :func:`state_url`), or None.

    Engines are cached per URL and per process (a forked child must not reuse its parent's
    sockets: the cache key includes the pid).
    """
    url = url or state_url()
    if url is None:
        return None
    key = f"{os.getpid()}:{url}"
    with _lock:
        engine = _engines.get(key)
        if engine is None:
            from sqlalchemy import create_engine  # lazy: sqlalchemy, only in distributed mode

            engine = create_engine(url, pool_pre_ping=True, future=True)
            _engines[key] = engine
        return engine
