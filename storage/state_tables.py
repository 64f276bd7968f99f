"""Quandary's own tables in the shared-state database (:mod:`storage.state_db`), created on first use.

Each table lives with the module that owns it (artifact history: :mod:`storage.versions_db`, seed
catalog: :mod:`resources.catalog`, run heartbeats: :mod:`storage.heartbeats`) on the one
:data:`METADATA` here; :func:`ensure_tables` creates the missing ones once per engine and process.

Nodes that start at the same moment would race ``CREATE TABLE`` (PostgreSQL can fail a concurrent
``IF NOT EXISTS`` on its catalog's unique index), so on PostgreSQL the creation runs under a
transaction-scoped advisory lock: PostgreSQL's own lock, released at commit.
"""

from __future__ import annotations

import threading
import zlib

from sqlalchemy import MetaData, text

METADATA = MetaData()
_created: set[tuple[int, str]] = set()
_lock = threading.Lock()
_SCHEMA_LOCK = zlib.crc32(b"quandary_state_schema")


def ensure_tables(engine, *tables) -> None:
    """Create ``tables`` in ``engine``'s database if they are missing (once per process)."""
    key = (id(engine), ",".join(sorted(t.name for t in tables)))
    if key in _created:
        return
    with _lock:
        if key in _created:
            return
        with engine.begin() as con:
            if con.dialect.name == "postgresql":
                con.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _SCHEMA_LOCK})
            METADATA.create_all(con, tables=list(tables), checkfirst=True)
        _created.add(key)
