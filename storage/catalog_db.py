"""The seed catalog's rows in the shared-state database (issue 21 item 5): in distributed mode every
node sees the same registrations (``db_id -> path, engine, sha256``), where one machine keeps them in
``$QUANDARY_HOME/catalog.json`` (:class:`resources.catalog.Catalog`).

Read-modify-write of the registry runs in one transaction; on PostgreSQL a transaction-scoped
advisory lock serializes concurrent registrations (the local catalog's ``flock``, across machines).
"""

from __future__ import annotations

import zlib

from sqlalchemy import Column, String, Table, delete, insert, select, text

from storage.state_tables import METADATA, ensure_tables

CATALOG = Table(
    "quandary_seed_catalog",
    METADATA,
    Column("db_id", String, primary_key=True),
    Column("path", String, nullable=False),
    Column("engine", String, nullable=False),
    Column("sha256", String, nullable=False),
)
_FIELDS = tuple(CATALOG.c.keys())
_LOCK = zlib.crc32(b"quandary_seed_catalog")


def _load(con) -> dict[str, dict]:
    return {r["db_id"]: dict(r) for r in con.execute(select(CATALOG)).mappings()}


def load(engine) -> dict[str, dict]:
    ensure_tables(engine, CATALOG)
    with engine.connect() as con:
        return _load(con)


def update(engine, change) -> None:
    """Apply ``change(data)`` (a dict ``db_id -> entry``, edited in place) in one transaction."""
    ensure_tables(engine, CATALOG)
    with engine.begin() as con:
        if con.dialect.name == "postgresql":
            con.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK})
        before = _load(con)
        data = {k: dict(v) for k, v in before.items()}
        change(data)
        gone = [k for k in before if k not in data or data[k] != before[k]]
        if gone:
            con.execute(delete(CATALOG).where(CATALOG.c.db_id.in_(gone)))
        new = [{f: data[k][f] for f in _FIELDS} for k in data if before.get(k) != data[k]]
        if new:
            con.execute(insert(CATALOG), new)
