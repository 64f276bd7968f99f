"""Semantic mapping ambiguity: lexical overlap (two columns of one table sharing a head noun,
``personal_email`` / ``institutional_email``) and entity ambiguity (the same column name in two
joinable tables, ``students.enrollment_date`` / ``student_courses.enrollment_date``)."""

from __future__ import annotations

from collections.abc import Iterator

from pipelines.abiss.programmatic.builders.base import (
    IDENTIFIER,
    Ask,
    BuildContext,
    Draft,
    Reading,
    categorical_columns,
    condition_phrase,
    join_sql,
    lit,
    numeric_columns,
    plural,
    q,
    register,
    singular,
    table_plural,
    table_singular,
    table_words,
    thresholds,
    value_text,
    with_article_or_plural,
)
from pipelines.abiss.programmatic.phrasing import UNIT_WORDS

_NAME_PARTS = {"first", "last", "middle", "given", "family", "sur", "maiden"}
_WEAK_HEADS = {"by", "of", "in", "on", "at", "to", "is", "if", "yn", "old", "new", "code", "details", "other"}


@register("lexical_overlap", "lexical_overlap.head_noun")
def build_lexical_overlap(ctx: BuildContext) -> Iterator[Draft]:
    a = ctx.analysis
    plans = []
    for tname, head, cols in a.head_noun_groups():
        if head in _WEAK_HEADS or head in UNIT_WORDS or len(head) < 3:
            continue  # "the inches of the weather records": a unit is no head noun
        if head == "name" and all(c.words.split()[0] in _NAME_PARTS for c in cols):
            continue  # "the names of the students" means the full name, not a first or last name
        t = a.table(tname)
        if not t or not t.row_count:
            continue
        for i, c1 in enumerate(cols):
            for c2 in cols[i + 1 :]:
                if c1.role == IDENTIFIER and c2.role == IDENTIFIER:
                    # both keys: they must reference the same labelled table (eye/hair colour)
                    e1 = next((e for e in a.out_edges(t.name) if e.src_col == c1.name), None)
                    e2 = next((e for e in a.out_edges(t.name) if e.src_col == c2.name), None)
                    if e1 and e2 and e1.dst == e2.dst and a.table(e1.dst) and a.table(e1.dst).label:
                        plans.append((t, head, c1, c2, e1, e2))
                elif c1.role != IDENTIFIER and c2.role != IDENTIFIER and c1.role == c2.role:
                    plans.append((t, head, c1, c2, None, None))
    if not plans:
        ctx.unsupported("no table has two comparable columns sharing a head noun")
        return
    for t, head, c1, c2, e1, e2 in ctx.shuffled(plans):
        filters = [("", "")]
        for c in categorical_columns(t, text_only=True):
            if c.name not in (c1.name, c2.name):
                for v in c.values[:2]:
                    filters.append((f" WHERE T1.{q(c.name)} = {lit(v)}", f" {condition_phrase(c, v)}"))
        where, phrase = ctx.rng.choice(filters)
        if e1 is not None:
            ref = a.table(e1.dst)
            sqls = [
                f"SELECT T2.{q(ref.label)} FROM {q(t.name)} AS T1 JOIN {q(ref.name)} AS T2 ON T1.{q(e.src_col)} = T2.{q(e.dst_col)}{where}"
                for e in (e1, e2)
            ]
        else:
            sqls = [f"SELECT T1.{q(c.name)} FROM {q(t.name)} AS T1{where}" for c in (c1, c2)]
        style = ctx.next_style()
        tn = table_plural(t.name)
        np = f"the {plural(head)} of the {tn}{phrase}"
        readings = [
            Reading(s, f"'{plural(head)}' means the {c.words.removesuffix(' id')} ({t.name}.{c.name}).")
            for s, c in zip(sqls, (c1, c2))
        ]
        yield Draft(
            "lexical_overlap",
            "lexical_overlap.head_noun",
            ctx.say(Ask("list", target=np), style),
            style,
            readings=readings,
        )


@register("entity_ambiguity", "entity_ambiguity.same_named_column")
def build_entity_ambiguity(ctx: BuildContext) -> Iterator[Draft]:
    a = ctx.analysis
    plans = []
    for ca, cb in a.same_named_columns():
        ta, tb = a.table(ca.table), a.table(cb.table)
        path = a.path(ta.name, tb.name, max_edges=3)
        if path is None:
            continue
        # the table the question filters on: a labelled table on the path or next to its ends
        on_path = [ta.name] + [s[2] for s in path]
        for fname in sorted({n for n in on_path} | {nb for end in (ta.name, tb.name) for nb, _ in a.neighbours(end)}):
            ft = a.table(fname)
            if not ft or not ft.label:
                continue
            if fname in on_path:
                steps, start = path, ta.name
            else:
                end = tb.name if any(nb == fname for nb, _ in a.neighbours(tb.name)) else ta.name
                extra = a.path(end, fname, max_edges=1)
                if not extra:
                    continue
                if end == tb.name:
                    steps, start = path + extra, ta.name
                else:
                    back = a.path(tb.name, ta.name, max_edges=3)
                    steps, start = (back or []) + extra, tb.name
                    if back is None:
                        continue
            if not a.path_is_relational(steps):
                continue  # professors → department ← students: siblings, not one entity's context
            if fname in (ca.table, cb.table):
                continue  # "the credits of the student 'Ethan'" already names whose credits
            plans.append((ca, cb, steps, start, ft, None))
        # a linking row between the two (flights between airlines and airports, visits between
        # museums and visitors): filter on its own column, naming neither entity
        for _frm, _e, mid in path[:-1]:
            mt = a.table(mid)
            if mt is None or mt.name in (ta.name, tb.name):
                continue
            ends = {singular(w) for x in (ta, tb) for w in table_words(x.name).lower().split()}
            if {singular(w) for w in table_words(mt.name).lower().split()} & ends:
                continue  # "the credits of the student courses ..." names the courses
            for fc in categorical_columns(mt) + [c for c in numeric_columns(mt) if c.distinct > 25]:
                if not fc.is_key:
                    plans.append((ca, cb, path, ta.name, mt, fc))
    if not plans:
        pairs = a.same_named_columns()
        ctx.unsupported(
            "no same-named non-key column in two joinable tables"
            if not pairs
            else f"same-named columns ({pairs[0][0].qualified}, {pairs[0][1].qualified}) but no third table "
            "to ask through that names neither (a labelled table on their path or a linking row with its own attribute)"
        )
        return
    for ca, cb, steps, start, ft, fcol in ctx.shuffled(plans):
        frm, al = join_sql(steps, start)
        if ft.name not in al or ca.table not in al or cb.table not in al:
            continue
        flab = f"{al[ft.name]}.{q(fcol.name if fcol is not None else ft.label)}"
        above = fcol is not None and fcol.distinct > 25  # a measure of the linking row: a threshold
        if above:
            ths = thresholds(fcol, (0.5,))
            vals = ths
            flab = fcol.expr(al[ft.name])
        else:
            vals = ctx.top_values(flab, frm, 5)
        if not vals:
            continue
        v = ctx.rng.choice(vals)
        cmp = ">" if above else "="
        sqls = [f"SELECT {al[c.table]}.{q(c.name)} {frm} WHERE {flab} {cmp} {lit(v)}" for c in (ca, cb)]
        style = ctx.next_style()
        col = ca.words
        # the question names neither table holding the column: naming one ("the names of the stadiums
        # of the concert 'Week 1'") would already pick the reading
        link = ctx.rng.choice(["for", "related to", "associated with"])
        if fcol is None:
            np = f"the {plural(col)} {link} the {table_singular(ft.name)} {value_text(v)}"
        else:
            cond = (
                f"with {with_article_or_plural(fcol.words)} above {value_text(v)}"
                if above
                else condition_phrase(fcol, v)
            )
            np = f"the {plural(col)} {link} the {table_plural(ft.name)} {cond}"
        readings = [
            Reading(s, f"'{col}' refers to the {table_singular(c.table)}'s {col} ({c.table}.{c.name}).")
            for s, c in zip(sqls, (ca, cb))
        ]
        yield Draft(
            "entity_ambiguity",
            "entity_ambiguity.same_named_column",
            ctx.say(Ask("list", target=np), style),
            style,
            readings=readings,
        )
