"""Schema and data analysis for the programmatic generator.

:func:`analyze` inspects a database (through :mod:`resources.catalog`) and profiles its data
(through the safe executor :func:`resources.sql.execute_sql`, one sample query and one
statistics query per table) into a :class:`SchemaAnalysis`:

* **column roles** — ``identifier`` (primary/foreign keys, ``*_id`` columns), ``numeric``,
  ``temporal`` (DATE/DATETIME types or ISO-date values), ``categorical`` (text with few distinct,
  repeating values; its values are kept, most frequent first), ``text`` (free text, names) and
  ``other`` (empty or binary). Numeric columns with few values also carry ``values``.
* **label column** of every table (a name/title-like text column) used to show rows.
* **foreign-key join graph** — validated edges (case-insensitive), shortest join paths,
  *relational* paths (see :meth:`SchemaAnalysis.related`), connected components, and
  **bridge tables** (many-to-many: a table with foreign keys to two different tables).
* **lexical groups** — columns of one table sharing a head noun (``personal_email`` /
  ``institutional_email``), and **same-named columns** in two joinable tables (two
  ``enrollment_date``).

Everything is ordered deterministically (schema order, then names); no set iteration leaks
into the output.
"""

from __future__ import annotations

import csv
import datetime as _dt
import decimal
import re
from collections import Counter, deque
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from pipelines.abiss.programmatic.entity_kinds import MEASURE_WORDS
from pipelines.abiss.programmatic.phrasing import (
    TableName,
    column_words,
    head_noun,
    humanize,
    identifier_words,
    relationship_noun,
)
from resources.catalog import DatabaseInfo, inspect_database
from resources.sql import execute_sql
from storage.sqlnames import quote_ident

SAMPLE_LIMIT = 2000  # rows per table used for roles and thresholds
CATEGORICAL_MAX_DISTINCT = 25
PROFILE_TIMEOUT_S = 5.0

IDENTIFIER = "identifier"
NUMERIC = "numeric"
TEMPORAL = "temporal"
CATEGORICAL = "categorical"
TEXT = "text"
OTHER = "other"

_NUMERIC_TYPES = ("INT", "REAL", "FLOA", "DOUB", "DEC", "NUM", "BIGINT", "SMALLINT", "TINYINT", "HUGEINT")
_TEMPORAL_TYPES = ("DATE", "TIME")
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?$")
_LABEL_WORDS = ("name", "title", "label")
_NUMBER_TEXT = re.compile(r"^-?\d{1,15}(\.\d+)?$")


def sql_literal(value) -> str:
    """A SQL literal for a data value taken from the database itself."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (_dt.datetime, _dt.date)):
        return (
            "'" + value.isoformat(sep=" ") + "'" if isinstance(value, _dt.datetime) else "'" + value.isoformat() + "'"
        )
    return "'" + str(value).replace("'", "''") + "'"


_TIME_OR_NUMBER = re.compile(r"^[\d:.,\-+ ]+$")


def _typical(values: list, counts: Counter) -> list:
    """Values of the column's dominant shape: in a column of lap times or numbers, 'Cancelled' or
    'N/A' is a placeholder, not a value a question can use ("fastest qualifying is 'Cancelled'")."""

    def shape(v) -> str:
        return "num" if _is_number(v) or (isinstance(v, str) and _TIME_OR_NUMBER.match(v.strip())) else "text"

    rows = sum(counts.values()) or 1
    numeric = sum(n for v, n in counts.items() if shape(v) == "num")
    if numeric >= 0.7 * rows and numeric < rows:
        return [v for v in values if shape(v) == "num"]
    return values


# Words a column holds in place of a value: "the race won by 'Cancelled'", "weather whose events
# are ''" (issue #41 item 4). Never a category value, a filter value or an example.
PLACEHOLDERS = frozenset(
    """n/a na none null nil unknown tbd tba - -- --- ? ?? cancelled canceled postponed abandoned void vacant
not available not applicable not known missing blank empty undefined unspecified no data""".split("\n")[0].split()
    + ["not available", "not applicable", "not known", "no data", "to be announced", "to be determined"]
)


def is_placeholder(v) -> bool:
    """An empty value or a placeholder word standing for no value."""
    if v is None:
        return True
    if isinstance(v, str):
        t = " ".join(v.split()).lower()
        return not t or t in PLACEHOLDERS or t.strip(".") in PLACEHOLDERS
    return False


def _name_like(v) -> bool:
    return isinstance(v, str) and len(v.split()) >= 2 and all(w[:1].isupper() for w in v.split() if w[:1].isalpha())


def _of_its_kind(values: list, counts: Counter) -> list:
    """Values of the kind most of the column holds: no placeholder, and in a column of names
    ("Ann Hale", "Bo Diaz") no lone word of another kind ('Cancelled', 'Retired')."""
    kept = [v for v in values if not is_placeholder(v)]
    numbers = [v for v in kept if _is_number(v) or (isinstance(v, str) and _TIME_OR_NUMBER.match(v.strip()))]
    others = [v for v in kept if v not in numbers]
    if numbers and (len(numbers) >= 0.7 * len(kept) or all(len(str(v).strip()) <= 2 for v in others)):
        return numbers  # a tonnage of 't' among '391', '225': not a value of the column
    rows = sum(n for v, n in counts.items() if not is_placeholder(v)) or 1
    named = sum(n for v, n in counts.items() if _name_like(v))
    if named >= 0.8 * rows:
        kept = [v for v in kept if _name_like(v) or not isinstance(v, str)]
    return kept


_DAY = re.compile(r"^(\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{2,4})[ T]\d")


def _day(v):
    """A date-time value's day ('2014-01-05 08:00' → '2014-01-05'); any other value as it is."""
    if isinstance(v, str):
        m = _DAY.match(v.strip())
        if m:
            return m.group(1)
        return v.strip()
    return v


_NAME_PARTS = {"first", "last", "middle", "given", "family", "surname", "forename"}


def _may_refer(t: TableProfile, c: ColumnProfile, dense: bool, pt: TableProfile, pc: ColumnProfile) -> bool:
    """Whether ``t.c``'s values, all found in ``pt.pc``, can be references to ``pt``'s rows: not the
    row's own name (a student's last name that a professor also has), not a primary key of its own,
    and a small dense counter only when its name points at ``pt``."""
    if c.name == t.label or (c.primary_key and len(t.primary_key) == 1):
        return False
    if {w.lower() for w in identifier_words(c.name)} & _NAME_PARTS:
        return False
    return not dense or bool(_stem_words(c.name) & (_stem_words(pt.name) | _stem_words(pc.name)))


def _is_number(v) -> bool:
    return isinstance(v, (int, float, decimal.Decimal)) and not isinstance(v, bool)


@dataclass
class ColumnProfile:
    table: str
    name: str
    type: str
    role: str
    primary_key: bool = False
    foreign_key: bool = False
    non_null: int = 0
    distinct: int = 0
    values: list = field(default_factory=list)  # distinct values, most frequent first (when few)
    sample: list = field(default_factory=list)  # sorted non-null sample values (numeric/temporal)
    head: str | None = None
    words: str = ""
    text_number: bool = False  # numbers stored as text ('32'): compare through CAST
    text_values: bool = False  # every sampled value is a non-numeric string (a name-like key can label rows)
    examples: list = field(default_factory=list)  # a few distinct sampled values, for kind inference

    def expr(self, alias: str | None = None) -> str:
        """SQL expression for comparisons and aggregates (CAST for numbers stored as text)."""
        ref = f"{alias}.{quote_ident(self.name)}" if alias else quote_ident(self.name)
        return f"CAST({ref} AS REAL)" if self.text_number else ref

    @property
    def qualified(self) -> str:
        return f"{self.table}.{self.name}"

    @property
    def is_key(self) -> bool:
        return self.role == IDENTIFIER

    @property
    def is_year(self) -> bool:
        return (
            self.role == NUMERIC
            and "year" in self.words.lower().split()
            and bool(self.sample)
            and all(1000 <= float(v) <= 2200 for v in (self.sample[0], self.sample[-1]))
        )

    @property
    def has_values(self) -> bool:
        return len(self.values) >= 2


@dataclass(frozen=True)
class Edge:
    """A foreign key ``src.src_col → dst.dst_col`` (``src`` references ``dst``)."""

    src: str
    src_col: str
    dst: str
    dst_col: str
    inferred: bool = False  # undeclared, found from the data (an inclusion dependency)


@dataclass
class TableProfile:
    name: str
    row_count: int
    columns: list[ColumnProfile]
    primary_key: list[str]
    label: str | None  # display column
    words: str = ""

    def column(self, name: str) -> ColumnProfile | None:
        return next((c for c in self.columns if c.name.lower() == name.lower()), None)

    def by_role(self, *roles: str) -> list[ColumnProfile]:
        return [c for c in self.columns if c.role in roles]


@dataclass
class SchemaAnalysis:
    db_id: str
    db_path: str
    engine: str
    tables: list[TableProfile]
    edges: list[Edge]
    info: DatabaseInfo | None = None

    @property
    def inferred_edges(self) -> list[Edge]:
        """Relationships no foreign key declares, found from the data (:func:`infer_inclusion_edges`)."""
        return [e for e in self.edges if e.inferred]

    # Indexes built once (tables and edges never change after analysis) so that lookups stay O(1)
    # and graph searches touch only a table's own edges: the generator grows near-linearly with
    # the table count instead of with its cube (bench/bench_programmatic.py --wide).
    @cached_property
    def _by_name(self) -> dict[str, TableProfile]:
        out: dict[str, TableProfile] = {}
        for t in self.tables:
            out.setdefault(t.name.lower(), t)
        return out

    @cached_property
    def _adjacency(self) -> dict[str, list[tuple[str, Edge]]]:
        adj: dict[str, list[tuple[str, Edge]]] = {}
        for e in self.edges:
            if e.src != e.dst:
                adj.setdefault(e.src, []).append((e.dst, e))
                adj.setdefault(e.dst, []).append((e.src, e))
        for k in adj:
            adj[k].sort(key=lambda x: (x[0], x[1].src, x[1].src_col, x[1].dst_col))
        return adj

    @cached_property
    def _out_edges(self) -> dict[str, list[Edge]]:
        out: dict[str, list[Edge]] = {}
        for e in self.edges:
            out.setdefault(e.src, []).append(e)
        return out

    @cached_property
    def _in_edges(self) -> dict[str, list[Edge]]:
        out: dict[str, list[Edge]] = {}
        for e in self.edges:
            out.setdefault(e.dst, []).append(e)
        return out

    def out_edges(self, table: str) -> list[Edge]:
        """Foreign keys declared by ``table`` (it references their ``dst``), in edge order."""
        return self._out_edges.get(table, [])

    # ------------------------------------------------------------------ lookup
    def table(self, name: str) -> TableProfile | None:
        return self._by_name.get(str(name).lower())

    @property
    def nonempty_tables(self) -> list[TableProfile]:
        return [t for t in self.tables if t.row_count > 0]

    def all_columns(self) -> list[ColumnProfile]:
        return [c for t in self.tables for c in t.columns]

    def vocabulary(self) -> set[str]:
        """Lower-case words of every table and column name (for absence checks)."""
        vocab: set[str] = set()
        for t in self.tables:
            vocab.update(w.lower() for w in identifier_words(t.name))
            vocab.add(t.name.lower())
            for c in t.columns:
                vocab.update(w.lower() for w in identifier_words(c.name))
                vocab.add(c.name.lower())
        return vocab

    @cached_property
    def _squashed_names(self) -> str:
        return "\x00".join(
            n
            for t in self.tables
            for n in [t.name.lower().replace("_", "")] + [c.name.lower().replace("_", "") for c in t.columns]
        )

    def mentions(self, term: str) -> bool:
        """Whether any table or column name contains ``term`` (as a word or a substring)."""
        term = term.lower().replace(" ", "")
        if not term or "\x00" in term:
            return False
        return term in self._squashed_names

    # ------------------------------------------------------------------ graph
    def neighbours(self, table: str) -> list[tuple[str, Edge]]:
        return self._adjacency.get(table, [])

    def path(self, a: str, b: str, max_edges: int = 3) -> list[tuple[str, Edge, str]] | None:
        """Shortest FK path ``a → b`` as ``[(from, edge, to), ...]`` (None if none).

        A relationship path (down then up, see :meth:`related`) is preferred over a shorter or
        equally short path through a shared parent.
        """
        if a == b:
            return []
        rel = self._relational_path(a, b, max_edges)
        if rel is not None:
            return rel
        return self._any_path(a, b, max_edges)

    def _relational_path(self, a: str, b: str, max_edges: int) -> list[tuple[str, Edge, str]] | None:
        start = (a, 0)
        prev: dict[tuple[str, int], tuple[tuple[str, int], Edge]] = {}
        seen = {start}
        queue = deque([(start, 0)])
        while queue:
            state, depth = queue.popleft()
            node, phase = state
            if depth >= max_edges:
                continue
            for nxt, edge in self.neighbours(node):
                up = edge.src == node
                if not up and phase == 1:
                    continue
                ns = (nxt, 1 if up else phase)
                if ns in seen:
                    continue
                seen.add(ns)
                prev[ns] = (state, edge)
                if nxt == b:
                    steps, cur = [], ns
                    while cur != start:
                        p, e = prev[cur]
                        steps.append((p[0], e, cur[0]))
                        cur = p
                    steps.reverse()
                    visited = [a] + [s[2] for s in steps]
                    if len(set(visited)) == len(visited):
                        return steps
                    continue
                queue.append((ns, depth + 1))
        return None

    def _any_path(self, a: str, b: str, max_edges: int) -> list[tuple[str, Edge, str]] | None:
        prev: dict[str, tuple[str, Edge]] = {}
        seen = {a}
        queue = deque([(a, 0)])
        while queue:
            node, depth = queue.popleft()
            if depth >= max_edges:
                continue
            for nxt, edge in self.neighbours(node):
                if nxt in seen:
                    continue
                seen.add(nxt)
                prev[nxt] = (node, edge)
                if nxt == b:
                    steps = []
                    cur = b
                    while cur != a:
                        p, e = prev[cur]
                        steps.append((p, e, cur))
                        cur = p
                    return list(reversed(steps))
                queue.append((nxt, depth + 1))
        return None

    def connected(self, a: str, b: str) -> bool:
        return self.path(a, b, max_edges=len(self.tables) + 1) is not None

    def related(self, a: str, b: str) -> bool:
        """Whether a *relationship* links ``a`` and ``b``.

        A relationship is a FK path that first goes "down" (to tables referencing the current
        one, e.g. a bridge table) and then only "up" (following foreign keys): ``A ← X → B``
        (many-to-many) or ``A → B → C`` (functional). A path that goes up then down,
        ``A → H ← B``, only says that A and B share a parent H (professors and courses of the
        same department) and is *not* a relationship between them. Same-named identifier
        columns (undeclared foreign keys, common in Spider) count as a direct relationship.
        """
        if a == b:
            return True
        return b in self.related_set(a)

    def related_set(self, a: str) -> frozenset[str]:
        """Every table a relationship links to ``a`` (see :meth:`related`), from one search."""
        cache = self.__dict__.setdefault("_related_cache", {})
        if a not in cache:
            cache[a] = self._reach(a, {}) | frozenset(self._implicit_links.get(a, ())) - {a}
        return cache[a]

    def _reach(self, a: str, hops: dict[str, set[str]]) -> frozenset[str]:
        """Tables reached from ``a`` going down (to referencing tables) only before going up, plus
        ``hops`` (parent → parents across a linking table) at any point."""
        out: set[str] = set()
        start = (a, 0)
        seen = {start}
        queue = deque([start])
        while queue:
            node, phase = queue.popleft()
            moves = [(e.dst, 1) for e in self._out_edges.get(node, []) if e.dst != node]  # up
            moves += [(x, 1) for x in hops.get(node, ())]  # across a linking table
            if phase == 0:
                moves += [(e.src, 0) for e in self._in_edges.get(node, []) if e.src != node]  # down
            for nxt, ph in moves:
                out.add(nxt)
                if (nxt, ph) not in seen:
                    seen.add((nxt, ph))
                    queue.append((nxt, ph))
        out.discard(a)
        return frozenset(out)

    @cached_property
    def _implicit_links(self) -> dict[str, set[str]]:
        """:meth:`implicit_link` for every pair at once, through name indexes (linear in columns)."""
        links: dict[str, set[str]] = {}
        by_pk: dict[str, list[TableProfile]] = {}
        by_word: dict[str, list[TableProfile]] = {}
        for t in self.tables:
            if len(t.primary_key) == 1 and t.primary_key[0].lower() not in {"id", "uid"}:
                by_pk.setdefault(t.primary_key[0].lower(), []).append(t)
            words = {w.lower() for w in identifier_words(t.name)}
            for w in words | {w[:-1] if w.endswith("s") else w for w in words}:
                by_word.setdefault(w, []).append(t)
        for x in self.tables:
            for c in x.columns:
                cands = list(by_pk.get(c.name.lower(), []))
                words = [w.lower() for w in identifier_words(c.name)]
                if c.role == IDENTIFIER and len(words) >= 2 and words[-1] in {"id", "code", "no", "number"}:
                    cands += by_word.get(words[-2], [])
                for y in cands:
                    if y.name != x.name and self.implicit_link(x.name, y.name):
                        links.setdefault(x.name, set()).add(y.name)
                        links.setdefault(y.name, set()).add(x.name)
        return links

    def implicit_link(self, a: str, b: str) -> bool:
        """An undeclared join: a key-like column of one table named like the other's primary key
        (``Has_Pet.StuID`` ↔ ``Student.StuID``) or like the other table (``country_code``).

        A same-named column that is a *declared* foreign key on both sides to the same parent
        (``professors.department_id`` / ``courses.department_id``) is the sibling pattern, not a
        link between the two tables.
        """
        ta, tb = self.table(a), self.table(b)
        if not ta or not tb:
            return False
        for x, y in ((ta, tb), (tb, ta)):
            if len(y.primary_key) != 1:
                continue
            pk = y.primary_key[0].lower()
            if pk in {"id", "uid"}:
                continue
            col = next((c for c in x.columns if c.name.lower() == pk), None)
            if col is None:
                continue
            declared = [e for e in self.out_edges(x.name) if e.src_col == col.name]
            if declared and all(e.dst != y.name for e in declared):
                continue  # x.col is a declared FK to some other table
            return True
        for x, y in ((ta, tb), (tb, ta)):
            ywords = {w.lower() for w in identifier_words(y.name)}
            ysing = {w[:-1] if w.endswith("s") else w for w in ywords}
            for c in x.columns:
                words = [w.lower() for w in identifier_words(c.name)]
                if c.role == IDENTIFIER and len(words) >= 2 and words[-1] in {"id", "code", "no", "number"}:
                    declared = [e for e in self.out_edges(x.name) if e.src_col == c.name]
                    if declared and all(e.dst != y.name for e in declared):
                        continue
                    if words[-2] in ywords or words[-2] in ysing:
                        return True
        return False

    @staticmethod
    def path_is_relational(steps: list[tuple[str, Edge, str]]) -> bool:
        """No "up then down" (``A → H ← B``) in the path: see :meth:`related`."""
        gone_up = False
        for frm, edge, _to in steps:
            up = edge.src == frm
            if not up and gone_up:
                return False
            gone_up = gone_up or up
        return True

    def components(self) -> list[list[str]]:
        comp: list[list[str]] = []
        seen: set[str] = set()
        for t in self.tables:
            if t.name in seen:
                continue
            group, queue = [], deque([t.name])
            seen.add(t.name)
            while queue:
                n = queue.popleft()
                group.append(n)
                for nxt, _ in self.neighbours(n):
                    if nxt not in seen:
                        seen.add(nxt)
                        queue.append(nxt)
            comp.append(sorted(group))
        return comp

    def joinable(self, a: str, b: str) -> bool:
        """Whether a chain of relationships links ``a`` and ``b`` (issue #41 item 5): a relationship
        (:meth:`related`) or a chain of them in which a many-to-many linking table may be crossed at
        any point. Invoice lines lead to tracks, tracks to playlists through ``playlist_track``: a
        person can ask which playlists hold what an invoice bought. Two tables that only share a
        parent (professors and courses of one department, the paper's own example) are not linked."""
        if a == b or self.related(a, b):
            return True
        return b in self._chained(a)

    def _chained(self, a: str) -> frozenset[str]:
        cache = self.__dict__.setdefault("_chain_cache", {})
        if a not in cache:
            out = set(self.related_set(a)) | self._reach(a, self._linking_hops)
            reached = out | {a}
            out |= {t for t, parents in self.linking_tables.items() if parents & reached}  # its rows link them
            out.discard(a)
            cache[a] = frozenset(out)
        return cache[a]

    @cached_property
    def linking_tables(self) -> dict[str, set[str]]:
        """Linking tables and their parents: a table with keys to two different parents and at most
        two columns of its own (``FilmActors(filmID, actorID, role)``)."""
        out: dict[str, set[str]] = {}
        for t in self.tables:
            fks = [e for e in self._out_edges.get(t.name, []) if e.dst != t.name]
            own = {e.src_col for e in fks}
            payload = [c for c in t.columns if c.name not in own and not c.primary_key and c.role != IDENTIFIER]
            parents = {e.dst for e in fks}
            if len(payload) <= 2 and len(parents) >= 2:
                out[t.name] = parents
        return out

    @cached_property
    def _linking_hops(self) -> dict[str, set[str]]:
        hops: dict[str, set[str]] = {}
        for parents in self.linking_tables.values():
            for p in parents:
                hops.setdefault(p, set()).update(parents - {p})
        return hops

    def value_linked(self, a: str, b: str) -> bool:
        """Whether the data links ``a`` and ``b`` though the schema declares nothing (issue #41 item
        5): every value (at least 3 distinct) of a column of one is a value of a column of the other —
        dates compared by their day ("1/5/2014 08:00" is on the weather date "1/5/2014"). A small
        dense counter (1..n, in any id column by chance) counts only when its name points at the
        other table. Columns with more than :data:`MAX_INCLUSION_VALUES` values are not read."""
        ta, tb = self.table(a), self.table(b)
        if ta is None or tb is None:
            return False
        cols_a, cols_b = self._link_values(ta), self._link_values(tb)
        for ca, va, dense_a in cols_a:
            for cb, vb, dense_b in cols_b:
                if va <= vb and _may_refer(ta, ca, dense_a, tb, cb):
                    return True
                if vb <= va and _may_refer(tb, cb, dense_b, ta, ca):
                    return True
        return False

    def _link_values(self, t: TableProfile) -> list[tuple[ColumnProfile, frozenset, bool]]:
        cache = self.__dict__.setdefault("_link_cache", {})
        if t.name in cache:
            return cache[t.name]
        out = []
        for c in t.columns:
            if c.role == OTHER or c.distinct < 3 or c.distinct > MAX_INCLUSION_VALUES:
                continue
            if c.foreign_key:
                continue  # two keys of one parent (courses' and professors' departments) make siblings
            if c.role == NUMERIC and not _keyish(c):
                continue  # a measure (ages, prices) contained in another measure links nothing
            res = execute_sql(
                self.db_path,
                f"SELECT DISTINCT {quote_ident(c.name)} FROM {quote_ident(t.name)} WHERE {quote_ident(c.name)} IS NOT NULL",
                timeout_s=PROFILE_TIMEOUT_S,
            )
            if not res.ok:
                continue
            vals = {_day(r[0]) for r in res.rows if not is_placeholder(r[0])}
            if len(vals) < 3:
                continue
            nums = [v for v in vals if isinstance(v, (int, float))]
            dense = len(nums) == len(vals) and max(nums) <= 3 * len(vals) + 5
            out.append((c, frozenset(vals), dense))
        cache[t.name] = out
        return out

    @cached_property
    def _bridges(self) -> list[tuple[str, Edge, Edge]]:
        out = []
        for t in self.tables:
            payload = [c for c in t.columns if c.role not in (IDENTIFIER, OTHER)]
            if t.label is not None or len(payload) > 3:
                continue  # an entity with its own attributes, not a linking table
            fks = [e for e in self.out_edges(t.name) if e.dst != t.name]
            for i, e1 in enumerate(fks):
                for e2 in fks[i + 1 :]:
                    if e1.dst != e2.dst:
                        out.append((t.name, e1, e2))
        return out

    def bridges(self) -> list[tuple[str, Edge, Edge]]:
        """Many-to-many links: ``(bridge_table, edge_to_A, edge_to_B)`` with A != B."""
        return self._bridges

    def children(self, table: str) -> list[Edge]:
        """Edges of tables referencing ``table`` (one-to-many: table → many children)."""
        return [e for e in self._in_edges.get(table, []) if e.src != table]

    # ------------------------------------------------------------------ lexical groups
    def head_noun_groups(self) -> list[tuple[str, str, list[ColumnProfile]]]:
        """``(table, head, columns)`` for ≥2 non-key columns of one table sharing a head noun."""
        out = []
        for t in self.tables:
            groups: dict[str, list[ColumnProfile]] = {}
            for c in t.columns:
                if c.role in (OTHER,) or c.primary_key or not c.head:
                    continue
                groups.setdefault(c.head, []).append(c)
            for head in sorted(groups):
                cols = groups[head]
                if len(cols) < 2:
                    continue
                # the same role family (both keys to the same table, or both non-keys)
                out.append((t.name, head, cols))
        return out

    def same_named_columns(self, max_edges: int = 3) -> list[tuple[ColumnProfile, ColumnProfile]]:
        """Non-key columns with the same name in two FK-connected tables (at most ``max_edges`` apart).

        Found from each table's own neighbourhood (a search bounded by ``max_edges``) rather than
        by testing every pair of tables, so wide schemas stay near-linear."""
        tabs = self.nonempty_tables
        order = {t.name: i for i, t in enumerate(tabs)}
        out = []
        for ta in tabs:
            near = self._within(ta.name, max_edges)
            acols = [c for c in ta.columns if not c.is_key and c.role != OTHER]
            if not acols:
                continue
            for tb_name in sorted((n for n in near if order.get(n, -1) > order[ta.name]), key=order.get):
                tb = self._by_name[tb_name.lower()]
                bcols = {c.name.lower(): c for c in tb.columns}
                for ca in acols:
                    cb = bcols.get(ca.name.lower())
                    if cb is None or cb.is_key or cb.role == OTHER:
                        continue
                    out.append((ca, cb))
        return out

    def _within(self, a: str, max_edges: int) -> set[str]:
        seen = {a}
        frontier = [a]
        for _ in range(max_edges):
            nxt = []
            for n in frontier:
                for m, _e in self.neighbours(n):
                    if m not in seen:
                        seen.add(m)
                        nxt.append(m)
            frontier = nxt
        seen.discard(a)
        return seen


# ------------------------------------------------------------------------------ profiling


def _infer_role(
    col_name: str, decl_type: str, pk: bool, fk: bool, values: list, distinct: int, non_null: int, rows: int
) -> str:
    if not values:
        return OTHER
    if any(isinstance(v, (bytes, bytearray, memoryview)) for v in values[:50]):
        return OTHER
    words = [w.lower() for w in identifier_words(col_name)]
    t = decl_type.upper()
    if pk or fk or (words and words[-1] in {"id", "uid", "ids"}) or col_name.lower() in {"id", "uid"}:
        return IDENTIFIER
    if any(isinstance(v, (_dt.date, _dt.datetime, _dt.time)) for v in values[:50]):
        return TEMPORAL
    if any(k in t for k in _TEMPORAL_TYPES) and all(isinstance(v, str) and _ISO_DATE.match(v) for v in values[:200]):
        return TEMPORAL
    if all(isinstance(v, str) and _ISO_DATE.match(v) for v in values[:200]):
        return TEMPORAL
    if all(_is_number(v) for v in values):
        return NUMERIC
    if all(isinstance(v, str) and _NUMBER_TEXT.match(v) for v in values) and distinct >= 3:
        return NUMERIC  # numbers stored as text; ColumnProfile.text_number is set
    if all(isinstance(v, str) for v in values):
        if (
            2 <= distinct <= CATEGORICAL_MAX_DISTINCT
            and distinct < non_null
            and (distinct <= 0.5 * non_null or (non_null <= 12 and distinct <= 0.75 * non_null))
        ):
            return CATEGORICAL
        return TEXT
    return OTHER


_PLACE_WORDS = {
    "building",
    "room",
    "city",
    "address",
    "street",
    "country",
    "state",
    "location",
    "region",
    "hometown",
    "nationality",
    "campus",
    "venue",
    "place",
}


def _label_score(table: TableProfile, c: ColumnProfile) -> float | None:
    """How well a column names the rows of its table (None: cannot). Evidence, strongest first: the
    column repeats the table's name (``department.department``) or is a name/title; its values are
    unique; it is the table's text primary key. A place column (``building``) or a repeating
    category names a *property*, not the row ("students whose department is 'Brodhead'")."""
    if not c.text_values or c.text_number:
        return None
    if c.values and {str(v).strip().lower() for v in c.values} <= {"t", "f", "y", "n", "yes", "no", "true", "false"}:
        return None  # a yes/no flag names no row
    if c.words.split()[:1] and c.words.split()[0].lower() in {"if", "is", "has", "was", "does", "can"}:
        return None  # a predicate column (If_first_show) names no row, whatever its data holds
    if c.role not in (TEXT, CATEGORICAL, IDENTIFIER):
        return None
    words = {w.lower().rstrip("s") for w in identifier_words(c.name)}
    twords = {w.lower().rstrip("s") for w in identifier_words(table.name)}
    named = bool(words & set(_LABEL_WORDS)) or c.name.lower().endswith(_LABEL_WORDS)
    if c.role == IDENTIFIER and not (c.primary_key or named):
        return None  # a text foreign key names another table's rows
    score = 0.0
    if c.distinct >= 2 and words - {"name", "title", "label"} <= twords:
        score += 4
    if named:
        score += 3
    unique = c.non_null > 0 and c.distinct >= 0.95 * c.non_null
    score += 2 if unique else 0
    score += 1 if c.primary_key else 0
    if words & _PLACE_WORDS and not named:
        score -= 3
    if c.role == CATEGORICAL:
        score -= 2
    return score


def _choose_label(table: TableProfile) -> str | None:
    scored = [(sc, c) for c in table.columns if (sc := _label_score(table, c)) is not None]
    if not scored:
        return None
    best, col = max(scored, key=lambda x: (x[0], x[1].distinct, -table.columns.index(x[1])))
    return col.name if best > -2 else None


def _described_names(db_path: str, table: str) -> dict[str, str]:
    """Column name → the name a person says, from BIRD's ``database_description/<table>.csv`` next to
    the database file (Spider ships none). ``column_name`` when it differs from the identifier,
    else "X" from a description "the X of the ..." (at most three words)."""

    path = Path(db_path).parent / "database_description" / f"{table}.csv"
    if not path.is_file():
        return {}
    out: dict[str, str] = {}
    try:
        with path.open(encoding="utf-8-sig", errors="replace", newline="") as fh:
            for r in csv.DictReader(fh):
                orig = (r.get("original_column_name") or "").strip()
                if not orig:
                    continue
                named = " ".join((r.get("column_name") or "").split())
                desc = " ".join((r.get("column_description") or "").split()).lower()
                if named and named.lower() != humanize(orig).lower() and len(named.split()) <= 4:
                    out[orig.lower()] = named.lower()
                    continue
                m = re.match(r"^the ([a-z][a-z ]{1,40}?) of (?:the|a|an) ", desc)
                if m and len(m.group(1).split()) <= 3 and "identifier" not in m.group(1) and m.group(1) != "id":
                    out[orig.lower()] = m.group(1)
    except (OSError, csv.Error):
        return {}
    return out


def analyze(db_path: str | Path, db_id: str | None = None, info: DatabaseInfo | None = None) -> SchemaAnalysis:
    """Profile a database's schema and data; raises ``BadDatabaseError`` for unusable files."""
    info = info or inspect_database(db_path, db_id)
    db_path = str(db_path)
    names = {t.name.lower(): t for t in info.tables}

    # validated FK edges, canonical names
    edges: list[Edge] = []
    for t in info.tables:
        for fk in t.foreign_keys:
            dst = names.get(str(fk.ref_table).lower())
            if dst is None or t.column(fk.column) is None:
                continue
            dst_col = dst.column(fk.ref_column) if fk.ref_column else None
            if dst_col is None:
                if len(dst.primary_key) == 1:
                    dst_col = dst.column(dst.primary_key[0])
                if dst_col is None:
                    continue
            edge = Edge(t.name, t.column(fk.column).name, dst.name, dst_col.name)
            if edge not in edges:
                edges.append(edge)
    edges.sort(key=lambda e: (e.src, e.src_col, e.dst, e.dst_col))
    src_cols = {(e.src, e.src_col) for e in edges}

    tables: list[TableProfile] = []
    for t in info.tables:
        q = quote_ident(t.name)
        sample_rows: list[tuple] = []
        columns = [c.name for c in t.columns]
        stats: dict[str, tuple[int, int]] = {}
        if t.row_count > 0 and columns:
            # one statement per table: the sample rows carry the (uncorrelated, computed once) column
            # statistics as extra columns. Every executor call opens a connection that parses the whole
            # schema, so halving the calls matters on wide databases.
            agg = ", ".join(
                f"(SELECT COUNT({quote_ident(c)}) FROM {q}), (SELECT COUNT(DISTINCT {quote_ident(c)}) FROM {q})"
                for c in columns
            )
            res = execute_sql(db_path, f"SELECT *, {agg} FROM {q} LIMIT {SAMPLE_LIMIT}", timeout_s=PROFILE_TIMEOUT_S)
            n = len(columns)
            if res.ok and res.rows and len(res.rows[0]) == 3 * n:
                sample_rows = [r[:n] for r in res.rows]
                row = res.rows[0][n:]
                for i, c in enumerate(columns):
                    stats[c] = (int(row[2 * i] or 0), int(row[2 * i + 1] or 0))
            else:  # fall back to two plain statements
                res = execute_sql(db_path, f"SELECT * FROM {q} LIMIT {SAMPLE_LIMIT}", timeout_s=PROFILE_TIMEOUT_S)
                if res.ok:
                    sample_rows = res.rows
                agg = ", ".join(f"COUNT({quote_ident(c)}), COUNT(DISTINCT {quote_ident(c)})" for c in columns)
                res = execute_sql(db_path, f"SELECT {agg} FROM {q}", timeout_s=PROFILE_TIMEOUT_S)
                if res.ok and res.rows:
                    row = res.rows[0]
                    for i, c in enumerate(columns):
                        stats[c] = (int(row[2 * i] or 0), int(row[2 * i + 1] or 0))
        described = _described_names(db_path, t.name)
        profiles: list[ColumnProfile] = []
        for i, col in enumerate(t.columns):
            vals = [r[i] for r in sample_rows if i < len(r) and r[i] is not None]
            counts = Counter(vals)
            non_null, distinct = stats.get(col.name, (len(vals), len(counts)))
            pk = col.primary_key or col.name in t.primary_key
            fk = (t.name, col.name) in src_cols
            role = _infer_role(col.name, col.type, pk, fk, vals, distinct, non_null, t.row_count)
            prof = ColumnProfile(
                table=t.name,
                name=col.name,
                type=col.type,
                role=role,
                primary_key=pk,
                foreign_key=fk,
                non_null=non_null,
                distinct=distinct,
                head=head_noun(col.name),
                words=described.get(col.name.lower()) or column_words(col.name),
                text_values=bool(vals) and all(isinstance(v, str) and not _NUMBER_TEXT.match(v) for v in vals[:200]),
            )
            prof.examples = list(dict.fromkeys(v for v in vals[:200] if isinstance(v, str)))[:20]
            if distinct <= CATEGORICAL_MAX_DISTINCT and role in (CATEGORICAL, NUMERIC, TEXT, TEMPORAL, IDENTIFIER):
                prof.values = _of_its_kind(
                    _typical([v for v, _ in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))], counts),
                    counts,
                )
            if role == IDENTIFIER and fk and not pk:
                # a foreign key says the parent it points at: current_address_id → "current address"
                ws = prof.words.split()
                if len(ws) > 1 and ws[-1].lower() in {"id", "ids"}:
                    prof.words = " ".join(ws[:-1])
            if role == NUMERIC and vals and isinstance(vals[0], str):
                prof.text_number = True
                vals = [float(v) for v in vals]
            if role in (NUMERIC, TEMPORAL):
                try:
                    prof.sample = sorted(vals, key=lambda v: float(v) if _is_number(v) else str(v))
                except (TypeError, ValueError):
                    prof.sample = []
            profiles.append(prof)
        tp = TableProfile(t.name, t.row_count, profiles, list(t.primary_key), None, humanize(t.name))
        tp.label = _choose_label(tp)
        tables.append(tp)
    inferred = infer_inclusion_edges(db_path, tables, edges)
    for e in inferred:  # the child column is a key now: no thresholds or "high" on it, no "id" said
        prof = next(t for t in tables if t.name == e.src).column(e.src_col)
        prof.role, prof.foreign_key = IDENTIFIER, True
        ws = prof.words.split()
        if len(ws) > 1 and ws[-1].lower() in {"id", "ids"}:
            prof.words = " ".join(ws[:-1])
    edges = sorted(edges + inferred, key=lambda e: (e.src, e.src_col, e.dst, e.dst_col))
    tables, edges = _name_linking_rows(tables, edges)
    return SchemaAnalysis(info.db_id, db_path, info.engine, tables, edges, info)


def _name_linking_rows(tables: list[TableProfile], edges: list[Edge]) -> tuple[list[TableProfile], list[Edge]]:
    """Give a table linking two or more others the noun of its rows (``ApplicationJobs`` →
    "applications", :func:`relationship_noun`), carried by its name wherever it goes (tables, edges)."""
    names: dict[str, TableName] = {}
    for t in tables:
        parents = sorted({e.dst for e in edges if e.src == t.name and e.dst != t.name})
        noun = relationship_noun(t.name, parents) if len(parents) >= 2 else None
        if noun:
            names[t.name] = TableName(t.name, noun)
            t.name = names[t.name]
    if not names:
        return tables, edges
    return tables, [
        Edge(names.get(e.src, e.src), e.src_col, names.get(e.dst, e.dst), e.dst_col, e.inferred) for e in edges
    ]


MAX_INCLUSION_VALUES = 5000  # distinct values read per column; larger columns are not checked
MAX_INCLUSION_COLUMNS = 200  # candidate columns per database (wide schemas stay fast)
_KEYISH_END = {"id", "ids", "code", "no", "number", "key", "ref", "uid"}


def _keyish(c: ColumnProfile) -> bool:
    """A column that may hold another table's keys: not a measure by name, not free text or a date."""
    if c.role in (OTHER, TEMPORAL) or c.distinct < 2:
        return False
    words = [w.lower() for w in c.words.split()] or [""]
    if c.role == NUMERIC:
        if any(w in MEASURE_WORDS for w in words) and words[-1] not in _KEYISH_END:
            return False
        return not any(isinstance(v, float) and not float(v).is_integer() for v in c.sample[:200])
    return c.role in (IDENTIFIER, CATEGORICAL, TEXT)


def _type_family(decl: str) -> str:
    """'int', 'text' or '' (unknown, matches anything) from a declared type: no TEXT column is read
    against an INTEGER key (wide schemas would pay a query per pair)."""
    t = (decl or "").upper()
    if "INT" in t:
        return "int"
    if any(k in t for k in ("CHAR", "TEXT", "CLOB")):
        return "text"
    return ""


def _stem_words(name: str) -> set[str]:
    """Content words of an identifier, singular, without key suffixes: ``airlines`` → {"airline"}."""
    out = set()
    for w in identifier_words(name):
        w = w.lower()
        if w in _KEYISH_END or w == "name" or len(w) < 3:
            continue
        out.add(w[:-1] if w.endswith("s") and not w.endswith("ss") else w)
    return out


def infer_inclusion_edges(db_path: str, tables: list[TableProfile], edges: list[Edge]) -> list[Edge]:
    """Undeclared relationships found from the data (issue #35 item 6): ``X.c → Y.k`` when every
    non-null value of a key-like column ``X.c`` (at least 3 distinct) is a value of ``Y.k``, the single
    primary key (or a unique key column) of another table. ``Student.Advisor`` ⊆ ``Faculty.FacID``.

    Containment by chance is ruled out: a numeric column whose values are a small dense counter
    (1..n, contained in any id column) needs its name to point at ``Y`` (a word of Y's name or key).
    A column that already has a declared foreign key is left alone; the first parent wins
    (a tie between two parents is no evidence, so neither is taken)."""
    declared = {(e.src, e.src_col) for e in edges}
    parents: list[tuple[TableProfile, ColumnProfile]] = []
    for t in tables:
        if t.row_count < 2:
            continue
        keys = [t.column(t.primary_key[0])] if len(t.primary_key) == 1 else []
        if not keys:  # no declared key: a unique, complete id column stands in
            keys = [
                c for c in t.columns if c.role == IDENTIFIER and c.distinct == t.row_count and c.non_null == t.row_count
            ]
        # a unique name that labels the rows (Venues.name) is a key too: schemas without declared keys
        lab = t.column(t.label) if t.label else None
        if lab is not None and lab.distinct == t.row_count and lab.non_null == t.row_count and lab not in keys:
            keys.append(lab)
        parents += [(t, k) for k in keys if k is not None and k.role != OTHER]
    if not parents:
        return []
    children = [
        (t, c)
        for t in tables
        for c in t.columns
        if (t.name, c.name) not in declared
        and not (c.primary_key and len(t.primary_key) == 1)
        and c.distinct >= 3
        and _keyish(c)
    ][:MAX_INCLUSION_COLUMNS]
    if not children:
        return []
    cache: dict[tuple[str, str], set | None] = {}

    def values(t: TableProfile, c: ColumnProfile) -> set | None:
        if (t.name, c.name) not in cache:
            if c.distinct > MAX_INCLUSION_VALUES:
                cache[(t.name, c.name)] = None
            else:
                res = execute_sql(
                    db_path,
                    f"SELECT DISTINCT {quote_ident(c.name)} FROM {quote_ident(t.name)} WHERE {quote_ident(c.name)} IS NOT NULL",
                    timeout_s=PROFILE_TIMEOUT_S,
                )
                cache[(t.name, c.name)] = {r[0] for r in res.rows} if res.ok else None
        return cache[(t.name, c.name)]

    out: list[Edge] = []
    for t, c in children:
        cwords = _stem_words(c.name)
        found = []
        for pt, pk in parents:
            if pt.name == t.name or pk.distinct < c.distinct or _type_family(pk.type) != _type_family(c.type):
                continue
            child_vals = values(t, c)
            if not child_vals:
                break
            parent_vals = values(pt, pk)
            if not parent_vals or not child_vals <= parent_vals:
                continue
            named = bool(cwords & (_stem_words(pt.name) | _stem_words(pk.name))) or c.name.lower() == pk.name.lower()
            nums = [v for v in child_vals if isinstance(v, (int, float))]
            dense = len(nums) == len(child_vals) and max(nums) <= 3 * len(child_vals) + 5
            if dense and not named:
                continue
            found.append((not named, pt, pk))
        if not found:
            continue
        found.sort(key=lambda x: x[0])
        if len(found) > 1 and found[0][0] == found[1][0]:
            continue  # two parents fit equally: no evidence which
        _, pt, pk = found[0]
        if any((e.src, e.src_col, e.dst, e.dst_col) == (pt.name, pk.name, t.name, c.name) for e in out + edges):
            continue  # one-to-one (Film.Title = Screenplay.Title): one direction is the relationship
        out.append(Edge(t.name, c.name, pt.name, pk.name, inferred=True))
    return out
