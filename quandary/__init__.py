"""Quandary from Python: results straight into a notebook (#24 item 6).

    from quandary import load, sql, assets

    df = load("dataset", db="superhero")        # the latest version, as a polars DataFrame
    every_db = load("dataset")                  # every database's latest version, concatenated
    assets()                                    # what is stored: ["candidates", "dataset", ...]
    sql("SELECT subcategory, count(*) FROM dataset GROUP BY 1")   # the audit catalog (read-only)

Everything is read from the artifact store the CLI and the Dagster UI write to: ``$QUANDARY_HOME``
(default ``<project>/.quandary``), or the bucket of ``$QUANDARY_ARTIFACTS_URL`` in a distributed
deployment; nothing here starts a run or changes a file.
"""

import warnings

import polars as pl

from storage.audit import audit_query, open_audit
from storage.stores import artifact_store, latest_partitions

__all__ = ["assets", "load", "sql"]


def assets() -> list[str]:
    """The stored tables (one per asset that has a materialized version)."""

    return sorted(artifact_store().latest_locations_by_asset())


def load(asset: str, db: str | None = None) -> pl.DataFrame:
    """The latest version of ``asset`` for database (partition) ``db``; without ``db``, the latest
    version of every partition, concatenated. Raises ``LookupError`` naming what is stored."""

    store = artifact_store()
    if db is not None:
        try:
            return store.read_latest(asset, db)
        except FileNotFoundError:
            parts = latest_partitions(store, asset)
        raise LookupError(
            f"no {asset} stored for {db!r}"
            + (f"; stored for: {', '.join(parts)}" if parts else f"; stored tables: {', '.join(assets()) or 'none'}")
        )
    parts = latest_partitions(store, asset)
    if not parts:
        raise LookupError(f"no {asset} stored; stored tables: {', '.join(assets()) or 'none yet'}")
    return pl.concat([store.read_latest(asset, p) for p in parts], how="diagonal_relaxed")


def sql(query: str) -> pl.DataFrame:
    """One read-only SELECT over the audit catalog (a view per asset, plus ``llm_calls``)."""

    con = open_audit()
    try:
        cur = audit_query(con, query)  # refuses anything but one SELECT
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "an extra copy": these are query results, not tables
            return pl.from_arrow(cur.to_arrow_table())
    finally:
        con.close()
