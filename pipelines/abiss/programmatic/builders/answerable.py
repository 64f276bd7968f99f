"""Answerable questions: filters, aggregates, top-k and FK joins; and derived concepts whose
definition lives in the evidence ("senior students = more than 90 credits")."""

from __future__ import annotations

from collections.abc import Iterator

from pipelines.abiss.programmatic.builders.base import (
    CATEGORICAL,
    NUMERIC,
    TEMPORAL,
    TEXT,
    Ask,
    BuildContext,
    Draft,
    be,
    bridge_join_sql,
    categorical_columns,
    child_of,
    condition_phrase,
    edge_role,
    for_each_parent,
    is_placeholder,
    is_plural,
    is_relation_name,
    join_sql,
    label_np,
    labelled_bridges,
    labelled_tables,
    lit,
    numeric_columns,
    q,
    register,
    singular,
    table_plural,
    table_singular,
    temporal_columns,
    thresholds,
    value_text,
    with_article_or_plural,
)
from pipelines.abiss.programmatic.entity_kinds import column_kind, is_school_level
from pipelines.abiss.programmatic.phrasing import readable

# Concept adjectives for evidence definitions, chosen by what the column means: "heavy" only for a
# weight, "expensive" only for a price. A measure no entry fits gets the neutral "high-<column>"
# ("high-capacity stadiums"); a date or year gets "recent" / "early". (pattern, high, low)
FITTING_ADJECTIVES = (
    (("weight", "mass"), ("heavy", "light")),
    (("price", "cost", "fee", "charge"), ("expensive", "cheap")),
    (("salary", "wage", "pay", "income", "earnings"), ("well-paid", "low-paid")),
    (("age",), ("older", "younger")),
    (("height",), ("tall", "short")),
    (("length", "duration"), ("long", "short")),
    (("speed",), ("fast", "slow")),
    (("horsepower", "power"), ("powerful", "low-powered")),
    (("population",), ("populous", "sparsely populated")),
    (("capacity", "seats"), ("large", "small")),
    (("area", "size", "surface"), ("large", "small")),
    (("rating", "score", "points", "grade"), ("top-rated", "low-rated")),
    (("budget",), ("big-budget", "low-budget")),
    (("revenue", "sales", "profit"), ("high-revenue", "low-revenue")),
    (("attendance",), ("well-attended", "poorly attended")),
    (("experience",), ("experienced", "inexperienced")),
    (("temperature",), ("hot", "cold")),
    (("humidity",), ("humid", "dry")),
    (("precipitation", "rainfall"), ("wet", "dry")),
    (("distance", "mileage"), ("long-distance", "short-distance")),
    (("enrollment", "employees", "members", "staff"), ("large", "small")),
)
RECENT_CONCEPTS = ["recent", "latest", "newer"]
EARLY_CONCEPTS = ["early", "earlier", "older"]
# Dates whose meaning fits "recent" / "early" (when something began or appeared); a birth date
# takes "younger" / "older"; any other date (``date_left``, ``last_login``) defines no concept.
_ONSET_WORDS = {
    "release",
    "released",
    "publication",
    "published",
    "founded",
    "opened",
    "built",
    "start",
    "started",
    "created",
    "creation",
    "established",
    "launch",
    "launched",
    "hire",
    "hired",
    "joined",
    "join",
    "enrollment",
    "registration",
    "registered",
    "premiere",
    "debut",
    "year",
    "first",
    "issue",
    "issued",
    "made",
    "introduced",
    "since",
}


def date_concepts(words: str) -> tuple[list[str], list[str]] | None:
    """``(recent adjectives, early adjectives)`` fitting a date column, or None."""
    ws = set(words.lower().split())
    if ws & {"birth", "born", "dob"}:
        return ["younger"], ["older"]
    if ws & _ONSET_WORDS or ws == {"date"}:
        return RECENT_CONCEPTS, EARLY_CONCEPTS
    return None


def fitting_adjective(words: str, high: bool = True) -> tuple[str, bool]:
    """``(adjective, fits)`` for a measure named ``words``: a fitting adjective when one is known,
    else the neutral "high-<words>" / "low-<words>" (``fits`` False)."""
    ws = {w.lower() for w in words.split()} | {singular(w.lower()) for w in words.split()}
    for keys, (hi, lo) in FITTING_ADJECTIVES:
        if ws & set(keys):
            return (hi if high else lo), True
    return (f"high-{words.replace(' ', '-')}" if high else f"low-{words.replace(' ', '-')}"), False


def _answerable_drafts(ctx: BuildContext) -> Iterator[Draft]:
    a = ctx.analysis
    tables = ctx.shuffled(labelled_tables(a))
    plans = []
    for t in tables:
        label = t.label
        for c in categorical_columns(t):
            for v in c.values[:3]:
                plans.append(("filter", t, c, v))
                plans.append(("count", t, c, v))
        for c in numeric_columns(t):
            plans.append(("top", t, c, None))
            for g in categorical_columns(t, text_only=True):
                if g.name != c.name:
                    plans.append(("group_avg", t, c, g))
            th = thresholds(c, (0.5,))
            if th:
                plans.append(("above", t, c, th[0]))
        for e in a.children(t.name):
            child = a.table(e.src)
            if child and child.row_count:
                if child.label:
                    plans.append(("join", child, e, t))
                plans.append(("count_per_parent", child, e, t))
        for c in t.columns:
            if (
                c.name != label
                and not c.is_key
                and c.role in (NUMERIC, TEMPORAL, CATEGORICAL, TEXT)
                and readable(c.words)
            ):
                plans.append(("lookup", t, c, None))
        plans.append(("list_all", t, None, None))
    for bridge, ea, ta, eb, tb in labelled_bridges(a):
        plans.append(("many_to_many", ta, (bridge, ea, eb), tb))
    if not plans:
        ctx.unsupported("no table with a label column and a categorical, numeric or FK-linked column")
        return
    for kind, t, c, extra in ctx.shuffled(plans):
        style = ctx.next_style()
        tq, tn = q(t.name), table_plural(t.name)
        if kind == "filter":
            sql = f"SELECT {q(t.label)} FROM {tq} WHERE {q(c.name)} = {lit(extra)}"
            ask = Ask("list", target=f"{label_np(t)} {condition_phrase(c, extra)}")
        elif kind == "count":
            sql = f"SELECT COUNT(*) FROM {tq} WHERE {q(c.name)} = {lit(extra)}"
            ask = Ask("count", subject=f"{tn} {condition_phrase(c, extra)}")
        elif kind == "top":
            sql = f"SELECT {q(t.label)} FROM {tq} WHERE {q(c.name)} IS NOT NULL ORDER BY {c.expr()} DESC LIMIT 3"
            ask = Ask(
                "list", target=f"{label_np(t).replace('the ' + tn, 'the three ' + tn, 1)} with the highest {c.words}"
            )
        elif kind == "group_avg":
            g = extra
            sql = f"SELECT {q(g.name)}, AVG({c.expr()}) FROM {tq} GROUP BY {q(g.name)}"
            ask = Ask("list", target=f"the average {c.words} of the {tn} for each {singular(g.words)}", singular=True)
        elif kind == "above":
            sql = f"SELECT {q(t.label)} FROM {tq} WHERE {c.expr()} > {lit(extra)}"
            ask = Ask("list", target=f"{label_np(t)} whose {c.words} {be(c.words)} greater than {value_text(extra)}")
        elif kind == "join":
            child, edge, parent = t, c, extra
            frm, al = join_sql([(child.name, edge, parent.name)], child.name)
            vals = [
                r
                for r in ctx.rows(f"SELECT DISTINCT {al[parent.name]}.{q(parent.label)} {frm} ORDER BY 1 LIMIT 25")
                if not is_placeholder(r[0])
            ][:20]
            if not vals:
                continue
            v = ctx.rng.choice(vals)[0]
            sql = f"SELECT {al[child.name]}.{q(child.label)} {frm} WHERE {al[parent.name]}.{q(parent.label)} = {lit(v)}"
            if edge_role(a, edge) == "linked":
                continue  # a role without a readable name cannot be said
            ask = Ask("list", target=f"{label_np(child)} {child_of(a, edge, value_text(v))}")
        elif kind == "count_per_parent":
            child, edge, parent = t, c, extra
            if is_relation_name(child.name) or child.name in {b for b, _, _ in a.bridges()}:
                continue  # "the number of has pets / farms animals for each ..." is no English
            if edge_role(a, edge) == "linked":
                continue  # a key with no readable name ("CATID"): "for each category as linked" is no English
            frm, al = join_sql([(child.name, edge, parent.name)], child.name)
            # grouped by the parent's key (two applicants may share a first name), shown by its label
            pa = al[parent.name]
            sql = (
                f"SELECT {pa}.{q(parent.label)}, COUNT(*) {frm} GROUP BY {pa}.{q(edge.dst_col)}, {pa}.{q(parent.label)}"
            )
            ask = Ask(
                "list",
                target=f"the number of {table_plural(child.name)} {for_each_parent(a, edge)}",
                singular=True,
            )
        elif kind == "lookup":
            rows = ctx.rows(
                f"SELECT {q(t.label)} FROM {tq} WHERE {q(t.label)} IS NOT NULL AND {q(c.name)} IS NOT NULL "
                f"GROUP BY {q(t.label)} HAVING COUNT(*) = 1 ORDER BY 1 LIMIT 20"
            )
            if not rows:
                continue
            rows = [r for r in rows if not is_placeholder(r[0])]
            if not rows:
                continue
            v = ctx.rng.choice(rows)[0]
            sql = f"SELECT {q(c.name)} FROM {tq} WHERE {q(t.label)} = {lit(v)}"
            ask = Ask(
                "list",
                target=f"the {c.words} of the {table_singular(t.name)} {value_text(v)}",
                singular=not is_plural(c.words),
            )
        elif kind == "list_all":
            sql = f"SELECT {q(t.label)} FROM {tq}"
            ask = Ask("list", target=f"{label_np(t).replace('the ' + tn, 'all the ' + tn, 1)}")
        elif kind == "many_to_many":
            ta, (bridge, ea, eb), tb = t, c, extra
            frm = bridge_join_sql(bridge, ta, ea, tb, eb)
            vals = ctx.top_values(f"T2.{q(ta.label)}", frm, 8)
            if not vals:
                continue
            v = ctx.rng.choice(vals)
            sql = f"SELECT T3.{q(tb.label)} {frm} WHERE T2.{q(ta.label)} = {lit(v)}"
            ask = Ask("list", target=f"{label_np(tb)} linked to the {table_singular(ta.name)} {value_text(v)}")
        else:  # pragma: no cover
            continue
        yield Draft("answerable", f"answerable.{kind}", ctx.say(ask, style), style, sql=sql)


def _subject(adj: str, tn: str) -> str:
    """ "heavy dogs" for an adjective; a full phrase ("museums with a large number of staff") as is."""
    return adj if adj.startswith(tn + " ") else f"{adj} {tn}"


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def generic_degree(c, high: bool = True) -> str:
    """The plain degree word for a measure no adjective fits: "large"/"small" for a count or an
    amount of things ("a large number of staff"), "high"/"low" for any other measure ("a high dock
    count" reads as a count, "a high mean humidity"); never "considerable" or "modest", which a
    reader takes for a concept (issue #41 item 2)."""
    words = c.words.lower().split()
    if column_kind(c) == "count" and words[:2] == ["number", "of"]:
        return "large" if high else "small"
    return "high" if high else "low"


def concept_measure(c) -> bool:
    """A measure where high/low means something (an amount, a count, a size), not a rank (high rank
    = low number), a year, a code or a version (issue #35: "high-weekly-rank", "notable templates
    whose version number ...")."""
    words = c.words.lower().split()
    if set(words) & {"year", "version", "episode", "rank", "ranking", "position", "seed", "order", "phone"}:
        return False
    if "number" in words and words[0] != "number":
        return False  # a block, room or phone number names a thing, it measures nothing
    if is_school_level(c):
        return False  # grade 9..12 is a school year, not a rating
    return column_kind(c) in ("money", "measure", "count")


@register("answerable", "answerable.templates")
def build_answerable(ctx: BuildContext) -> Iterator[Draft]:
    yield from _answerable_drafts(ctx)


@register("answerable_with_evidence", "answerable_with_evidence.concept")
def build_with_evidence(ctx: BuildContext) -> Iterator[Draft]:
    a = ctx.analysis
    plans = []
    for t in labelled_tables(a):
        for c in numeric_columns(t):
            plans.append((t, c, "num"))
        for c in temporal_columns(t):
            plans.append((t, c, "date"))
    if not plans:
        ctx.unsupported("no labelled table with a numeric measure or a date column to define a concept on")
        return
    for t, c, kind in ctx.shuffled(plans):
        style = ctx.next_style()
        tn = table_plural(t.name)
        col = c.words
        if kind == "num":
            if c.is_year:
                kind = "date"
            else:
                if is_school_level(c):
                    continue  # "top-rated high-schoolers" by their school year
                th = thresholds(c, (ctx.rng.choice([0.6, 0.7, 0.75, 0.8]),))
                if not th:
                    continue
                adj, fit = fitting_adjective(col, high=True)
                if not fit:
                    if not concept_measure(c):
                        continue  # "high-weekly-rank TV series", "high-indep-year countries": no concept
                    adj = f"{tn} with {with_article_or_plural(generic_degree(c, high=True) + ' ' + col)}"
                cond = f"{c.expr()} > {lit(th[0])}"
                evidence = f"{_cap(_subject(adj, tn))} are {tn} whose {col} {be(col)} greater than {value_text(th[0])}."
        if kind == "date":
            concepts = date_concepts(col)
            if concepts is None:
                continue  # "newer students are students whose date left is ..." defines nothing
            early = ctx.rng.random() < 0.4
            th = thresholds(c, (0.3 if early else 0.7,), side="lower" if early else "upper")
            if not th:
                continue
            adj = ctx.rng.choice(concepts[1] if early else concepts[0])
            op, rel = ("<", "before") if early else (">=", "on or after")
            expr = c.expr() if c.role == NUMERIC else q(c.name)
            cond = f"{expr} {op} {lit(th[0])}"
            evidence = f"{_cap(_subject(adj, tn))} are {tn} whose {col} {be(col)} {rel} {value_text(th[0])}."
        if ctx.rng.random() < 0.5:
            sql = f"SELECT COUNT(*) FROM {q(t.name)} WHERE {cond}"
            ask = Ask("count", subject=_subject(adj, tn))
        else:
            sql = f"SELECT {q(t.label)} FROM {q(t.name)} WHERE {cond}"
            np = label_np(t).replace(f"the {tn}", f"the {_subject(adj, tn)}", 1)
            ask = Ask("list", target=np)
        yield Draft(
            "answerable_with_evidence",
            f"answerable_with_evidence.{kind}",
            ctx.say(ask, style),
            style,
            sql=sql,
            evidence=evidence,
        )
