"""The artifact version history in the shared-state database (issue 21 item 2): one row per version.

In distributed mode (:func:`storage.state_db.state_engine` set) the object store records its history
here instead of as ``versions/<seq>-<hash>.json`` objects in the bucket. The row insert *is* the
claim of the version number: ``(store, asset, partition, seq)`` is unique, so of two writers that
read the same newest ``seq`` one inserts ``seq + 1`` and the other gets an integrity error, re-reads
and takes the next number (or finds its content is already the newest version: one hash, one
version). ``store`` is the bucket's URL, so several stores can share one database.
"""

from __future__ import annotations

import random
import time

from sqlalchemy import BigInteger, Column, Float, Integer, String, Table, and_, insert, select
from sqlalchemy.exc import IntegrityError, OperationalError

from storage.state_tables import METADATA, ensure_tables

CLAIM_ATTEMPTS = 200


class VersionConflict(Exception):
    """The newest version is no longer the one a keyed merge was based on (another writer won)."""


VERSIONS = Table(
    "quandary_artifact_versions",
    METADATA,
    Column("store", String, primary_key=True),
    Column("asset", String, primary_key=True),
    Column("partition", String, primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("hash", String, nullable=False),
    Column("file", String, nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("rows", BigInteger),
    Column("at", Float, nullable=False),
    Column("run_id", String),
)
_FIELDS = ("seq", "hash", "file", "size", "rows", "at", "run_id")


def _where(store: str, asset: str, partition: str):
    return and_(VERSIONS.c.store == store, VERSIONS.c.asset == asset, VERSIONS.c.partition == partition)


def _newest(con, store: str, asset: str, partition: str) -> dict | None:
    row = (
        con.execute(
            select(*(VERSIONS.c[f] for f in _FIELDS))
            .where(_where(store, asset, partition))
            .order_by(VERSIONS.c.seq.desc())
            .limit(1)
        )
        .mappings()
        .first()
    )
    return dict(row) if row is not None else None


def claim_version(
    engine,
    store: str,
    asset: str,
    partition: str,
    entry: dict,
    *,
    previous: dict | None = None,
    run_id: str | None = None,
    expect_seq: int | None = None,
) -> tuple[dict, bool]:
    """Record ``entry`` (file, hash, size, rows) as the next version of ``asset[partition]``.

    Returns ``(version, created)``: the row with its ``seq``, and False when the newest version
    already has this hash (nothing inserted). ``previous``: the store's own latest pointer; when it is
    ahead of the table (a bucket written before the table existed, or by a node without it) it counts
    as the newest version, so numbering never goes back and its content is not recorded twice.
    ``expect_seq``: a keyed merge's base; :class:`VersionConflict` when the newest version is another."""
    ensure_tables(engine, VERSIONS)
    for attempt in range(CLAIM_ATTEMPTS):
        try:
            with engine.begin() as con:
                known = [v for v in (_newest(con, store, asset, partition), previous) if v is not None]
                newest = max(known, key=lambda v: v["seq"], default=None)
                if expect_seq is not None and (newest["seq"] if newest else 0) != expect_seq:
                    raise VersionConflict(f"{asset}[{partition}] moved past version {expect_seq}")
                if newest is not None and newest["hash"] == entry["hash"]:
                    return newest, False
                seq = (newest["seq"] if newest else 0) + 1
                row = {
                    "seq": seq,
                    "hash": entry["hash"],
                    "file": entry["file"],
                    "size": entry["size"],
                    "rows": entry.get("rows"),
                    "at": time.time(),
                    "run_id": run_id,
                }
                con.execute(insert(VERSIONS).values(store=store, asset=asset, partition=partition, **row))
            return row, True
        except (IntegrityError, OperationalError):
            # another writer took this seq (or SQLite was busy): re-read the newest and try the next
            time.sleep(random.uniform(0, min(0.05, 0.002 * (attempt + 1))))
    raise TimeoutError(f"could not record a version of {asset}[{partition}] in {store}: too many concurrent writers")


def newest_version(engine, store: str, asset: str, partition: str) -> dict | None:
    """The newest recorded version, or None."""
    ensure_tables(engine, VERSIONS)
    with engine.connect() as con:
        return _newest(con, store, asset, partition)


def history(engine, store: str, asset: str, partition: str) -> list[dict]:
    """Every recorded version, oldest first."""
    ensure_tables(engine, VERSIONS)
    with engine.connect() as con:
        rows = (
            con.execute(
                select(*(VERSIONS.c[f] for f in _FIELDS))
                .where(_where(store, asset, partition))
                .order_by(VERSIONS.c.seq)
            )
            .mappings()
            .all()
        )
    return [dict(r) for r in rows]
