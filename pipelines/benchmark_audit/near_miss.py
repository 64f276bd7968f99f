"""Why a gold returns nothing: an annotation error or a weak item.

A gold whose result is empty (or NULL only) is an annotation error when one of its constants, or
one of its join keys, misses the data by case, surrounding whitespace or a small misspelling: the
value it meant is there (``'timmothy'`` → ``'Timmothy'``, ``'Anthony'`` → ``'Anthony '``, a join
of ``'APG'`` with ``' APG'``). When every constant occurs as written and every join key matches,
the gold is taken as right and the item as *weak*: correct, but empty on this database, so it
cannot tell systems apart. Each near miss is backed by the probe that found it.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from sqlglot import exp

from resources.catalog import DatabaseInfo
from resources.sql import QueryResult, execute_sql
from storage.sqlnames import quote_ident

MISSPELLING_MIN_LENGTH = 5  # shorter words are too close to each other to call one a misspelling
MISSPELLING_CUTOFF = 0.85  # difflib ratio: 'timmothy' ~ 'timothy' 0.93, 'cat' ~ 'bat' never tried
DISTINCT_VALUES_READ = 5000  # a column's distinct values read for the misspelling search


@dataclass(frozen=True)
class NearMiss:
    where: str  # "students.first_name" or "airports.AirportCode = flights.DestAirport"
    written: str  # the gold's constant, or the join as written
    found: tuple[str, ...]  # the data's values that it nearly matches
    how: str  # "case", "whitespace", "case and whitespace", "misspelling"
    probe: str  # the SQL that found them
    literal: str | None = None  # the gold's literal (for a mechanical fix), None for a join


@dataclass(frozen=True)
class Diagnosis:
    misses: list[NearMiss]
    unchecked: list[str]  # comparisons that could not be checked (a probe failed, a column unresolved)


class _Undecided(Exception):
    """A probe failed or ran out of time: that part of the gold cannot be checked."""


def sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _scalar(db_path, sql: str, timeout_s: float):
    out = execute_sql(db_path, sql, timeout_s=timeout_s)
    if not isinstance(out, QueryResult) or not out.rows:
        raise _Undecided(sql)
    return out.rows[0][0]


def _values(db_path, sql: str, timeout_s: float) -> list:
    out = execute_sql(db_path, sql, timeout_s=timeout_s)
    if not isinstance(out, QueryResult):
        raise _Undecided(sql)
    return [r[0] for r in out.rows]


class Resolver:
    """Columns of a gold resolved to the tables they read (aliases, unqualified names)."""

    def __init__(self, tree: exp.Expression, schema: DatabaseInfo):
        self.schema = schema
        self.scopes: dict[int, dict[str, str]] = {}  # id(SELECT) -> alias or name -> table
        for t in tree.find_all(exp.Table):
            info = schema.table(t.name)
            if info is None:
                continue
            scope = self.scopes.setdefault(id(t.find_ancestor(exp.Select)), {})
            scope[t.name.lower()] = info.name
            if t.alias:
                scope[t.alias.lower()] = info.name
        self.tables = sorted({name for scope in self.scopes.values() for name in scope.values()})

    def _scopes_of(self, col: exp.Column):
        """The alias maps a column can see: its own SELECT's first, then the enclosing ones."""
        node = col.find_ancestor(exp.Select)
        while node is not None:
            if id(node) in self.scopes:
                yield self.scopes[id(node)]
            node = node.find_ancestor(exp.Select)

    def column(self, col: exp.Column) -> tuple[str, str] | None:
        """(table, column) as the schema spells them, or None when unknown or ambiguous."""
        for scope in self._scopes_of(col):
            if col.table:
                table = scope.get(col.table.lower())
                if table is None:
                    continue
                found = self.schema.table(table).column(col.name)
                return (table, found.name) if found else None
            owners = sorted({t for t in scope.values() if self.schema.table(t).column(col.name) is not None})
            if len(owners) == 1:
                return owners[0], self.schema.table(owners[0]).column(col.name).name
            if owners:
                return None  # ambiguous in its own scope
        return None

    def string_constant(self, node) -> str | None:
        """A string literal, or SQLite's double-quoted string (``city = "Anthony"``): a quoted
        identifier that names no column of the gold's tables."""
        if isinstance(node, exp.Literal) and node.is_string:
            return node.this
        if isinstance(node, exp.Column) and not node.table and node.this.args.get("quoted"):
            if not any(self.schema.table(t).column(node.name) for t in self.tables):
                return node.name
        return None


def _how(written: str, found: str) -> str:
    if written.lower() == found.lower():
        return "case"
    if written.strip() == found.strip():
        return "whitespace"
    if written.strip().lower() == found.strip().lower():
        return "case and whitespace"
    return "misspelling"


def _constant_near_miss(db_path, table: str, column: str, literal: str, like: bool, timeout_s: float):
    t, c = quote_ident(table), quote_ident(column)
    op = "LIKE" if like else "="
    exact = _scalar(db_path, f"SELECT COUNT(*) FROM {t} WHERE {c} {op} {sql_string(literal)}", timeout_s)
    if exact > 0:
        return None  # the constant occurs as written
    if like:
        # LIKE already ignores ASCII case; a value with surrounding spaces is the near miss left
        probe = (
            f"SELECT DISTINCT {c} FROM {t} WHERE TRIM({c}) LIKE TRIM({sql_string(literal)}) "
            f"AND {c} NOT LIKE {sql_string(literal)} LIMIT 3"
        )
    else:
        probe = (
            f"SELECT DISTINCT {c} FROM {t} WHERE LOWER(TRIM({c})) = LOWER(TRIM({sql_string(literal)})) "
            f"AND {c} != {sql_string(literal)} LIMIT 3"
        )
    found = _values(db_path, probe, timeout_s)
    if found:
        found = [str(v) for v in found]
        return NearMiss(f"{table}.{column}", literal, tuple(found), _how(literal, found[0]), probe, literal)
    if like or len(literal.strip()) < MISSPELLING_MIN_LENGTH:
        return None
    probe = f"SELECT DISTINCT {c} FROM {t} WHERE {c} IS NOT NULL LIMIT {DISTINCT_VALUES_READ}"
    values = [v for v in _values(db_path, probe, timeout_s) if isinstance(v, str)]
    lowered: dict[str, str] = {}
    for v in values:
        lowered.setdefault(v.strip().lower(), v)
    close = difflib.get_close_matches(literal.strip().lower(), list(lowered), n=3, cutoff=MISSPELLING_CUTOFF)
    if not close:
        return None
    return NearMiss(f"{table}.{column}", literal, tuple(lowered[v] for v in close), "misspelling", probe, literal)


def _join_near_miss(db_path, left: tuple[str, str], right: tuple[str, str], timeout_s: float):
    (lt, lc), (rt, rc) = left, right
    if lt == rt:
        return None  # a self-join: the key pairs rows of one table, whitespace cannot split it
    a, b = f"a.{quote_ident(lc)}", f"b.{quote_ident(rc)}"
    source = f"FROM {quote_ident(lt)} AS a JOIN {quote_ident(rt)} AS b"
    if _scalar(db_path, f"SELECT COUNT(*) {source} ON {a} = {b}", timeout_s) > 0:
        return None
    probe = f"SELECT {a}, {b} {source} ON LOWER(TRIM({a})) = LOWER(TRIM({b})) LIMIT 3"
    out = execute_sql(db_path, probe, timeout_s=timeout_s)
    if not isinstance(out, QueryResult):
        raise _Undecided(probe)
    if not out.rows:
        return None
    x, y = (str(v) for v in out.rows[0])
    shown = tuple(f"{x!r} = {y!r}" for x, y in ((str(p), str(q)) for p, q in out.rows))
    return NearMiss(f"{lt}.{lc} = {rt}.{rc}", f"{lt}.{lc} = {rt}.{rc}", shown, _how(x, y), probe)


def near_misses(db_path, tree: exp.Expression | None, schema: DatabaseInfo | None, timeout_s: float) -> Diagnosis:
    """Every constant of the gold's comparisons (``=``, ``IN``, ``LIKE``) that no row of its column
    holds as written but some row holds up to case, whitespace or a misspelling, and every
    equi-join whose keys meet only once trimmed and lower-cased; and what could not be checked
    (a failed probe, a column that names no single table), so that no one calls it clean."""
    if tree is None or schema is None or db_path is None:
        return Diagnosis([], ["the gold (unparsed or without its database)"])
    resolver = Resolver(tree, schema)
    found: list[NearMiss] = []
    unchecked: list[str] = []
    seen: set[tuple] = set()
    for node in tree.find_all(exp.EQ, exp.In, exp.Like):
        sides = [node.this, *(node.expressions if isinstance(node, exp.In) else [node.expression])]
        columns = [s for s in sides if isinstance(s, exp.Column) and resolver.string_constant(s) is None]
        constants = [v for s in sides if (v := resolver.string_constant(s)) is not None]
        if len(columns) == 1 and constants:
            where = resolver.column(columns[0])
            for literal in constants:
                key = (where, literal, isinstance(node, exp.Like))
                if key in seen:
                    continue
                seen.add(key)
                if where is None:
                    unchecked.append(f"{columns[0].sql(dialect='sqlite')} vs {literal!r} (column not resolved)")
                    continue
                try:
                    miss = _constant_near_miss(db_path, *where, literal, isinstance(node, exp.Like), timeout_s)
                except _Undecided:
                    unchecked.append(f"{where[0]}.{where[1]} vs {literal!r} (probe failed)")
                    continue
                if miss:
                    found.append(miss)
        elif isinstance(node, exp.EQ) and len(columns) == 2:
            left, right = (resolver.column(c) for c in columns)
            if not (left and right):
                unchecked.append(f"{node.sql(dialect='sqlite')} (column not resolved)")
                continue
            if (left, right) in seen:
                continue
            seen.add((left, right))
            try:
                miss = _join_near_miss(db_path, left, right, timeout_s)
            except _Undecided:
                unchecked.append(f"{node.sql(dialect='sqlite')} (probe failed)")
                continue
            if miss:
                found.append(miss)
    return Diagnosis(found, unchecked)


def describe(misses: list[NearMiss]) -> str:
    parts = []
    for m in misses:
        values = ", ".join(repr(v) for v in m.found) if m.literal is not None else "; ".join(m.found)
        if m.literal is not None:
            parts.append(f"{m.where}: the gold's {m.written!r} matches no row, the data has {values} ({m.how})")
        else:
            parts.append(f"the join {m.where} matches no row as written, only {m.how}-insensitively ({values})")
    return "; ".join(parts)


def mechanical_fix(sql: str, misses: list[NearMiss]) -> str | None:
    """The gold with each mistyped constant replaced by the one value the data holds, when every
    near miss is a constant with exactly one candidate; None otherwise (a join needs the reviewer)."""
    if not misses or any(m.literal is None or len(m.found) != 1 for m in misses):
        return None
    fixed = sql
    for m in misses:
        right = sql_string(m.found[0])
        for quote in ("'", '"'):
            escaped = m.literal.replace(quote, quote * 2)
            fixed = fixed.replace(f"{quote}{escaped}{quote}", right)
    return fixed if fixed != sql else None


def null_columns(db_path, tree: exp.Expression | None, schema: DatabaseInfo | None, timeout_s: float):
    """The outermost SELECT's projected columns (bare or under an aggregate) when every one of them
    is NULL in every row of its table, with the probes that show it; None when it is not so or
    cannot be said."""
    if not isinstance(tree, exp.Select) or schema is None:
        return None
    resolver = Resolver(tree, schema)
    shown = []
    for projection in tree.expressions:
        inner = projection.unalias()
        cols = [inner] if isinstance(inner, exp.Column) else list(inner.find_all(exp.Column))
        if len(cols) != 1:
            return None
        where = resolver.column(cols[0])
        if where is None:
            return None
        probe = f"SELECT COUNT(*), COUNT({quote_ident(where[1])}) FROM {quote_ident(where[0])}"
        out = execute_sql(db_path, probe, timeout_s=timeout_s)
        if not isinstance(out, QueryResult) or not out.rows or out.rows[0][1] != 0:
            return None
        shown.append((f"{where[0]}.{where[1]}", out.rows[0][0], probe))
    return shown or None


def aggregates_over_nothing(db_path, tree: exp.Expression | None, timeout_s: float) -> str | None:
    """For a gold whose every projection is an aggregate (no GROUP BY): the probe ``SELECT COUNT(*)``
    over its FROM / WHERE when that finds no row (SUM, AVG, MAX of nothing are NULL); else None."""
    if not isinstance(tree, exp.Select) or tree.args.get("group") or not tree.expressions:
        return None
    if not all(isinstance(p.unalias(), exp.AggFunc) for p in tree.expressions):
        return None
    probe = tree.copy()
    probe.set("expressions", [exp.Count(this=exp.Star())])
    for key in ("order", "limit", "offset", "having"):
        probe.set(key, None)
    sql = probe.sql(dialect="sqlite")
    return sql if _scalar(db_path, sql, timeout_s) == 0 else None
