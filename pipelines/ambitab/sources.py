"""Helpers every conversion shares: reading source files row by row, schema text, SQL segments.

* :func:`iter_json_rows` yields the rows of a JSON list or JSONL file; a line that does not parse
  or lacks required keys becomes a reject (with its raw text), never an exception.
* :func:`schema_text` is the visible ``db_schema``: CREATE TABLE plus 3 example rows per table
  ([I] like BIRD-Interact's ``*_schema.txt``), rendered by the seed catalog's own renderer.
* :func:`sql_segments` splits a reference query into its top-level clauses (WITH, SELECT,
  FROM/JOIN, WHERE, GROUP BY, HAVING, ORDER BY, LIMIT) with sqlglot — the oracle's "SQL segments".
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from pipelines.ambitab.build import BuildResult

SCHEMA_SAMPLE_ROWS = 3


class SourceMissing(Exception):
    """A source file the conversion needs is absent (message says which and what to do)."""


def require_file(path: Path, what: str) -> Path:
    if not path.is_file():
        raise SourceMissing(f"{what} not found at {path}; point --data at a folder that holds it "
                            "(the workplace's ../shared/data)")
    return path


def iter_json_rows(path: Path, build: BuildResult, required: tuple[str, ...],
                   id_key: str | None = None) -> Iterator[tuple[str, dict]]:
    """(source_id, row) for every good row; bad rows are recorded on ``build`` as rejects."""
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            items: list[Any] = json.loads(text)
        except json.JSONDecodeError as exc:
            build.reject(path.name, "parse", f"{path}: not valid JSON ({exc})", text[:500])
            return
        lines = [(i, item, None) for i, item in enumerate(items)]
    else:
        lines = []
        for i, line in enumerate(text.splitlines()):
            if not line.strip():
                continue
            try:
                lines.append((i, json.loads(line), None))
            except json.JSONDecodeError as exc:
                lines.append((i, None, (f"{path.name} line {i + 1}: not valid JSON ({exc.msg})", line)))
    for i, item, error in lines:
        if error is not None:
            build.reject(f"{path.name}:{i + 1}", "parse", *error)
            continue
        sid = f"{path.name}:{i + 1}"
        if isinstance(item, dict) and id_key and item.get(id_key) is not None:
            sid = str(item[id_key])
        if not isinstance(item, dict):
            build.reject(sid, "parse", f"{path.name} row {i + 1}: expected an object", item)
            continue
        missing = [k for k in required if k not in item]
        if missing:
            build.reject(sid, "parse", f"{path.name} row {i + 1}: missing key(s) {missing}", item)
            continue
        yield sid, item


@lru_cache(maxsize=512)
def _schema_text_cached(path: str, mtime: float) -> str:
    from pipelines.sqltools.schema_context import render_schema_context
    from resources.catalog import inspect_database

    return render_schema_context(inspect_database(path), sample_rows=SCHEMA_SAMPLE_ROWS)


def schema_text(db_path: str | Path) -> str:
    """CREATE TABLE + 3 example rows per table; raises BadDatabaseError for an unusable file."""
    p = Path(db_path)
    return _schema_text_cached(str(p.resolve()), p.stat().st_mtime if p.exists() else 0.0)


_CLAUSES = ("with_", "from_", "from", "joins", "where", "group", "having", "order", "limit", "offset")


def sql_segments(sql: str, dialect: str = "sqlite") -> list[str]:
    """Top-level clauses of ``sql``; the whole statement when it does not parse as one SELECT."""
    import sqlglot
    from sqlglot import exp

    log = logging.getLogger("sqlglot")
    level = log.level
    log.setLevel(logging.ERROR)  # DDL / procedural statements fall back with a warning: not news
    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except Exception:  # noqa: BLE001 - unparseable reference SQL: the oracle gets it whole
        return [" ".join(sql.split())]
    finally:
        log.setLevel(level)
    if not isinstance(tree, exp.Select):
        return [tree.sql(dialect=dialect)]
    segments = []
    with_ = tree.args.get("with_") or tree.args.get("with")  # the key differs across sqlglot versions
    if with_:
        segments.append(with_.sql(dialect=dialect))
    distinct = "DISTINCT " if tree.args.get("distinct") else ""
    segments.append("SELECT " + distinct + ", ".join(e.sql(dialect=dialect) for e in tree.expressions))
    for key in _CLAUSES[1:]:
        value = tree.args.get(key)
        if not value:
            continue
        for node in value if isinstance(value, list) else [value]:
            segments.append(node.sql(dialect=dialect))
    return segments
