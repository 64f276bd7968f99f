"""Shared pieces of the candidate builders: drafts, the build context, SQL helpers.

A builder is a generator ``build(ctx) -> Iterator[Draft]`` registered for one subcategory. It
yields drafts lazily, most promising first (order drawn from ``ctx.rng``); the driver in
:mod:`pipelines.abiss.programmatic` verifies each draft by execution and keeps the first
``per_subcategory`` that pass. A builder that finds no support in the database calls
``ctx.unsupported(reason)`` and returns.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from pipelines.abiss.programmatic.entity_kinds import MEASURE_WORDS, is_flag, is_measure  # noqa: F401  (re-exported)
from pipelines.abiss.programmatic.phrasing import (
    Ask,
    agent_noun,
    be,
    column_words,
    humanize,
    identifier_words,
    is_plural,
    is_relation_name,
    plural,
    quote_value,
    readable,
    render,
    singular,
    table_plural,
    table_singular,
    table_words,
    with_article_or_plural,
)
from pipelines.abiss.programmatic.schema_analysis import (
    CATEGORICAL,
    IDENTIFIER,
    NUMERIC,
    TEMPORAL,
    TEXT,
    ColumnProfile,
    Edge,
    SchemaAnalysis,
    TableProfile,
    is_placeholder,
    quote_ident,
    sql_literal,
)
from resources.sql import QueryFailure, QueryResult, execute_sql

__all__ = [
    "Absence",
    "Ask",
    "BuildContext",
    "Draft",
    "Reading",
    "BUILDERS",
    "register",
    "q",
    "lit",
    "col_ref",
    "entity_np",
    "label_np",
    "plural",
    "singular",
    "humanize",
    "quote_value",
    "CATEGORICAL",
    "IDENTIFIER",
    "NUMERIC",
    "TEMPORAL",
    "TEXT",
    "ColumnProfile",
    "Edge",
    "SchemaAnalysis",
    "TableProfile",
    "join_sql",
    "bridge_join_sql",
    "labelled_bridges",
    "thresholds",
    "numeric_columns",
    "temporal_columns",
    "categorical_columns",
    "labelled_tables",
    "value_text",
    "condition_phrase",
    "be",
    "is_plural",
    "is_relation_name",
    "table_plural",
    "table_singular",
    "table_words",
    "with_article_or_plural",
    "is_measure",
    "is_flag",
    "noun_tables",
    "number_shaped",
    "same_content",
    "is_placeholder",
    "is_free_text",
    "is_round_number",
    "edge_role",
    "child_of",
    "child_of_each",
    "for_each_parent",
    "role_head",
    "role_predicate",
    "ROLE_VERBS",
]

q = quote_ident
lit = sql_literal


@dataclass(frozen=True)
class Reading:
    sql: str
    hidden_knowledge: str


@dataclass(frozen=True)
class Absence:
    """What an unanswerable draft claims the schema lacks (checked before emitting).

    * ``terms``: none of these words occurs in any table or column name;
    * ``relationship``: ``tables`` exist and no relationship links them (no FK path of the
      down-then-up shape, see :meth:`SchemaAnalysis.related`, and no same-named key column);
    * ``improper``: out-of-domain or not a read query (nothing schema-related to check).
    """

    kind: str
    terms: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()


@dataclass
class Draft:
    subcategory: str
    builder: str
    question: str
    style: str
    sql: str | None = None
    evidence: str | None = None
    readings: list[Reading] | None = None
    feedback: str | None = None
    absence: Absence | None = None


@dataclass
class BuildContext:
    analysis: SchemaAnalysis
    rng: random.Random
    styles: list[str]
    subcategory: str
    reasons: list[str] = field(default_factory=list)
    _style_i: int = 0
    _cache: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._style_i = self.rng.randrange(len(self.styles)) if self.styles else 0

    @property
    def db_path(self) -> str:
        return self.analysis.db_path

    def next_style(self) -> str:
        style = self.styles[self._style_i % len(self.styles)]
        self._style_i += 1
        return style

    def unsupported(self, reason: str) -> None:
        self.reasons.append(reason)

    def run(self, sql: str) -> QueryResult | QueryFailure:
        """Execute through the safe executor, cached per SQL text."""
        if sql not in self._cache:
            self._cache[sql] = execute_sql(self.db_path, sql)
        return self._cache[sql]

    def rows(self, sql: str) -> list[tuple]:
        res = self.run(sql)
        return res.rows if res.ok else []

    def top_values(self, expr: str, frm: str, limit: int) -> list:
        """The ``limit`` most frequent values of ``expr`` over ``frm`` (ties by value)."""
        rows = self.rows(f"SELECT {expr}, COUNT(*) {frm} GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT {limit + 5}")
        return [r[0] for r in rows if not is_placeholder(r[0])][:limit]  # no "the template ''"

    def say(self, ask: Ask, style: str) -> str:
        return render(ask, style, self.rng)

    def shuffled(self, items: list) -> list:
        items = list(items)
        self.rng.shuffle(items)
        return items


BuilderFn = Callable[[BuildContext], Iterator[Draft]]
BUILDERS: dict[str, list[tuple[str, BuilderFn]]] = {}


def register(subcategory: str, name: str):
    def deco(fn: BuilderFn) -> BuilderFn:
        BUILDERS.setdefault(subcategory, []).append((name, fn))
        return fn

    return deco


# ------------------------------------------------------------------------------ helpers


def same_content(rows_a: list[tuple], rows_b: list[tuple]) -> bool:
    """Whether two readings give the same answer content (issue #35 item 4): the distinct rows of the
    columns both project (the last ``k``, ``k`` the smaller width) are equal. A distributive reading
    that only adds each parent's name, or two "my X" readings returning the same values, differ in
    presentation, not in meaning."""
    if not rows_a or not rows_b:
        return False
    k = min(len(rows_a[0]), len(rows_b[0]))
    if k == 0:
        return False
    return {tuple(repr(v) for v in r[-k:]) for r in rows_a} == {tuple(repr(v) for v in r[-k:]) for r in rows_b}


def col_ref(alias: str | None, col: str) -> str:
    return f"{alias}.{q(col)}" if alias else q(col)


def value_text(value) -> str:
    return quote_value(value)


def condition_phrase(col, value) -> str:
    """How a person says ``col = value`` of a row: a predicate column keeps its verb ("directed by
    'Ben Jones'"), any other column is a property ("whose country is 'France'")."""
    words = identifier_words(getattr(col, "name", "") or "")
    if agent_noun(words):
        return f"{' '.join(w.lower() for w in words)} {quote_value(value)}"
    return f"whose {col.words} {be(col.words)} {quote_value(value)}"


_KEY_WORDS = {"id", "ids", "code", "key", "no", "number", "ref", "uid"}


def _stems(words: str) -> set[str]:
    return {singular(w.lower()) for w in words.split()} - _KEY_WORDS


def edge_role(analysis: SchemaAnalysis, e: Edge) -> str | None:
    """The role a foreign key gives its parent, when a question must say it (issue #41 item 3):
    the key column's words ("start station", "advisor", "winning aircraft") when the child reaches
    that parent through more than one key, or when the key's name is not the parent's name (a
    ``Student.Advisor`` key to ``Faculty`` makes the faculty member an advisor). None when the key
    just names its parent (``station_id``, ``owner_id`` → Owners)."""
    child = analysis.table(e.src)
    col = child.column(e.src_col) if child else None
    if col is None:
        return None
    ws = col.words.split()
    while len(ws) > 1 and ws[-1].lower() in {"id", "ids", "name", "code", "key", "no", "number"}:
        ws = ws[:-1]  # start_station_name → "start station": the key says which station, not its name
    words = " ".join(ws)
    parent = analysis.table(e.dst)
    named = _stems(table_words(e.dst))
    if parent is not None:
        for k in parent.primary_key:
            named |= _stems(column_words(k))
    several = sum(1 for x in analysis.out_edges(e.src) if x.dst == e.dst) > 1
    own = _stems(words)
    if not several and (not own or own <= named):
        return None
    return words if words and readable(words) else "linked"


def role_head(role: str, parent: str) -> bool:
    """Whether a role names the parent's kind itself ("start station" of a station)."""
    return bool(role.split()) and singular(role.split()[-1].lower()) == singular(parent.lower().split()[-1])


# a key column named by a role of its parent ("winning aircraft", "home team") keeps that role
ROLE_VERBS = {
    "winning": "won by",
    "losing": "lost by",
    "owning": "owned by",
    "hosting": "hosted by",
    "home": "at home against",
    "away": "away against",
    "managing": "managed by",
    "directing": "directed by",
    "performing": "performed by",
    "organizing": "organised by",
    "organising": "organised by",
    "sponsoring": "sponsored by",
}
_ROLE_PREPOSITIONS = {"in", "by", "at", "for", "from", "to", "with", "on"}


def role_predicate(role: str, parent: str) -> str | None:
    """A role said as a verb phrase with a slot for the parent: ``lost in battle`` → "lost in {}",
    ``winning aircraft`` → "won by {}"; None when the role is a plain noun ("start station")."""
    words = role.lower().split()
    if len(words) < 2 or not role_head(role, parent):
        return None
    mods = words[:-1]
    if len(mods) == 1 and mods[0] in ROLE_VERBS:
        return ROLE_VERBS[mods[0]] + " {}"
    if mods[-1] in _ROLE_PREPOSITIONS:
        return " ".join(mods) + " {}"
    return None


def _role_said(analysis: SchemaAnalysis, e: Edge, plain: str, slot: str, noun) -> str:
    """``plain`` when the key needs no role, the role's verb around ``slot`` ("lost in {slot}"), else
    ``noun(role, parent_singular)``."""
    ps = table_singular(e.dst)
    role = edge_role(analysis, e)
    if role is None:
        return plain
    pred = role_predicate(role, ps)
    return pred.format(slot) if pred else noun(role, ps)


def child_of(analysis: SchemaAnalysis, e: Edge, value_said: str) -> str:
    """How child rows relate to one parent row with label ``value_said``: "of the station 'X'",
    "whose start station is 'X'", "whose advisor is the faculty member 'Smith'"."""
    ps = table_singular(e.dst)
    return _role_said(
        analysis,
        e,
        f"of the {ps} {value_said}",
        f"the {ps} {value_said}",
        lambda role, ps: (
            f"whose {role} is {value_said}" if role_head(role, ps) else f"whose {role} is the {ps} {value_said}"
        ),
    )


def child_of_each(analysis: SchemaAnalysis, e: Edge, quant: str, post: str = "") -> str:
    """A quantified parent (``post`` modifies it) with its role: "of each station", "lost in every
    battle", "with every station as their start station", "with each faculty member whose rank is
    'Instructor' as their advisor"."""
    ps = table_singular(e.dst)
    return _role_said(
        analysis,
        e,
        f"of {quant} {ps}{post}",
        f"{quant} {ps}{post}",
        lambda role, ps: f"with {quant} {ps}{post} as their {role}",
    )


def for_each_parent(analysis: SchemaAnalysis, e: Edge) -> str:
    """ "for each station", "for each start station", "for each faculty member as advisor"."""
    ps = table_singular(e.dst)
    return _role_said(
        analysis,
        e,
        f"for each {ps}",
        f"each {ps}",
        lambda role, ps: f"for each {role}" if role_head(role, ps) else f"for each {ps} as {role}",
    )


def label_np(table: TableProfile) -> str:
    """Plural noun phrase naming rows of a table by its label: "the titles of the courses"; a label
    that repeats the table's name says nothing more ("the departments" for ``department.dept_name``)."""
    tname = table_plural(table.name)
    if not table.label:
        return f"the {tname}"
    col = table.column(table.label)
    lwords = col.words if col is not None else column_words(table.label)
    tw = {singular(w) for w in table_words(table.name).lower().split()}
    rest = [w for w in lwords.split() if singular(w.lower()) not in tw]  # "country name" of countries
    if not rest or not readable(" ".join(rest)):  # "the values of the topics": a generic label says nothing
        return f"the {tname}"
    return f"the {plural(' '.join(rest))} of the {tname}"


def entity_np(table: TableProfile) -> str:
    return table_plural(table.name)


def join_sql(steps: list[tuple[str, Edge, str]], start: str) -> tuple[str, dict[str, str]]:
    """``FROM "a" AS T1 JOIN "b" AS T2 ON ...`` for a path from :meth:`SchemaAnalysis.path`."""
    aliases = {start: "T1"}
    parts = [f"FROM {q(start)} AS T1"]
    for frm, edge, to in steps:
        alias = f"T{len(aliases) + 1}"
        aliases[to] = alias
        a_from, a_to = aliases[frm], alias
        if edge.src == frm:
            cond = f"{a_from}.{q(edge.src_col)} = {a_to}.{q(edge.dst_col)}"
        else:
            cond = f"{a_from}.{q(edge.dst_col)} = {a_to}.{q(edge.src_col)}"
        parts.append(f"JOIN {q(to)} AS {alias} ON {cond}")
    return " ".join(parts), aliases


def bridge_join_sql(bridge: str, ta: TableProfile, ea: Edge, tb: TableProfile, eb: Edge) -> str:
    """``FROM bridge AS T1 JOIN ta AS T2 ... JOIN tb AS T3 ...`` for a many-to-many bridge."""
    return (
        f"FROM {q(bridge)} AS T1 JOIN {q(ta.name)} AS T2 ON T1.{q(ea.src_col)} = T2.{q(ea.dst_col)} "
        f"JOIN {q(tb.name)} AS T3 ON T1.{q(eb.src_col)} = T3.{q(eb.dst_col)}"
    )


def labelled_bridges(analysis: SchemaAnalysis) -> Iterator[tuple[str, Edge, TableProfile, Edge, TableProfile]]:
    """``(bridge, ea, ta, eb, tb)`` for each bridge table linking two labelled tables, both ways."""
    for bridge, e1, e2 in analysis.bridges():
        for ea, eb in ((e1, e2), (e2, e1)):
            ta, tb = analysis.table(ea.dst), analysis.table(eb.dst)
            if ta and tb and ta.label and tb.label:
                yield bridge, ea, ta, eb, tb


def thresholds(col, quantiles: tuple[float, ...], side: str = "upper") -> list:
    """Thresholds near the given sample quantiles of ``col`` that a person would say (increasing,
    no repeats): numbers rounded to 1-2 significant digits (or a half step: 185, 2,500,000), dates to
    the start of a year or month; a rounded value is kept only while it still splits the rows near
    the wanted quantile (±:data:`ROUND_TOLERANCE`). Years and small integers are said as they are.

    ``side="upper"`` keeps rows above (``col > t``: ``t`` is below the maximum), ``"lower"`` keeps
    rows below (``t`` above the minimum). ``col`` is a ColumnProfile or an Attr.
    """
    values = list(col.sample)
    if not values:
        return []
    distinct = sorted(set(values), key=values.index)
    if len(distinct) < 2:
        return []
    allowed = distinct[:-1] if side == "upper" else distinct[1:]
    lo, hi = allowed[0], allowed[-1]
    out = []
    for qn in quantiles:
        idx = min(len(values) - 1, max(0, int(round(qn * (len(values) - 1)))))
        v = values[idx]
        v = hi if _gt(v, hi) else lo if _gt(lo, v) else v
        v = round_threshold(v, values, qn, side)
        if not out or v != out[-1]:
            out.append(v)
    return out


ROUND_TOLERANCE = 0.1  # how far (as a share of rows) rounding may move a threshold's split


def _share_below(values: list, t) -> float:
    try:
        return sum(1 for v in values if v < t) / len(values)
    except TypeError:
        return -1.0


def _keeps_rows(values: list, t, side: str) -> bool:
    try:
        return any(v > t for v in values) if side == "upper" else any(v < t for v in values)
    except TypeError:
        return False


def round_threshold(v, values: list, qn: float, side: str = "upper"):
    """The roundest value near ``v`` that still splits ``values`` (sorted) near quantile ``qn``:
    8105162 → 8,000,000; 10.1067 → 10; '2013-02-13 05:15:21' → '2013-01-01'. ``v`` itself when no
    round value fits, or for years and integers up to 100 (already said as they are)."""
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        x = float(v)
        if x == 0 or (x.is_integer() and (abs(x) <= 100 or 1000 <= x <= 2200)):
            return v
        e = math.floor(math.log10(abs(x)))
        steps = [10.0**e, 5 * 10.0 ** (e - 1), 10.0 ** (e - 1), 5 * 10.0 ** (e - 2), 10.0 ** (e - 2)]
        cands = [round(x / st) * st for st in steps]
    elif isinstance(v, str) and _DATE_PREFIX.match(v):
        cands = [f"{v[:4]}-01-01", f"{v[:7]}-01", v[:10]]  # a year, a month, at least a day (no clock time)
    else:
        return v
    for t in cands:
        if isinstance(t, float):
            t = int(t) if t.is_integer() else float(f"{t:.6g}")
        if t == 0 and x != 0:
            continue
        # on a handful of rows one row moves the share by more than the tolerance: allow one row
        tol = max(ROUND_TOLERANCE, 1.5 / len(values)) if values else ROUND_TOLERANCE
        if _keeps_rows(values, t, side) and abs(_share_below(values, t) - qn) <= tol:
            return t
    return v


_DATE_PREFIX = re.compile(r"^\d{4}-\d{2}-\d{2}")


def is_round_number(v) -> bool:
    """Whether a person says ``v`` as it is: two significant digits (45, 2,500,000, 0.5), a half step
    (185), an integer up to 100 or a year; a date or text counts as said."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return True
    x = float(v)
    if x == 0 or (x.is_integer() and (abs(x) <= 100 or 1000 <= x <= 2200)):
        return True
    digits = f"{abs(x):.10g}".replace(".", "").lstrip("0").rstrip("0")
    return len(digits) <= 2 or (len(digits) == 3 and digits.endswith("5"))


def _gt(x, y) -> bool:
    try:
        return x > y
    except TypeError:
        return str(x) > str(y)


_NUMBER_SHAPE = re.compile(r"^[\d:.,\-+ ]+$")


def number_shaped(col) -> bool:
    """Text values that are numbers or times ('1:23.5', '8105'): a measurement, not a shared category."""
    vals = [v for v in getattr(col, "values", []) or [] if v is not None]
    return bool(vals) and all(isinstance(v, (int, float)) or _NUMBER_SHAPE.match(str(v).strip()) for v in vals)


def numeric_columns(table: TableProfile, min_distinct: int = 3) -> list[ColumnProfile]:
    """Numeric *measures* (see :func:`is_measure`) with at least ``min_distinct`` values."""
    return [
        c
        for c in table.columns
        if c.role == NUMERIC and c.distinct >= min_distinct and is_measure(c) and readable(c.words)
    ]


def temporal_columns(table: TableProfile, min_distinct: int = 3) -> list[ColumnProfile]:
    return [c for c in table.columns if c.role == TEMPORAL and c.distinct >= min_distinct and readable(c.words)]


_FREE_TEXT_WORDS = {"description", "comment", "comments", "note", "notes", "summary", "remark", "remarks", "text",
                    "details", "bio", "biography", "review", "message", "body", "content", "abstract"}  # fmt: skip


def is_free_text(col) -> bool:
    """A column of prose (descriptions, notes, long or truncated sentences): nobody has "the same
    description as mine" (issue #41b item 2)."""
    if set(col.words.lower().split()) & _FREE_TEXT_WORDS:
        return True
    texts = [str(v) for v in (col.values or col.examples or []) if isinstance(v, str)]
    return any(len(v.split()) > 4 or len(v) > 40 or v.rstrip().endswith(("...", "…")) for v in texts)


def categorical_columns(table: TableProfile, text_only: bool = False) -> list[ColumnProfile]:
    """Columns with a few repeated values; ``text_only`` keeps text ones (incl. numbers stored as
    text such as years '2008')."""
    return [
        c
        for c in table.columns
        if (c.role == CATEGORICAL or (c.role == NUMERIC and (c.text_number or not text_only)))
        and c.has_values
        and c.distinct <= 25
        and c.distinct < max(2, c.non_null)
        and not c.primary_key
        and not is_flag(c)
        and (c.role != NUMERIC or c.text_number or is_measure(c) or c.is_year)
        and readable(c.words)
        and not is_free_text(c)  # no "for each description", no "whose notes are 'Books and tea every...'"
    ]


def labelled_tables(analysis: SchemaAnalysis) -> list[TableProfile]:
    """Non-empty tables with a label column whose name is a noun (not ``Has_Pet`` or ``takes``)."""
    return [t for t in analysis.nonempty_tables if t.label and not is_relation_name(t.name)]


def noun_tables(analysis: SchemaAnalysis) -> list[TableProfile]:
    return [t for t in analysis.nonempty_tables if not is_relation_name(t.name)]


@dataclass(frozen=True)
class Attr:
    """An attribute of a table's rows: its own column (alias ``T1``) or a parent's label
    reached through a foreign key (alias ``P<i>``, with the ``join`` clause to add)."""

    expr: str
    words: str
    role: str
    values: tuple = ()
    sample: tuple = ()
    join: str = ""
    name: str = ""


def attributes(analysis: SchemaAnalysis, table: TableProfile) -> list[Attr]:
    """Non-key attributes of ``table`` usable in conditions, own columns first."""
    out: list[Attr] = []
    for c in table.columns:
        if c.is_key or c.role not in (NUMERIC, TEMPORAL, CATEGORICAL, TEXT) or c.name == table.label or is_flag(c):
            continue
        if c.role == NUMERIC and not (is_measure(c) or c.is_year):
            continue
        if not readable(c.words) or (c.role in (CATEGORICAL, TEXT) and is_free_text(c)):
            continue  # "whose in season is ...", "whose description is 'Books and tea every...'"
        out.append(Attr(c.expr("T1"), c.words, c.role, tuple(c.values), tuple(c.sample), "", c.name))
    for i, e in enumerate([e for e in analysis.out_edges(table.name) if e.dst != table.name]):
        parent = analysis.table(e.dst)
        if not parent or not parent.label:
            continue
        pl = parent.column(parent.label)
        if not pl or len(pl.values) < 2:
            continue
        alias = f"P{i + 1}"
        join = f"JOIN {q(parent.name)} AS {alias} ON T1.{q(e.src_col)} = {alias}.{q(e.dst_col)}"
        role = edge_role(analysis, e)
        if role == "linked" or (role and role_predicate(role, table_singular(parent.name))):
            continue  # a role with no readable name, or a verb ("lost in battle"), is no attribute noun
        words = role or table_singular(parent.name)
        if words.lower() in {w.lower() for w in [x.words for x in out]}:
            words = humanize(e.src_col).removesuffix(" id")
        out.append(
            Attr(
                f"{alias}.{q(parent.label)}",
                words,
                CATEGORICAL,
                tuple(pl.values),
                (),
                join,
                f"{parent.name}.{parent.label}",
            )
        )
    return out
