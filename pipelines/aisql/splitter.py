"""The SQL splitter (paper §3; spec §3.2): a query becomes a structural part and one AI part per call.

Deterministic AST splitter (the default, sqlglot):

* **structural part** — every AI call replaced by a typed constant (boolean operators → ``TRUE``,
  ``AI.SCORE`` → ``CAST(NULL AS DOUBLE)``, GENERATE/CLASSIFY → ``'<AI>'``); everything relational
  (CTEs, joins, DISTINCT, UNION kind, GROUP BY, ORDER BY, LIMIT) kept. The same rule on both sides
  means any S_g/S_c difference is relational. Known artefact, told to the judge: ``NOT AI.IF(..)``
  becomes ``NOT TRUE`` and a CASE over a call collapses to one branch.
* **AI part** per call — ``SELECT <key cols>, <input cols> FROM <only the sources those inputs
  reference> WHERE <call> [LIMIT of the call's SELECT]``; value operators put the call in the
  projection (``... , <call> AS ai_value``) instead. Two-input calls keep both aliases (a cross
  product, which split execution bounds with a probe set). Key columns come from the scenario
  (``reviewId``...) so A_g and A_c can be compared row by row.

The few-shot LLM splitter (paper's method) is :func:`llm_split`; :func:`split` falls back to it only
when asked (``fallback=council``) and the AST splitter fails.
"""

import json
from dataclasses import asdict, dataclass, field

from pydantic import BaseModel
from sqlglot import exp

from pipelines.aisql.prompts import splitter_messages
from pipelines.aisql.rewrite import AI_OPERATORS, SqlRewriteError, ai_calls, operator_name, prompt_text, to_duckdb_tree


@dataclass
class AIPart:
    index: int
    op: str
    kind: str  # bool | score | text | category
    sql: str  # runnable DuckDB SQL
    call_sql: str  # the call itself
    prompt: str  # literal prompt text
    sources: list[str]  # table names (or subquery aliases) the inputs come from
    aliases: list[str]
    input_columns: list[str]  # alias-qualified input columns
    key_columns: list[str]
    limit: int | None = None


@dataclass
class SplitResult:
    sql: str  # the full query, DuckDB form
    structural_sql: str
    ai_parts: list[AIPart] = field(default_factory=list)
    method: str = "ast"
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error

    def to_json(self) -> str:
        return json.dumps(asdict(self))


def placeholder(kind: str) -> exp.Expression:
    if kind == "bool":
        return exp.true()
    if kind == "score":
        return exp.cast(exp.null(), "DOUBLE")
    return exp.Literal.string("<AI>")


def _sources(select: exp.Select) -> list[tuple[str, exp.Expression]]:
    """(alias or name, source node) of the FROM and JOIN items of one SELECT."""
    items = []
    frm = select.args.get("from") or select.args.get("from_")
    if frm is not None:
        items.append(frm.this)
        items += list(frm.expressions or [])
    items += [j.this for j in select.args.get("joins") or []]
    out = []
    for node in items:
        if isinstance(node, exp.Table):
            out.append((node.alias_or_name, node))
        elif isinstance(node, (exp.Subquery, exp.Lateral)):
            out.append((node.alias_or_name, node))
        elif isinstance(node, exp.Expression):
            out.append((node.alias_or_name or "", node))
    return out


def _table_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Table):
        return ".".join(p for p in (node.db, node.name) if p)
    return node.alias_or_name


def _limit_value(select: exp.Select) -> int | None:
    lim = select.args.get("limit")
    if lim is None:
        return None
    e = lim.expression if lim.expression is not None else lim.this
    try:
        return int(e.name)
    except (AttributeError, TypeError, ValueError):
        return None


def _ctes(tree: exp.Expression) -> exp.With | None:
    w = tree.args.get("with") or tree.args.get("with_")
    return w.copy() if isinstance(w, exp.With) else None


def _structural(tree: exp.Expression) -> exp.Expression:
    def repl(node):
        name = operator_name(node) if isinstance(node, exp.Anonymous) else None
        return placeholder(AI_OPERATORS[name]) if name else node

    return tree.copy().transform(repl)


def _owner(op: str, col: exp.Column, select: exp.Select, table_columns: dict[str, list[str]] | None) -> str:
    """The FROM alias holding an unqualified input column when several tables are in FROM, from the
    scenario's schema; refused with the reason (never a cross join of every table) when there is no
    schema or the schema does not single one table out."""
    own = _sources(select)
    aliases = ", ".join(a for a, _ in own)
    if not table_columns:
        raise SqlRewriteError(
            f"{op}: input column {col.name} is unqualified and {len(own)} tables are in FROM "
            f"({aliases}); qualify it (e.g. {own[0][0]}.{col.name}) or give the schema"
        )
    holders, unknown = [], []
    for alias, node in own:
        cols = table_columns.get(_table_name(node).split(".")[-1].lower()) if isinstance(node, exp.Table) else None
        if cols is None:
            unknown.append(alias)
        elif col.name.lower() in {c.lower() for c in cols}:
            holders.append(alias)
    if len(holders) == 1 and not unknown:
        return holders[0]
    if len(holders) > 1:
        raise SqlRewriteError(f"{op}: input column {col.name} is in more than one of {aliases}; qualify it")
    raise SqlRewriteError(
        f"{op}: input column {col.name} is unqualified and the schema does not tell which of "
        f"{aliases} holds it; qualify it"
    )


def _ai_part(
    index: int,
    call: exp.Anonymous,
    tree: exp.Expression,
    key_columns: dict[str, tuple[str, ...]],
    table_columns: dict[str, list[str]] | None = None,
) -> AIPart:
    op = operator_name(call)
    kind = AI_OPERATORS[op]
    select = call.find_ancestor(exp.Select)
    if select is None:
        raise SqlRewriteError(f"{op} call outside a SELECT")
    sources = _sources(select)
    outer = select.parent
    while outer is not None:  # a correlated subquery's call may read an outer alias (animals Q6)
        if isinstance(outer, exp.Select):
            sources += [s for s in _sources(outer) if s[0].lower() not in {a.lower() for a, _ in sources}]
        outer = outer.parent
    cols = list(call.find_all(exp.Column, bfs=False))  # document order: r1 before r2
    own = _sources(select)
    used_aliases: list[str] = []
    for c in cols:
        alias = c.table
        if not alias and own:  # SQL resolves an unqualified column in the innermost FROM first
            alias = own[0][0] if len(own) == 1 else _owner(op, c, select, table_columns)
        if alias and alias not in used_aliases:
            used_aliases.append(alias)
    by_alias = {a.lower(): (a, n) for a, n in sources}
    picked = [by_alias[a.lower()] for a in used_aliases if a.lower() in by_alias]
    if not picked:
        own = _sources(select)
        picked = own[:1] if len(own) == 1 else own
    if not picked:
        raise SqlRewriteError(f"{op} call has no input table")
    inputs = []
    for c in cols:
        q = c.copy()
        if not q.table and len(own) > 1:  # resolved by the schema above
            q.set("table", exp.to_identifier(_owner(op, c, select, table_columns)))
        if not q.table and len(picked) == 1 and picked[0][0]:
            q.set("table", exp.to_identifier(picked[0][0]))
        if q.sql("duckdb") not in [i.sql("duckdb") for i in inputs]:
            inputs.append(q)
    keys = []
    for alias, node in picked:
        for k in key_columns.get(_table_name(node).lower(), ()):
            col = exp.column(k, table=alias or None)
            if col.sql("duckdb").lower() not in [i.sql("duckdb").lower() for i in inputs + keys]:
                keys.append(col)
    projection = keys + inputs
    call_copy = _structural_except(call)
    part = exp.select(*projection) if projection else exp.select(exp.Star())
    if kind != "bool":
        part = part.select(exp.alias_(call_copy.copy(), "ai_value"))
    first, rest = picked[0], picked[1:]
    part = part.from_(first[1].copy())
    for _, node in rest:
        part = part.join(node.copy(), join_type="CROSS")
    if kind == "bool":
        part = part.where(call_copy.copy())
    limit = _limit_value(select)
    order = select.args.get("order")
    if limit is not None and order is not None:  # ORDER BY AI.SCORE(...) LIMIT 5: the LIMIT needs its order
        names = {a.lower() for a, _ in picked}
        if all(
            (c.table or "").lower() in names or (not c.table and len(picked) == 1) for c in order.find_all(exp.Column)
        ):
            part.set("order", order.copy())
        else:
            limit = None  # a LIMIT without its ORDER BY would pick arbitrary rows: keep them all
    if limit is not None:
        part = part.limit(limit)
    with_ = _ctes(tree)
    if with_ is not None:
        names = {_table_name(n).lower() for _, n in picked}
        keep = [_structural_except_all(c) for c in with_.expressions if c.alias_or_name.lower() in names]
        if keep:
            part.set("with_" if "with_" in exp.Select.arg_types else "with", exp.With(expressions=keep))
    return AIPart(
        index=index,
        op=op,
        kind=kind,
        sql=part.sql("duckdb"),
        call_sql=call_copy.sql("duckdb"),
        prompt=prompt_text(call),
        sources=[_table_name(n) for _, n in picked],
        aliases=[a for a, _ in picked],
        input_columns=[i.sql("duckdb") for i in inputs],
        key_columns=[k.sql("duckdb") for k in keys],
        limit=limit,
    )


def _structural_except_all(node: exp.Expression) -> exp.Expression:
    """``node`` with every AI call replaced by its placeholder (a CTE copied into another call's AI
    part: one AI call per part, mmqa q2b)."""
    out = node.copy()
    for call in [n for n in out.walk() if isinstance(n, exp.Anonymous) and operator_name(n)]:
        if call.find_ancestor(exp.Anonymous) is None or not operator_name(call.find_ancestor(exp.Anonymous)):
            call.replace(placeholder(AI_OPERATORS[operator_name(call)]))
    return out


def _structural_except(call: exp.Anonymous) -> exp.Expression:
    """A call with any nested AI calls replaced by placeholders (nesting is rare; keeps parts single-call)."""
    inner = call.copy()
    for node in list(inner.walk()):
        if node is not inner and isinstance(node, exp.Anonymous) and operator_name(node):
            node.replace(placeholder(AI_OPERATORS[operator_name(node)]))
    return inner


def ast_split(
    sql: str,
    dialect: str,
    key_columns: dict[str, tuple[str, ...]] | None = None,
    table_columns: dict[str, list[str]] | None = None,
) -> SplitResult:
    tree = to_duckdb_tree(sql, dialect)
    calls = ai_calls(tree)
    parts, seen = [], set()
    for i, c in enumerate(calls):  # identical calls (movie ThalamusDB Q8's SELECT and GROUP BY) give one part
        text = c.sql("duckdb")
        if text not in seen:
            seen.add(text)
            parts.append(_ai_part(i, c, tree, key_columns or {}, table_columns))
    return SplitResult(sql=tree.sql("duckdb"), structural_sql=_structural(tree).sql("duckdb"), ai_parts=parts)


def split(
    sql: str,
    dialect: str,
    key_columns: dict[str, tuple[str, ...]] | None = None,
    *,
    fallback=None,
    table_columns: dict[str, list[str]] | None = None,
) -> SplitResult:
    """Split ``sql``; never raises: a failure is a SplitResult with ``error`` (and the LLM fallback's
    answer when ``fallback`` — a council — is given). ``table_columns`` (table name, lower case →
    columns) resolves an unqualified AI input column when several tables are in FROM."""
    try:
        return ast_split(sql, dialect, key_columns, table_columns)
    except SqlRewriteError as exc:
        if fallback is not None:
            res = llm_split(sql, dialect, fallback)
            if res.ok:
                return res
        return SplitResult(sql=sql, structural_sql="", error=str(exc))


@dataclass(frozen=True)
class AlignedCall:
    gold: int | None
    candidate: int | None
    repeat_of: int | None = None  # this side's call it repeats (same operator, prompt and input columns)

    @property
    def status(self) -> str:
        if self.repeat_of is not None:
            return "repeated_call"
        if self.gold is None:
            return "extra_ai_operator"
        if self.candidate is None:
            return "missing_ai_operator"
        return "paired"


def _signature(p: AIPart) -> tuple:
    cols = sorted(c.split(".")[-1].lower() for c in p.input_columns)
    tables = sorted(s.split(".")[-1].lower() for s in p.sources)
    return (tuple(tables), tuple(cols))


def call_identity(p: AIPart) -> tuple:
    """What makes two calls one function (#39 item 2): the operator, the prompt and the input
    columns' names, whatever alias or table (a CTE over the same table) a query reads them under:
    an AI call is a function of its prompt and input values, and whether the values are the right
    ones is the structural layer's question (it shares one unknown function between the calls)."""
    return (p.op, " ".join(p.prompt.split()), _signature(p)[1])


def _repeats(parts: list[AIPart]) -> dict[int, int]:
    """{index: index of the first call it repeats} within one query."""
    first: dict[tuple, int] = {}
    out = {}
    for i, p in enumerate(parts):
        k = call_identity(p)
        if k in first:
            out[i] = first[k]
        else:
            first[k] = i
    return out


def align_calls(gold: list[AIPart], cand: list[AIPart]) -> list[AlignedCall]:
    """Pair gold and candidate AI calls by (table, input columns), then by order (spec §3.2). A call
    that repeats another call of its own query (same operator, prompt and input columns, another
    alias) is that call, reported as ``repeated_call``, never as a missing or extra operator."""
    g_rep, c_rep = _repeats(gold), _repeats(cand)
    left_g = [i for i in range(len(gold)) if i not in g_rep]
    left_c = [i for i in range(len(cand)) if i not in c_rep]
    pairs = [AlignedCall(i, None, j) for i, j in g_rep.items()] + [AlignedCall(None, i, j) for i, j in c_rep.items()]
    for gi in list(left_g):
        for ci in left_c:
            if _signature(gold[gi]) == _signature(cand[ci]):
                pairs.append(AlignedCall(gi, ci))
                left_g.remove(gi)
                left_c.remove(ci)
                break
    while left_g and left_c:
        pairs.append(AlignedCall(left_g.pop(0), left_c.pop(0)))
    pairs += [AlignedCall(g, None) for g in left_g] + [AlignedCall(None, c) for c in left_c]
    return sorted(pairs, key=lambda a: (a.gold if a.gold is not None else 99, a.candidate or 0))


# ----------------------------------------------------------------------------- LLM splitter

SPLIT_EXAMPLES = [
    {
        "sql": "SELECT p.car_id FROM cars_dataset.car_m AS x JOIN cars_dataset.cars AS p ON p.car_id = x.car_id "
        "WHERE AI_IF('Returns true if the vehicle image contains both a puncture and paint scratches.' || x.image) LIMIT 100",
        "structural_sql": "SELECT p.car_id FROM cars_dataset.car_m AS x JOIN cars_dataset.cars AS p ON p.car_id = x.car_id WHERE TRUE LIMIT 100",
        "ai_parts": [
            "SELECT x.image FROM cars_dataset.car_m AS x WHERE AI_IF('Returns true if the vehicle image contains "
            "both a puncture and paint scratches.' || x.image) LIMIT 100"
        ],
    },
    {
        "sql": "SELECT car_id FROM cars WHERE make = 'TOYOTA' AND NLfilter(image, 'Is the color of this car red?')",
        "structural_sql": "SELECT car_id FROM cars WHERE make = 'TOYOTA' AND TRUE",
        "ai_parts": ["SELECT image FROM cars WHERE NLfilter(image, 'Is the color of this car red?')"],
    },
]


def llm_split(sql: str, dialect: str, council) -> SplitResult:
    """The paper's few-shot LLM splitter, structured JSON output, through the council layer."""

    class SplitAnswer(BaseModel):
        structural_sql: str
        ai_parts: list[str]

    res = council.ask(
        council.member_names[0],
        splitter_messages(sql, dialect, SPLIT_EXAMPLES),
        SplitAnswer,
        tag={"stage": "aisql_split"},
    )
    if not res.ok:
        return SplitResult(sql=sql, structural_sql="", method="llm", error=f"LLM splitter: {res.error or 'no answer'}")
    parts = [
        AIPart(
            index=i,
            op="",
            kind="bool",
            sql=s,
            call_sql="",
            prompt="",
            sources=[],
            aliases=[],
            input_columns=[],
            key_columns=[],
        )
        for i, s in enumerate(res.parsed.ai_parts)
    ]
    return SplitResult(sql=sql, structural_sql=res.parsed.structural_sql, ai_parts=parts, method="llm")
