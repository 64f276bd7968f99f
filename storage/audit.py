"""The audit catalog: one DuckDB connection where every artifact is a view named after its asset.

``open_audit()`` returns an in-memory DuckDB connection with

* one view per asset over the latest Parquet version of each of its partitions
  (``union_by_name`` so partitions written by different code versions still line up);
* ``llm_calls``: the council layer's call cache and log (the audit columns of
  :data:`storage.llm_log.AUDIT_COLUMNS`), read from its SQLite file or, in distributed mode, from
  the shared PostgreSQL table — copied into the in-memory catalog before the lockdown below.

It is rebuilt on every open, so it always shows the latest versions; nothing is copied.

Hardening (issue #13 items 3 and 9):

* a damaged Parquet file or call log is skipped with a one-line warning naming the file
  (``warn``, default: stderr); every other view still works;
* the connection is read-only over the catalog: file access is limited to the artifact files
  themselves (``allowed_paths``), external access is then disabled and the configuration locked,
  so SQL typed into ``audit sql`` can read no other file and write none; :func:`audit_query`
  accepts one SELECT statement only.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import duckdb
import polars as pl

from storage.faults import CORRUPT, storage_cause, storage_message
from storage.llm_log import AUDIT_COLUMNS, LEASE_COLUMNS, CallLogError, lost_calls_note, open_call_log
from storage.paths import llm_calls_path
from storage.sqlnames import quote_ident
from storage.state_db import state_url
from storage.stores import artifact_store

AUDIT_MEMORY_LIMIT = "1GB"


_ident = quote_ident


def _sql_list(paths: list) -> str:
    return "[" + ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths) + "]"


def _stderr_warning(message: str) -> None:
    print(f"warning: {' '.join(message.split())}", file=sys.stderr)


def _load_llm_calls(con: duckdb.DuckDBPyConnection, path: Path | None, warn=_stderr_warning) -> bool:
    """Copy the call log's calls into table ``llm_calls``: from ``path`` (a SQLite file), or from the
    deployment's log when ``path`` is None (PostgreSQL in distributed mode, else the local file)."""
    if path is None and state_url():
        loaded = _calls_from_database(warn)
    else:
        loaded = _calls_from_file(path or llm_calls_path(), warn)
    if loaded is None:
        return False
    cols, rows = loaded
    if not rows:
        nulls = ", ".join(f"NULL::VARCHAR AS {_ident(c)}" for c in cols or ["call_id"])
        con.execute(f"CREATE TABLE llm_calls AS SELECT * FROM (SELECT {nulls}) WHERE false")
        return True
    import pyarrow as pa  # lazy: pyarrow, only for the audit catalog; keeps `quandary` start-up light

    con.register("_llm_calls_arrow", pa.table({c: [r[i] for r in rows] for i, c in enumerate(cols)}))
    con.execute("CREATE TABLE llm_calls AS SELECT * FROM _llm_calls_arrow")
    con.unregister("_llm_calls_arrow")
    return True


def _calls_from_database(warn) -> tuple[list, list] | None:
    try:
        log = open_call_log()
        try:
            rows = log.rows()
        finally:
            log.close()
    except CallLogError as exc:
        warn(f"{exc}; the llm_calls view is left out")
        return None
    return list(AUDIT_COLUMNS), [tuple(r[c] for c in AUDIT_COLUMNS) for r in rows]


def _calls_from_file(path: Path, warn) -> tuple[list, list] | None:
    """The log's calls; a missing or empty log is an empty ``llm_calls`` view (never a vanished one),
    with a warning when it held calls before (#45 item 5)."""
    empty = (list(AUDIT_COLUMNS), [])
    if not path.exists() or path.stat().st_size == 0:
        if (note := lost_calls_note(path, 0)) is not None:
            warn(f"{note}; the llm_calls view is empty")
        return empty
    try:
        src = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            exists = src.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='llm_calls'").fetchall()
            if not exists:
                if (note := lost_calls_note(path, 0)) is not None:
                    warn(f"{note}; the llm_calls view is empty")
                return empty
            have = [r[1] for r in src.execute("PRAGMA table_info(llm_calls)")]
            cols = [c for c in have if c not in LEASE_COLUMNS]  # claims' bookkeeping is not audit
            # in_flight rows are claims of calls being sent right now, not calls
            cur = src.execute(
                f"SELECT {', '.join(cols)} FROM llm_calls"
                + (" WHERE status != 'in_flight'" if "status" in have else "")
            )
            rows = cur.fetchall()
        finally:
            src.close()
    except (sqlite3.Error, OSError) as exc:
        if storage_cause(exc, path) == CORRUPT:
            warn(
                f"call log {path} is damaged ({exc}); the llm_calls view is left out "
                "(move the file away to start a new log)"
            )
        else:  # unreadable for another cause (permissions, I/O): not damage, keep the file
            warn(f"{storage_message(exc, path, 'call log')}; the llm_calls view is left out")
        return None
    if not rows and (note := lost_calls_note(path, 0)) is not None:
        warn(f"{note}; the llm_calls view is empty")
    return cols, rows


def _create_view(con, asset: str, paths: list[Path], warn) -> list[Path]:
    """Create the asset's view over the readable files; warn about (and leave out) the others."""
    sql = "CREATE VIEW {} AS SELECT * FROM read_parquet({}, union_by_name = true)"
    try:
        con.execute(sql.format(_ident(asset), _sql_list(paths)))
        return paths
    except duckdb.Error:
        pass
    good = []
    for p in paths:
        try:
            con.execute(f"SELECT * FROM read_parquet({_sql_list([p])}) LIMIT 0").fetchall()
            good.append(p)
        except duckdb.Error as exc:
            warn(f"artifact {p} is unreadable ({str(exc).splitlines()[0]}); left out of view {asset}")
    if good:
        con.execute(sql.format(_ident(asset), _sql_list(good)))
    return good


def open_audit(
    root: Path | None = None, llm_log: Path | None = None, *, warn=_stderr_warning, read_only: bool = True
) -> duckdb.DuckDBPyConnection:
    """``root``: a local artifact folder; default: the deployment's store (``$QUANDARY_ARTIFACTS_URL``,
    a bucket read through its registered fsspec filesystem, else ``$QUANDARY_HOME/artifacts``).
    ``llm_log``: a call log file; default: the deployment's call log (PostgreSQL in distributed mode)."""
    con = duckdb.connect(":memory:", config={"memory_limit": AUDIT_MEMORY_LIMIT})
    store = artifact_store(root)
    store.register_duckdb(con)  # before the lockdown below: an object store's filesystem
    allowed: list = []
    for asset, paths in store.latest_locations_by_asset(on_damaged=warn).items():
        allowed += _create_view(con, asset, paths, warn)
    _load_llm_calls(con, llm_log, warn)
    if read_only:
        # Views re-read their files on every query: allow exactly those, nothing else, for good.
        con.execute(f"SET allowed_paths = {_sql_list(allowed)}")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    return con


class AuditQueryError(ValueError):
    """The audit SQL is not a single read-only query."""


def audit_query(con: duckdb.DuckDBPyConnection, sql: str):
    """Run one SELECT over the catalog (anything else is refused); returns the cursor."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise AuditQueryError(f"cannot parse: {' '.join(str(exc).split())}") from None
    if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
        kinds = ", ".join(s.type.name for s in statements) or "nothing"
        raise AuditQueryError(f"audit sql runs one read-only SELECT; got {kinds}")
    return con.execute(sql)


def list_views(con: duckdb.DuckDBPyConnection) -> list[str]:
    rows = con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' ORDER BY 1"
    ).fetchall()
    return [r[0] for r in rows]


def query_frame(con, query: str, params=None):
    """A query result as a polars frame (DuckDB 2.0: ``.arrow()`` is a RecordBatchReader, and Arrow
    from a DB-API ``execute`` result warns about an extra copy)."""

    return pl.from_arrow(con.sql(query, params=params or None).to_arrow_table())
