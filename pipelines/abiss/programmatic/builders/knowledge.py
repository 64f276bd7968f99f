"""Knowledge-driven ambiguity: lexical vagueness, missing user knowledge, conflicting knowledge."""

from __future__ import annotations

from collections.abc import Iterator

from pipelines.abiss.programmatic.builders.answerable import (
    FITTING_ADJECTIVES,
    concept_measure,
    date_concepts,
    fitting_adjective,
    generic_degree,
)
from pipelines.abiss.programmatic.builders.base import (
    ROLE_VERBS,
    TEMPORAL,
    Ask,
    BuildContext,
    Draft,
    Reading,
    be,
    categorical_columns,
    edge_role,
    is_free_text,
    is_round_number,
    join_sql,
    label_np,
    labelled_tables,
    lit,
    numeric_columns,
    q,
    register,
    role_head,
    singular,
    table_plural,
    table_singular,
    temporal_columns,
    thresholds,
    value_text,
    with_article_or_plural,
)
from pipelines.abiss.programmatic.phrasing import with_article

_PLACE_LIKE = {
    "region",
    "city",
    "country",
    "state",
    "department",
    "district",
    "area",
    "town",
    "province",
    "neighbourhood",
    "neighborhood",
    "county",
    "continent",
    "location",
    "zone",
}
# quantiles of the two readings: far apart, so the readings differ by a real share of rows
# (the driver also checks that share, see pipelines.abiss.programmatic._verify)
VAGUE_QUANTILES = {"high": (0.4, 0.8), "low": (0.2, 0.6), "recent": (0.4, 0.8)}


def _recent_fits(words: str) -> bool:
    concepts = date_concepts(words)
    return concepts is not None and "younger" not in concepts[0]


def _vague_word(col, kind: str) -> tuple[str, bool]:
    """``(word, adjective_alone)``: a fitting adjective says it alone ("heavy cars", "old students");
    otherwise the plain degree qualifies the column ("cars with a high engine displacement")."""
    ws = {w.lower() for w in col.words.split()}
    for keys, (hi, lo) in FITTING_ADJECTIVES:
        if ws & set(keys) and " " not in hi and "-" not in hi:
            return (lo if kind == "low" else hi), True
    return generic_degree(col, high=kind != "low"), False


VAGUE_RECENT = ["recent", "latest", "new"]


@register("lexical_vagueness", "lexical_vagueness.threshold")
def build_vagueness(ctx: BuildContext) -> Iterator[Draft]:
    plans = []
    for t in labelled_tables(ctx.analysis):
        for c in numeric_columns(t, min_distinct=4):
            if c.is_year and not _recent_fits(c.words):
                continue
            if not c.is_year and not concept_measure(c):
                continue  # "conductors with a considerable year of work", "a high weekly rank"
            plans.append((t, c, "recent" if c.is_year else ctx.rng.choice(["high", "high", "low"])))
        for c in temporal_columns(t):
            if _recent_fits(c.words):  # "a recent date left" means nothing
                plans.append((t, c, "recent"))
    if not plans:
        ctx.unsupported("no numeric or date column with at least 4 distinct values in a labelled table")
        return
    for t, c, kind in ctx.shuffled(plans):
        style = ctx.next_style()
        tn, col = table_plural(t.name), c.words
        ths = thresholds(c, VAGUE_QUANTILES[kind], side="lower" if kind == "low" else "upper")
        op = "<" if kind == "low" else ">=" if kind == "recent" else ">"
        if len(ths) < 2:
            continue
        if kind == "recent":
            word = ctx.rng.choice(VAGUE_RECENT)
            only = len([x for x in t.columns if x.role == TEMPORAL or x.is_year]) == 1
            subject = f"{word} {tn}" if only else f"{tn} with {with_article(word + ' ' + col)}"
            hk = [f"'{word}' means {with_article_or_plural(col)} on or after {value_text(th)}." for th in ths]
        else:
            word, alone = _vague_word(c, kind)
            if alone:
                subject, term = f"{word} {tn}", word
            else:
                subject, term = f"{tn} with {with_article_or_plural(word + ' ' + col)}", f"{word} {col}"
            rel = "below" if kind == "low" else "above"
            hk = [f"'{term}' means {with_article_or_plural(col)} {rel} {value_text(th)}." for th in ths]
        readings = [
            Reading(f"SELECT {q(t.label)} FROM {q(t.name)} WHERE {c.expr()} {op} {lit(th)}", h)
            for th, h in zip(ths, hk)
        ]
        if ctx.rng.random() < 0.3:
            ask = Ask("count", subject=subject)
            readings = [
                Reading(r.sql.replace(f"SELECT {q(t.label)} ", "SELECT COUNT(*) ", 1), r.hidden_knowledge)
                for r in readings
            ]
        else:
            ask = Ask("which", subject=subject)
        yield Draft("lexical_vagueness", f"lexical_vagueness.{kind}", ctx.say(ask, style), style, readings=readings)


def role_phrase(key_words: str, parent: str, role: str | None = None) -> str:
    """How rows relate to "my <parent>" through a key column: ``Winning_Aircraft`` → "won by my
    aircraft", ``lost_in_battle`` → "lost in my battle", ``current_address_id`` → "whose current
    address is mine", a key named like its parent → "of my aircraft"."""
    words = key_words.lower().split()
    if words[-1:] == ["id"] and len(words) > 1:
        words = words[:-1]
    head = singular(parent.lower().split()[-1]) if parent.split() else ""
    if role and words and singular(words[-1]) != head and len(words) == 1:
        return f"with the same {role} as mine"  # Advisor → faculty: "with the same advisor as mine"
    if not words or [singular(w) for w in words] == [singular(w) for w in parent.lower().split()]:
        return f"of my {parent}"
    if singular(words[-1]) == head and len(words) > 1:
        mods = words[:-1]
        if len(mods) == 1 and mods[0] in ROLE_VERBS:
            return f"{ROLE_VERBS[mods[0]]} my {parent}"
        if mods[-1] in {"in", "by", "at", "for", "from", "to", "with", "on"}:
            return f"{' '.join(mods)} my {parent}"  # lost in my battle
        return f"whose {key_words} is mine"
    return f"of my {parent}"


def identifies(parent) -> bool:
    """Whether a parent's label names one row (a bank, a department): only then is "my <parent>"
    something a user has. A repeating label (a flight shown by its origin airport) is a property of
    the parent, and "my flight is 'JFK'" says a role nobody said (issue #41b item 2)."""
    lab = parent.column(parent.label) if parent.label else None
    if lab is None or lab.non_null == 0 or lab.distinct < 0.95 * lab.non_null:
        return False
    ws = {singular(w) for w in lab.words.lower().split()}
    # a name says which row; a place with a role (a flight's origin airport) only describes it
    return bool(ws & {"name", "title", "label", "number", "code"} or ws <= set(table_singular(parent.name).split()))


@register("missing_user_knowledge", "missing_user_knowledge.my_value")
def build_user_knowledge(ctx: BuildContext) -> Iterator[Draft]:
    a = ctx.analysis
    plans = []
    for t in labelled_tables(a):
        for c in categorical_columns(t, text_only=True):
            if is_free_text(c):
                continue
            if c.name != t.label and len(c.values) >= 2 and singular(c.words) != table_singular(t.name):
                plans.append(("column", t, c, None))  # not "event spaces with the same event space as mine"
        for e in a.out_edges(t.name):
            parent = a.table(e.dst)
            if parent and parent.label and parent.name != t.name and identifies(parent):
                plans.append(("parent", t, e, parent))
    if not plans:
        ctx.unsupported("no categorical column or FK-linked labelled parent to personalise ('my X')")
        return
    for kind, t, c, parent in ctx.shuffled(plans):
        style = ctx.next_style()
        if kind == "column":
            a_vals = c.values[:4]
            if len(a_vals) < 2:
                continue
            v1, v2 = ctx.rng.sample(a_vals, 2)
            what = c.words
            sqls = [f"SELECT {q(t.label)} FROM {q(t.name)} WHERE {q(c.name)} = {lit(v)}" for v in (v1, v2)]
            np = f"{label_np(t)} with the same {what} as mine"
            if ctx.rng.random() < 0.5 and set(what.split()) & _PLACE_LIKE:
                np = f"{label_np(t)} in my {what}"
        else:
            edge = c
            frm, al = join_sql([(t.name, edge, parent.name)], t.name)
            vals = ctx.top_values(f"{al[parent.name]}.{q(parent.label)}", frm, 6)
            if len(vals) < 2:
                continue
            v1, v2 = ctx.rng.sample(vals, 2)
            what = table_singular(parent.name)
            sqls = [
                f"SELECT {al[t.name]}.{q(t.label)} {frm} WHERE {al[parent.name]}.{q(parent.label)} = {lit(v)}"
                for v in (v1, v2)
            ]
            # the key column says the parent's role: Winning_Aircraft → "won by my aircraft",
            # Advisor → "with the same advisor as mine" (not "of my faculty member")
            role = edge_role(a, edge)
            if role == "linked":
                continue
            np = f"{label_np(t)} {role_phrase(role or t.column(edge.src_col).words, what, role)}"
            if role and not role_head(role, what) and np.endswith(f"of my {what}"):
                np = f"{label_np(t)} with the same {role} as mine"
            if role:
                what = role  # "the user's end station is ...", not "the user's station"
        readings = [Reading(s, f"The user's {what} {be(what)} {value_text(v)}.") for s, v in zip(sqls, (v1, v2))]
        yield Draft(
            "missing_user_knowledge",
            f"missing_user_knowledge.{kind}",
            ctx.say(Ask("list", target=np), style),
            style,
            readings=readings,
        )


@register("conflicting_knowledge", "conflicting_knowledge.two_definitions")
def build_conflicting(ctx: BuildContext) -> Iterator[Draft]:
    """Two definitions of one concept whose adjective fits what both columns measure ("an expensive
    product is one whose price is above 50" / "... above 100"; "large" by capacity or by area). A
    measure no adjective fits defines no concept: no "standout station" by latitude, no "notable
    student" by age (issue #41 item 2)."""
    plans = []
    for t in labelled_tables(ctx.analysis):
        conds = []
        for c in numeric_columns(t):
            if not concept_measure(c):
                continue
            adj, fit = fitting_adjective(c.words, high=True)
            if not fit:
                continue
            for qn in (0.5, 0.65, 0.85):
                th = thresholds(c, (qn,))
                if th and is_round_number(th[0]):  # "greater than 322" is no definition a person writes
                    conds.append(
                        (
                            f"{c.expr()} > {lit(th[0])}",
                            f"{c.words} {be(c.words)} greater than {value_text(th[0])}",
                            c.name,
                            qn,
                            adj,
                        )
                    )
        pairs = [(c1, c2) for i, c1 in enumerate(conds) for c2 in conds[i + 1 :] if c1[2] != c2[2] and c1[4] == c2[4]]
        if not pairs:
            # one measure: two definitions that disagree on its threshold ("more than 90 credits" vs
            # "more than 120"), at distant quantiles so the readings differ
            pairs = [
                (c1, c2)
                for i, c1 in enumerate(conds)
                for c2 in conds[i + 1 :]
                if c1[2] == c2[2] and c1[0] != c2[0] and abs(c1[3] - c2[3]) >= 0.3
            ]
        plans += [(t, c1, c2) for c1, c2 in pairs]
    if not plans:
        ctx.unsupported("no labelled table with a measure an adjective fits, at two distinct thresholds")
        return
    for t, c1, c2 in ctx.shuffled(plans):
        style = ctx.next_style()
        tn, ts = table_plural(t.name), table_singular(t.name)
        adj = c1[4]
        defs = [f"{with_article(adj + ' ' + ts).capitalize()} is one whose {c[1]}." for c in (c1, c2)]
        evidence = " ".join(defs)
        count = ctx.rng.random() < 0.4
        sel = "COUNT(*)" if count else q(t.label)
        readings = [
            Reading(f"SELECT {sel} FROM {q(t.name)} WHERE {c[0]}", f"Use the definition: {d}")
            for c, d in zip((c1, c2), defs)
        ]
        ask = (
            Ask("count", subject=f"{adj} {tn}")
            if count
            else Ask("list", target=label_np(t).replace(f"the {tn}", f"the {adj} {tn}", 1))
        )
        yield Draft(
            "conflicting_knowledge",
            "conflicting_knowledge.two_definitions",
            ctx.say(ask, style),
            style,
            evidence=evidence,
            readings=readings,
        )
