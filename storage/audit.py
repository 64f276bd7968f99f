"""The audit catalog: one DuckDB connection where every artifact is a view named after its asset.

``open_audit()`` returns an in-memory DuckDB connection with

* one view per asset over the latest Parquet version of each of its partitions
  (``union_by_name`` so partitions written by different code versions still line up);
* ``llm_calls``: the council layer's call cache and log, read from its SQLite file.

It is rebuilt on every open, so it always shows the latest versions; nothing is copied.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import duckdb

from pipelines.paths import artifacts_dir, llm_calls_path
from storage.artifacts import latest_paths_by_asset


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _sql_list(paths: list[Path]) -> str:
    return "[" + ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths) + "]"


def _load_llm_calls(con: duckdb.DuckDBPyConnection, path: Path) -> bool:
    if not path.exists():
        return False
    import pyarrow as pa

    src = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        exists = src.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='llm_calls'"
        ).fetchall()
        if not exists:
            return False
        cur = src.execute("SELECT * FROM llm_calls")
        cols = [d[0] for d in cur.description]
        rows = cur.fetchall()
    finally:
        src.close()
    table = pa.table({c: [r[i] for r in rows] for i, c in enumerate(cols)}) if rows else None
    if table is None:
        con.execute("CREATE TABLE llm_calls AS SELECT * FROM (SELECT NULL::VARCHAR AS call_id) WHERE false")
    else:
        con.register("_llm_calls_arrow", table)
        con.execute("CREATE TABLE llm_calls AS SELECT * FROM _llm_calls_arrow")
        con.unregister("_llm_calls_arrow")
    return True


def open_audit(root: Path | None = None, llm_log: Path | None = None) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:")
    for asset, paths in latest_paths_by_asset(root or artifacts_dir()).items():
        con.execute(
            f"CREATE VIEW {_ident(asset)} AS SELECT * FROM read_parquet({_sql_list(paths)}, union_by_name = true)"
        )
    _load_llm_calls(con, llm_log or llm_calls_path())
    return con


def list_views(con: duckdb.DuckDBPyConnection) -> list[str]:
    rows = con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' ORDER BY 1"
    ).fetchall()
    return [r[0] for r in rows]
