"""Structural ambiguity: scope (collective vs distributive quantifier) and attachment (a modifier
attached to the last conjunct only, or to all of them)."""

from __future__ import annotations

from collections.abc import Iterator

from pipelines.abiss.programmatic.builders.base import (
    CATEGORICAL,
    NUMERIC,
    TEMPORAL,
    Ask,
    BuildContext,
    Draft,
    Reading,
    attributes,
    be,
    bridge_join_sql,
    categorical_columns,
    child_of_each,
    condition_phrase,
    edge_role,
    is_relation_name,
    join_sql,
    label_np,
    labelled_bridges,
    labelled_tables,
    lit,
    number_shaped,
    plural,
    q,
    register,
    same_content,
    table_plural,
    table_singular,
    thresholds,
    value_text,
    with_article_or_plural,
)

QUANTIFIERS = ["each", "every"]


@register("scope_ambiguity", "scope_ambiguity.collective_distributive")
def build_scope(ctx: BuildContext) -> Iterator[Draft]:
    a = ctx.analysis
    plans = []
    # one-to-many: parent A, child C (C references A), a categorical column of C
    for e in a.edges:
        parent, child = a.table(e.dst), a.table(e.src)
        if not parent or not child or parent.name == child.name or not parent.label or not child.row_count:
            continue
        if is_relation_name(child.name) or is_relation_name(parent.name):
            continue  # "the grades of the takes of every course": a relationship table is no noun
        if edge_role(a, e) == "linked":
            continue  # the key's role has no readable name
        for c in categorical_columns(child, text_only=True):
            if c.name == e.src_col or c.is_key or c.role == NUMERIC or number_shaped(c):
                continue  # "the ages shared by all breeds", a collective price of 9.99: no shared property
            frm, al = join_sql([(child.name, e, parent.name)], child.name)
            plans.append(
                dict(
                    kind="one_to_many",
                    frm=frm,
                    value=f"{al[child.name]}.{q(c.name)}",
                    key=f"{al[parent.name]}.{q(parent.primary_key[0] if len(parent.primary_key) == 1 else e.dst_col)}",
                    alabel=f"{al[parent.name]}.{q(parent.label)}",
                    atable=parent,
                    aalias=al[parent.name],
                    np=lambda quant, post, child=child, c=c, e=e: (
                        f"the {plural(c.words)} of the {table_plural(child.name)} {child_of_each(a, e, quant, post)}"
                    ),
                    what=plural(c.words),
                )
            )
    # many-to-many through a bridge table: A ← bridge → B, B's label
    for bridge, ea, ta, eb, tb in labelled_bridges(a):
        plans.append(
            dict(
                kind="many_to_many",
                frm=bridge_join_sql(bridge, ta, ea, tb, eb),
                value=f"T3.{q(tb.label)}",
                key=f"T2.{q(ea.dst_col)}",
                alabel=f"T2.{q(ta.label)}",
                atable=ta,
                aalias="T2",
                np=lambda quant, post, ta=ta, tb=tb: (
                    f"the {table_plural(tb.name)} of {quant} {table_singular(ta.name)}{post}"
                ),
                what=table_plural(tb.name),
            )
        )
    if not plans:
        ctx.unsupported("no one-to-many or many-to-many relationship with a categorical or labelled side")
        return
    yielded = 0
    for plan in ctx.shuffled(plans):
        # optional filter on A's categorical columns so the collective reading is non-empty
        filters = [("", "")]
        for c in categorical_columns(plan["atable"], text_only=False)[:6]:
            for v in c.values[:8]:
                filters.append(
                    (
                        f" WHERE {plan['aalias']}.{q(c.name)} = {lit(v)}",
                        f" {condition_phrase(c, v)}",
                    )
                )
        for where, phrase in filters:
            # the collective reading quantifies over every row of the named set, not only those with
            # linked rows: "every faculty member in room 119" divides by all 20 in the room, not by
            # the 4 who advise students (issue #41 item 6)
            named_set = f"FROM {q(plan['atable'].name)} AS {plan['aalias']}{where}"
            collective = (
                f"SELECT {plan['value']} {plan['frm']}{where} GROUP BY {plan['value']} "
                f"HAVING COUNT(DISTINCT {plan['key']}) = (SELECT COUNT(DISTINCT {plan['key']}) {named_set})"
            )
            if not ctx.rows(collective):
                continue
            # group on a unique key: two parents sharing a name must not merge into one "each"
            lab = plan["atable"].column(plan["atable"].label)
            unique = lab is not None and lab.distinct >= plan["atable"].row_count
            keys = plan["alabel"] if unique else f"{plan['key']}, {plan['alabel']}"
            distributive = f"SELECT DISTINCT {keys}, {plan['value']} {plan['frm']}{where}"
            if same_content(ctx.rows(collective), ctx.rows(distributive)):
                continue  # every parent has the same values: both readings say the same
            style = ctx.next_style()
            quant = ctx.rng.choice(QUANTIFIERS)
            aname = table_singular(plan["atable"].name)
            np = plan["np"](quant, phrase)  # the filter modifies the quantified parent
            readings = [
                Reading(
                    collective,
                    f"Collective reading: the {plan['what']} shared by all the {plural(aname)}{phrase} together (common to every one of them).",
                ),
                Reading(
                    distributive,
                    f"Distributive reading: for every {aname}{phrase} separately, list its {plan['what']}.",
                ),
            ]
            yielded += 1
            yield Draft(
                "scope_ambiguity",
                f"scope_ambiguity.{plan['kind']}",
                ctx.say(Ask("list", target=np), style),
                style,
                readings=readings,
            )
            break
    if not yielded:
        ctx.unsupported(f"the collective reading is empty for all {len(plans)} relationship(s) and filters tried")


@register("attachment_ambiguity", "attachment_ambiguity.modifier")
def build_attachment(ctx: BuildContext) -> Iterator[Draft]:
    a = ctx.analysis
    plans = []
    # siblings: A and B both reference parent P ("the professors and the students in engineering")
    by_parent: dict[str, list] = {}
    for e in a.edges:
        by_parent.setdefault(e.dst, []).append(e)
    sibling_pairs = []
    for parent_edges in by_parent.values():
        # a parent with hundreds of children would give quadratically many pairs: a few suffice
        kids = parent_edges if len(parent_edges) <= 12 else ctx.rng.sample(parent_edges, 12)
        for i, e1 in enumerate(kids):
            for e2 in kids[i + 1 :]:
                sibling_pairs.append((e1, e2))
    for e1, e2 in sibling_pairs:
        if e1.src == e2.src:
            continue
        ta, tb, tp = a.table(e1.src), a.table(e2.src), a.table(e1.dst)
        if not (ta and tb and tp and ta.label and tb.label and tp.label) or tp.name in (ta.name, tb.name):
            continue
        if any(is_relation_name(x.name) for x in (ta, tb, tp)):
            continue
        if edge_role(a, e1) or edge_role(a, e2):
            continue  # "the trips and the stations of the city X" would leave a key's role unsaid
        plans.append(("siblings", ta, e1, tb, e2, tp))
        plans.append(("siblings", tb, e2, ta, e1, tp))
    # one table: "whose c is v1 or v2 with a n above x" (c may be a parent's label)
    for t in labelled_tables(a):
        attrs = attributes(a, t)
        # conjuncts a person would list: categories, years, small counts/ratings (not "population 8982000")
        conj = [
            x
            for x in attrs
            # three values at least: "whose sex is 'M' or 'F'" is true of every row
            if 3 <= len(x.values) <= 25
            and (
                x.role == CATEGORICAL
                or (
                    x.role == NUMERIC
                    and all(
                        isinstance(v, (int, float))
                        and float(v).is_integer()
                        and 0 <= v <= 20
                        or 1000 <= float(v) <= 2200
                        for v in x.values
                    )
                )
            )
        ]
        mods = [
            x
            for x in attrs
            if (x.role in (NUMERIC, TEMPORAL) and len(x.sample) >= 3) or (x.role == CATEGORICAL and len(x.values) >= 2)
        ]
        for c in conj:
            for m in mods:
                if m.expr != c.expr:
                    plans.append(("coordination", t, c, m, None, None))
    if not plans:
        ctx.unsupported(
            "no two tables sharing a parent and no table with a categorical attribute plus a second condition"
        )
        return
    for plan in ctx.shuffled(plans):
        style = ctx.next_style()
        if plan[0] == "siblings":
            _, ta, ea, tb, eb, tp = plan
            # child AS T1 JOIN parent AS T2 (the edge runs child -> parent)
            a_frm, b_frm = (join_sql([(t.name, e, tp.name)], t.name)[0] for t, e in ((ta, ea), (tb, eb)))
            vals = ctx.top_values(f"T2.{q(tp.label)}", b_frm, 5)
            if not vals:
                continue
            v = ctx.rng.choice(vals)
            a_all = f"SELECT {q(ta.label)} FROM {q(ta.name)}"
            a_f = f"SELECT T1.{q(ta.label)} {a_frm} WHERE T2.{q(tp.label)} = {lit(v)}"
            b_f = f"SELECT T1.{q(tb.label)} {b_frm} WHERE T2.{q(tp.label)} = {lit(v)}"
            an, bn, pn = table_plural(ta.name), table_plural(tb.name), table_singular(tp.name)
            mod = f"of the {pn} {value_text(v)}"
            np = f"the {an} and the {bn} {mod}"
            readings = [
                Reading(f"{a_all} UNION ALL {b_f}", f"'{mod}' modifies only the {bn}; all {an} are listed."),
                Reading(f"{a_f} UNION ALL {b_f}", f"'{mod}' modifies both the {an} and the {bn}."),
            ]
            kind = "siblings"
        else:
            _, t, c, m, _, _ = plan
            v1, v2 = ctx.rng.sample(list(c.values[:4]), 2)
            if m.role in (NUMERIC, TEMPORAL):
                th = thresholds(m, (ctx.rng.choice([0.3, 0.5, 0.7]),))
                if not th:
                    continue
                x = th[0]
                op = ">"
                mod = f"with {with_article_or_plural(m.words)} {'above' if m.role == NUMERIC else 'after'} {value_text(x)}"
            else:
                x = ctx.rng.choice(list(m.values[:3]))
                op = "="
                mod = f"with {m.words} {value_text(x)}"
            joins = " ".join(dict.fromkeys(j for j in (c.join, m.join) if j))
            np = f"{label_np(t)} whose {c.words} {be(c.words)} {value_text(v1)} or {value_text(v2)} {mod}"
            base = f"SELECT T1.{q(t.label)} FROM {q(t.name)} AS T1{' ' + joins if joins else ''} WHERE "
            readings = [
                Reading(
                    f"{base}{c.expr} = {lit(v1)} OR ({c.expr} = {lit(v2)} AND {m.expr} {op} {lit(x)})",
                    f"'{mod}' applies only to the {value_text(v2)} ones; all {value_text(v1)} ones are included.",
                ),
                Reading(
                    f"{base}({c.expr} = {lit(v1)} OR {c.expr} = {lit(v2)}) AND {m.expr} {op} {lit(x)}",
                    f"'{mod}' applies to both the {value_text(v1)} and the {value_text(v2)} ones.",
                ),
            ]
            kind = "coordination"
        yield Draft(
            "attachment_ambiguity",
            f"attachment_ambiguity.{kind}",
            ctx.say(Ask("list", target=np), style),
            style,
            readings=readings,
        )
