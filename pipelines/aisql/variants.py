"""Controlled variants of a gold query, labelled by construction and tagged ``{layer, type}`` (spec §12.3).

Equivalent (label True): ``paraphrase`` (the prompt reworded, same concept), ``alias_rename``,
``join_form`` (JOIN … ON ↔ comma join + WHERE), ``conjunct_order``, ``count_key`` (COUNT(*) ↔
COUNT(key), for the keys passed in: give only declared keys, which hold no NULL, or the label is
wrong on a database where the key is NULL).
Relational errors (False): ``distinct_added``/``distinct_dropped``, ``union_kind``, ``wrong_literal``,
``dropped_filter``, ``wrong_limit``.
AI errors (False): ``negated_intent``, ``changed_concept``, ``wrong_column``, ``ai_removed``.

A variant type that does not apply to a query (no LIMIT, no alias, ...) yields nothing. Variants are
rendered back in the gold's dialect (BigQuery: ``AI.IF(prompt || column)``), so candidates look like
what a generator writes. Whether a variant visibly changes the result on this data is *measured*
(``changes_result``), not assumed: a missing DISTINCT on data without duplicates is still wrong.
"""

import re
from dataclasses import dataclass

from sqlglot import exp

from pipelines.aisql.rewrite import AI_OPERATORS, ai_calls, operator_name, to_duckdb_tree, unmark_data
from pipelines.aisql.splitter import placeholder

EQUIVALENT = ("paraphrase", "alias_rename", "join_form", "conjunct_order", "count_key")
RELATIONAL = ("distinct_added", "distinct_dropped", "union_kind", "wrong_literal", "dropped_filter", "wrong_limit")
AI_ERRORS = ("negated_intent", "changed_concept", "wrong_column", "ai_removed")
VARIANT_TYPES = EQUIVALENT + RELATIONAL + AI_ERRORS

# Rewordings that keep the concept (the paper's running example first); generic fallback below.
PARAPHRASES = [
    (r"determine if the following movie review is clearly positive, review:\s*", "Is this review positive? Review: "),
    (r"the review sentiment is positive", "the review expresses a positive opinion of the movie"),
    (
        r"these two movie reviews express the same sentiment - either both are positive or both are negative",
        "both reviews share the same sentiment (both positive or both negative)",
    ),
    (
        r"these two movie reviews express opposite sentiments - one is positive and the other is negative",
        "the two reviews have opposite sentiments: one is positive, the other negative",
    ),
    (r"patient with these symptoms has an allergy", "These symptoms indicate that the patient has an allergy"),
    (r"patient has an allergy", "the symptoms point to an allergy"),
    (r"patient with these symptoms has skin acne", "These symptoms indicate skin acne"),
    (r"patient has a skin acne", "the symptoms point to skin acne"),
]
CHANGED_CONCEPT = "Does this text mention the director or a named person? Text: "


@dataclass(frozen=True)
class Variant:
    layer: str  # none | relational | ai
    type: str
    label: bool
    sql: str  # in the gold's dialect


@dataclass(frozen=True)
class VariantSettings:
    vocabulary: dict  # scenario vocabulary (term -> label)
    wrong_columns: dict  # input column -> another text column of the same table
    alternative_literals: dict  # string literal -> another existing value


def _render(tree: exp.Expression, dialect: str) -> str:
    tree = unmark_data(tree)  # the data delimiters are the rewrite's, not the query's
    if dialect == "thalamusdb":
        return tree.sql("duckdb")
    sql = tree.sql("bigquery")
    return re.sub(r"\b(?i:AI_(IF|SCORE|GENERATE|CLASSIFY))\(", lambda m: f"AI.{m.group(1).upper()}(", sql)


def _prompt_literals(call: exp.Anonymous) -> list[exp.Literal]:
    name = operator_name(call)
    args = list(call.expressions)
    prompt = args[-1] if name in ("nlfilter", "nljoin") else args[0]
    return [lit for lit in prompt.find_all(exp.Literal, bfs=False) if lit.is_string and lit.this.strip()]


def _edit_prompts(tree: exp.Expression, fn) -> exp.Expression | None:
    """Apply fn(text) -> new text to the first prompt literal of every call; None if nothing changed."""
    t = tree.copy()
    changed = False
    for call in ai_calls(t):
        lits = _prompt_literals(call)
        if not lits:
            continue
        new = fn(lits[0].this)
        if new is not None and new != lits[0].this:
            lits[0].replace(exp.Literal.string(new))
            changed = True
    return t if changed else None


def _paraphrase(text: str) -> str:
    for pat, rep in PARAPHRASES:
        if re.search(pat, text, re.IGNORECASE):
            return re.sub(pat, rep, text, count=1, flags=re.IGNORECASE)
    return "In other words: " + text


def _negate(text: str, vocabulary: dict) -> str | None:
    low = text.lower()
    if re.search(r"\bsame\b", low):
        return re.sub(r"(?i)\bthe same sentiment\b", "opposite sentiments", text, count=1)
    if re.search(r"\bopposite\b", low):
        return re.sub(r"(?i)\bopposite sentiments\b", "the same sentiment", text, count=1)
    labels = sorted(set(vocabulary.values()))
    for term in sorted(vocabulary, key=len, reverse=True):
        m = re.search(r"\b" + re.escape(term) + r"\b", text, re.IGNORECASE)
        if not m:
            continue
        if len(labels) == 2:  # a two-valued concept: ask for the other value
            other = next(t for t, lab in vocabulary.items() if lab != vocabulary[term])
            return text[: m.start()] + other + text[m.end() :]
        return re.sub(r"(?i)\b(?:an?\s+|the\s+)?" + re.escape(term) + r"\b", "no " + term, text, count=1)
    return None


def _where_conjuncts(select: exp.Select) -> list[exp.Expression]:
    where = select.args.get("where")
    return (
        list(where.this.flatten())
        if where is not None and isinstance(where.this, exp.And)
        else ([where.this] if where is not None else [])
    )


def _has_ai(node: exp.Expression) -> bool:
    return any(isinstance(n, exp.Anonymous) and operator_name(n) for n in node.walk())


def _set_where(select: exp.Select, conjuncts: list[exp.Expression]) -> None:
    if not conjuncts:
        select.set("where", None)
        return
    cond = conjuncts[0]
    for c in conjuncts[1:]:
        cond = exp.and_(cond, c)
    select.set("where", exp.Where(this=cond))


def _main_select(tree: exp.Expression) -> exp.Select | None:
    return tree if isinstance(tree, exp.Select) else tree.find(exp.Select)


def make_variants(gold_sql: str, dialect: str, settings: VariantSettings, key_columns: dict) -> list[Variant]:
    tree = to_duckdb_tree(gold_sql, dialect)
    out: list[Variant] = []

    def add(layer, vtype, label, t):
        if t is not None:
            out.append(Variant(layer, vtype, label, _render(t, dialect)))

    # --- equivalent ---------------------------------------------------------------------
    add("none", "paraphrase", True, _edit_prompts(tree, _paraphrase))
    tables = [t for t in tree.find_all(exp.Table) if t.alias]
    if tables:
        t = tree.copy()
        mapping = {tb.alias: f"{tb.alias}_x" for tb in tables}
        for tb in t.find_all(exp.Table):
            if tb.alias in mapping:
                tb.set("alias", exp.TableAlias(this=exp.to_identifier(mapping[tb.alias])))
        for col in t.find_all(exp.Column):
            if col.table in mapping:
                col.set("table", exp.to_identifier(mapping[col.table]))
        add("none", "alias_rename", True, t)
    sel = _main_select(tree)
    joins = sel.args.get("joins") if sel is not None else None
    if sel is not None and joins and all(j.args.get("on") is not None for j in joins):
        t = tree.copy()
        s = _main_select(t)
        extra = []
        for j in s.args["joins"]:
            extra.append(j.args["on"])
            j.set("on", None)
            j.set("kind", None)
            j.set("side", None)
        # comma join: FROM a, b WHERE <on> AND <where>
        s.set("joins", [exp.Join(this=j.this) for j in s.args["joins"]])
        _set_where(s, extra + _where_conjuncts(s))
        add("none", "join_form", True, t)
    if sel is not None and len(_where_conjuncts(sel)) >= 2:
        t = tree.copy()
        s = _main_select(t)
        _set_where(s, list(reversed(_where_conjuncts(s))))
        add("none", "conjunct_order", True, t)
    if sel is not None:
        count = next((c for c in sel.find_all(exp.Count) if isinstance(c.this, exp.Star)), None)
        if count is not None:
            frm = sel.args.get("from") or sel.args.get("from_")
            tb = frm.this if frm is not None else None
            keys = (
                key_columns.get(".".join(p for p in (tb.db, tb.name) if p).lower(), ())
                if isinstance(tb, exp.Table)
                else ()
            )
            if keys:
                t = tree.copy()
                c2 = next(c for c in _main_select(t).find_all(exp.Count) if isinstance(c.this, exp.Star))
                c2.set("this", exp.column(keys[0], table=tb.alias or None))
                add("none", "count_key", True, t)

    # --- relational errors --------------------------------------------------------------
    if sel is not None:
        t = tree.copy()
        s = _main_select(t)
        if s.args.get("distinct"):
            s.set("distinct", None)
            add("relational", "distinct_dropped", False, t)
        elif not any(e.find(exp.AggFunc) for e in s.expressions) and not s.args.get("group"):
            # (DISTINCT over an aggregate row or a GROUP BY changes nothing: not an error)
            s.set("distinct", exp.Distinct())
            add("relational", "distinct_added", False, t)
    union = tree.find(exp.Union)
    if union is not None:
        t = tree.copy()
        u = t.find(exp.Union)
        u.set("distinct", not u.args.get("distinct"))
        add("relational", "union_kind", False, t)
    for lit in tree.find_all(exp.Literal):
        if lit.is_string and lit.this in settings.alternative_literals and isinstance(lit.parent, exp.EQ):
            t = tree.copy()
            for l2 in t.find_all(exp.Literal):
                if l2.is_string and l2.this == lit.this:
                    l2.replace(exp.Literal.string(settings.alternative_literals[lit.this]))
            add("relational", "wrong_literal", False, t)
            break
    if sel is not None:
        conj = _where_conjuncts(sel)
        plain = [i for i, c in enumerate(conj) if not _has_ai(c)]
        # prefer a filter on a literal (id = 'taken_3'): dropping it is wrong on any data
        plain.sort(key=lambda i: not (isinstance(conj[i], exp.EQ) and conj[i].find(exp.Literal) is not None))
        if plain and len(conj) >= 2:
            # drop the filter together with its copies on other aliases (R1.id = 'x' AND R2.id = 'x')
            first = conj[plain[0]]
            lit = first.find(exp.Literal) if isinstance(first, exp.EQ) else None
            drop = {
                i
                for i in plain
                if i == plain[0]
                or (lit is not None and isinstance(conj[i], exp.EQ) and conj[i].find(exp.Literal) == lit)
            }
            t = tree.copy()
            s = _main_select(t)
            _set_where(s, [c for i, c in enumerate(_where_conjuncts(s)) if i not in drop])
            add("relational", "dropped_filter", False, t)
        lim = sel.args.get("limit")
        if lim is not None:
            t = tree.copy()
            s = _main_select(t)
            e = s.args["limit"].expression or s.args["limit"].this
            try:
                n = int(e.name)
                s.set("limit", exp.Limit(expression=exp.Literal.number(n + 5)))
                add("relational", "wrong_limit", False, t)
            except (TypeError, ValueError, AttributeError):
                pass

    # --- AI errors ------------------------------------------------------------------------
    add("ai", "negated_intent", False, _edit_prompts(tree, lambda s: _negate(s, settings.vocabulary)))
    add("ai", "changed_concept", False, _edit_prompts(tree, lambda s: CHANGED_CONCEPT))
    calls = ai_calls(tree)
    if calls:
        cols = {c.name for c in calls[0].find_all(exp.Column)}
        wrong = {c: settings.wrong_columns[c] for c in cols if c in settings.wrong_columns}
        if wrong:
            t = tree.copy()
            for call in ai_calls(t):
                for col in call.find_all(exp.Column):
                    if col.name in wrong:
                        col.set("this", exp.to_identifier(wrong[col.name]))
            add("ai", "wrong_column", False, t)
        t = tree.copy()
        for call in ai_calls(t):
            call.replace(placeholder(AI_OPERATORS[operator_name(call)]))
        add("ai", "ai_removed", False, t)
    return out
