"""Helpers every conversion shares: reading source files row by row, schema text, SQL segments.

* :func:`iter_json_rows` yields the rows of a JSON list or JSONL file. A file that does not parse
  whole (empty, truncated, corrupt: a JSON array that does not parse, a JSONL line that is not
  JSON) raises :class:`SourceCorrupt` naming the file and the line and byte where it broke: a
  build from part of a file must never pass green. A row that parses but lacks required keys is a
  per-row reject (with its raw text). :func:`read_json` / :func:`read_jsonl` read whole side files
  (schemas, synonym maps, knowledge bases) with the same strictness.
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

import sqlglot
from sqlglot import exp

from pipelines.ambitab.build import BuildResult
from pipelines.sqltools.schema_context import render_schema_context
from resources.catalog import inspect_database

SCHEMA_SAMPLE_ROWS = 3


class SourceError(Exception):
    """A source the conversion needs is missing or unusable (the message says which and what to do)."""


class SourceMissing(SourceError):
    """A source file the conversion needs is absent (message says which and what to do)."""


class SourceCorrupt(SourceError):
    """A source file does not parse whole (empty, truncated or damaged); the message names the file
    and the line and byte where it broke."""


_RESTORE = "the file looks truncated or damaged; restore it from the source release"


def _decode(path: Path) -> str:
    data = path.read_bytes()
    if not data.strip():
        raise SourceCorrupt(f"{path}: empty file ({len(data)} bytes); {_RESTORE}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SourceCorrupt(f"{path}: not UTF-8 at line {line}, byte {exc.start} of {len(data)}; {_RESTORE}") from None


def _byte_offset(text: str, pos: int) -> int:
    return len(text[:pos].encode("utf-8"))


def read_json(path: Path, what: str | None = None):
    """The whole JSON document in ``path``; :class:`SourceCorrupt` if it is empty or does not parse."""
    text = _decode(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        size = len(text.encode("utf-8"))
        raise SourceCorrupt(
            f"{path}{f' ({what})' if what else ''}: not valid JSON at line {exc.lineno}, column "
            f"{exc.colno} (byte {_byte_offset(text, exc.pos)} of {size}): {exc.msg}; {_RESTORE}"
        ) from None


def read_jsonl(path: Path) -> list[tuple[int, Any]]:
    """(line number, value) of every non-blank line; :class:`SourceCorrupt` at the first line that
    is not JSON (a truncated file breaks on its last line)."""
    text = _decode(path)
    out, offset = [], 0
    for i, line in enumerate(text.splitlines(keepends=True)):
        if line.strip():
            try:
                out.append((i + 1, json.loads(line)))
            except json.JSONDecodeError as exc:
                size = len(text.encode("utf-8"))
                raise SourceCorrupt(
                    f"{path}: line {i + 1} is not valid JSON (byte {offset + _byte_offset(line, exc.pos)}"
                    f" of {size}: {exc.msg}); {_RESTORE}"
                ) from None
        offset += len(line.encode("utf-8"))
    return out


def require_file(path: Path, what: str) -> Path:
    if not path.is_file():
        raise SourceMissing(
            f"{what} not found at {path}; point --data at a folder that holds it (the workplace's ../shared/data)"
        )
    return path


MALFORMED = "malformed"  # the reject stage of a row that cannot be read as its format promises


def iter_json_rows(
    path: Path, build: BuildResult, required: tuple[str, ...], id_key: str | None = None
) -> Iterator[tuple[str, dict]]:
    """(source_id, row) for every good row. A row that is not an object, lacks a required key or
    repeats another row's id (or, without ``id_key``, repeats a whole row) is recorded on ``build`` as a :data:`MALFORMED` reject naming the file
    and line, which fails the build unless the user allows it (issue 34 item 9:
    :func:`check_build`). A file that does not parse whole raises :class:`SourceCorrupt` before any row."""
    if _decode(path).lstrip().startswith("["):
        items = read_json(path)
        lines = [(i, item, "item") for i, item in enumerate(items)]
    else:
        lines = [(n - 1, item, "line") for n, item in read_jsonl(path)]
    seen: dict[str, int] = {}
    for i, item, unit in lines:
        sid = f"{path.name}:{i + 1}"
        where = f"{path} {unit} {i + 1}"
        if isinstance(item, dict) and id_key and item.get(id_key) is not None:
            sid = str(item[id_key])
        if not isinstance(item, dict):
            build.reject(sid, MALFORMED, f"{where}: expected an object", item)
            continue
        missing = [k for k in required if k not in item]
        if missing:
            build.reject(sid, MALFORMED, f"{where}: missing key(s) {missing}", item)
            continue
        # a source without ids repeats a record when a whole row repeats (a copy-paste would
        # otherwise build a second record silently, or fail later with a misleading message)
        key = sid if id_key else json.dumps(item, sort_keys=True, ensure_ascii=False)
        if key in seen:
            what = f"duplicate {id_key} {sid!r}" if id_key else "the same row as"
            build.reject(
                sid,
                MALFORMED,
                f"{where}: {what} {'(also ' if id_key else ''}{unit} {seen[key]}{')' if id_key else ''}",
                item,
            )
            continue
        seen[key] = i + 1
        yield sid, item


@lru_cache(maxsize=512)
def _schema_text_cached(path: str, mtime: float) -> str:
    return render_schema_context(inspect_database(path), sample_rows=SCHEMA_SAMPLE_ROWS)


def schema_text(db_path: str | Path) -> str:
    """CREATE TABLE + 3 example rows per table; raises BadDatabaseError for an unusable file."""
    p = Path(db_path)
    return _schema_text_cached(str(p.resolve()), p.stat().st_mtime if p.exists() else 0.0)


_CLAUSES = ("with_", "from_", "from", "joins", "where", "group", "having", "order", "limit", "offset")


def sql_segments(sql: str, dialect: str = "sqlite") -> list[str]:
    """Top-level clauses of ``sql``; the whole statement when it does not parse as one SELECT."""

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
