"""The prompt's schema context (ABISS §4.1): each table's DDL followed by up to five sample rows,
fitted to a model's context window.

Why here: what a text-to-SQL prompt shows of a database is a method decision shared by every job
(ABISS generation and validation, the interaction benchmark, AmbiTab's corpora, the CLI's ``db
show``), while reading the database is infrastructure (:mod:`resources.catalog`). This module turns
a :class:`~resources.catalog.DatabaseInfo` into text and never opens a file.

* :func:`render_schema_context` — the full context; database text is escaped so no value can close
  the sample-rows comment and smuggle text into the prompt.
* :func:`fit_schema_context` — the richest context under a token budget (what was left out is named).
* :func:`focused_fitter` — per question, fitted around the tables its SQL reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp

from resources.catalog import SAMPLE_ROWS, DatabaseInfo, TableInfo, quote_ident


def _escape_comment(text: str) -> str:
    """Database text goes inside ``/* ... */``: it must not be able to close (or nest) the comment."""
    return text.replace("*/", "* /").replace("/*", "/ *")


def _cell(value, width: int = 80) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    text = _escape_comment(" ".join(str(value).split()))
    return text if len(text) <= width else text[: max(1, width - 3)] + "..."


def render_schema_context(
    info: DatabaseInfo,
    sample_rows: int = SAMPLE_ROWS,
    value_width: int = 80,
    tables: list[TableInfo] | None = None,
    max_columns: int | None = None,
) -> str:
    """The prompt's schema context: each table's DDL followed by up to five sample rows.

    Values are whitespace-folded, truncated to ``value_width`` and escaped so that no database
    value can close the sample-rows comment and smuggle text into the prompt."""
    parts = []
    for t in tables if tables is not None else info.tables:
        ddl = t.ddl.rstrip(";") + ";"
        if max_columns is not None and len(t.columns) > max_columns:
            kept = ", ".join(f"{quote_ident(c.name)} {c.type}".strip() for c in t.columns[:max_columns])
            ddl = (
                f"CREATE TABLE {quote_ident(t.name)} ({kept}); "
                f"/* {len(t.columns) - max_columns} more columns left out for the context window */"
            )
        block = [ddl]
        rows = t.sample_rows[:sample_rows]
        name = _escape_comment(t.name)
        if rows:
            cols = t.sample_columns if max_columns is None else t.sample_columns[:max_columns]
            block.append(f"/* {len(rows)} sample rows from {name}:")
            block.append(" | ".join(_escape_comment(c) for c in cols))
            block.extend(" | ".join(_cell(v, value_width) for v in r[: len(cols)]) for r in rows)
            block.append("*/")
        elif sample_rows > 0:
            block.append(f"/* {name} has no rows */")
        parts.append("\n".join(block))
    return "\n\n".join(parts)


def approx_tokens(text: str) -> int:
    """A conservative token estimate for schema text (about 3 characters per token)."""
    return max(1, (len(text) + 2) // 3)


@dataclass
class FittedContext:
    """A schema context fitted to a token budget, and what was left out to fit."""

    text: str
    budget_tokens: int
    sample_rows: int
    value_width: int
    omitted_tables: list[str] = field(default_factory=list)
    max_columns: int | None = None

    @property
    def complete(self) -> bool:
        return (
            not self.omitted_tables
            and self.sample_rows == SAMPLE_ROWS
            and self.value_width == 80
            and self.max_columns is None
        )

    def omitted(self) -> dict:
        return {
            "omitted_tables": self.omitted_tables,
            "sample_rows": self.sample_rows,
            "value_width": self.value_width,
            "max_columns": self.max_columns,
            "budget_tokens": self.budget_tokens,
        }


def _table_rank(info: DatabaseInfo, focus: set[str]) -> list[TableInfo]:
    """Tables most worth keeping first: asked-about ones, then the most connected, then the largest."""
    degree: dict[str, int] = {t.name.lower(): 0 for t in info.tables}
    for t in info.tables:
        for fk in t.foreign_keys:
            degree[t.name.lower()] = degree.get(t.name.lower(), 0) + 1
            degree[fk.ref_table.lower()] = degree.get(fk.ref_table.lower(), 0) + 1
    return sorted(
        info.tables, key=lambda t: (t.name.lower() not in focus, -degree.get(t.name.lower(), 0), -t.row_count, t.name)
    )


def fit_schema_context(info: DatabaseInfo, budget_tokens: int, focus_tables=()) -> FittedContext:
    """The richest schema context that fits ``budget_tokens``.

    Degrades in the order a text-to-SQL prompt loses least: shorter sample values, fewer sample
    rows, then whole tables (least connected and smallest first, never ``focus_tables``), then
    columns of very wide tables. The tables left out are named in a closing comment."""

    def fits(text: str) -> bool:
        return approx_tokens(text) <= budget_tokens

    for rows, width in ((SAMPLE_ROWS, 80), (SAMPLE_ROWS, 40), (3, 40), (2, 24), (1, 24), (0, 24)):
        text = render_schema_context(info, rows, width)
        if fits(text):
            return FittedContext(text, budget_tokens, rows, width)
    focus = {f.lower() for f in focus_tables}
    ranked = _table_rank(info, focus)
    note_reserve = 900  # characters kept for the closing "tables left out" comment (20 names at most)
    for max_columns in (None, 64, 24, 8):
        kept: list[TableInfo] = []
        used = note_reserve
        for t in ranked:  # one render per table: linear in the number of tables
            size = len(render_schema_context(info, 0, 24, [t], max_columns)) + 2
            if (used + size + 2) // 3 <= budget_tokens:
                kept.append(t)
                used += size
        if kept:
            order = [t for t in info.tables if t in kept]  # the database's own order reads best
            omitted = [t.name for t in info.tables if t not in kept]
            text = render_schema_context(info, 0, 24, order, max_columns) + _omitted_note(info, order)
            return FittedContext(text, budget_tokens, 0, 24, omitted, max_columns)
    first = ranked[0]
    text = render_schema_context(info, 0, 24, [first], 8)[: budget_tokens * 3]
    return FittedContext(text, budget_tokens, 0, 24, [t.name for t in info.tables if t is not first], 8)


def tables_in_sql(sql: str | None) -> list[str]:
    """Table names a query reads (empty when it does not parse)."""
    if not sql:
        return []
    try:
        return sorted({t.name for t in sqlglot.parse_one(sql).find_all(exp.Table) if t.name})
    except Exception:  # noqa: BLE001 - unparseable SQL just gets no focus
        return []


def focused_fitter(info: DatabaseInfo, budget_tokens: int):
    """``row -> schema context`` fitted around the tables the row's SQL uses (memoised per table set)."""
    cache: dict[tuple, str] = {}

    def fit(row: dict) -> str:
        focus = tuple(tables_in_sql(row.get("sql")))
        if focus not in cache:
            cache[focus] = fit_schema_context(info, budget_tokens, focus).text
        return cache[focus]

    return fit


def _omitted_note(info: DatabaseInfo, kept: list[TableInfo]) -> str:
    left = [t.name for t in info.tables if t not in kept]
    if not left:
        return ""
    names = ", ".join(_escape_comment(n) for n in left[:20]) + (
        f", ... ({len(left) - 20} more)" if len(left) > 20 else ""
    )
    return f"\n\n/* {len(left)} more tables left out for the context window: {names} */"
