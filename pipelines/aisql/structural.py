"""Sound comparison of the structural (relational) parts of a gold and a candidate query.

The paper's structural part replaces every AI call by ``TRUE``; that is only faithful when the call
is a top-level conjunct. Under OR (``id = 'x' OR TRUE``), NOT (``NOT TRUE``), ``= FALSE``, CASE or
``NOT EXISTS`` the placeholder changes what the rest of the query means, so comparing S_g and S_c
results could pass a wrong literal or fail an equivalent query. This module instead asks the
question the relational layer is meant to answer:

    *If the aligned AI calls behaved identically, would gold and candidate return the same rows
    on this database?*

Each AI call becomes an unknown function of its input columns (a *valuation*). Aligned gold and
candidate calls share one unknown (optionally with opposite *polarity*: a candidate may write
``AI.IF(negative)`` where the gold writes ``NOT AI.IF(positive)``); identical calls within one query
share one too. A call is replaced, wherever it sits, by an SQL expression computing the valuation
from the call's own input columns, so its position (OR, NOT, CASE, correlated subquery) is kept.

Verdicts (never a guess):

* ``equal`` — proven on every database and for every AI behaviour: the two queries are identical
  once the aligned calls are identified, or share one normal form.
* ``equal_on_database`` — evidence, not a proof (#39 item 1): they differ only in per-row
  expressions that agree on every row *of this database* under every truth assignment of the AI
  calls, or every valuation of the AI calls was enumerated on this database. A filter the shipped
  rows happen to satisfy (``p.age >= 18``) passes both rules, so neither ever accepts.
* ``differ`` — a concrete valuation (a function of the inputs, the same for both queries) under
  which the results differ, for every polarity choice: no behaviour of the AI calls can make the
  candidate's structure give the gold's answer in general.
* ``cannot_decide`` — with the reason: agreed under every sampled valuation but the input domain
  is too large to enumerate; unpaired or mismatched AI calls (the AI layer reports those); a part
  that does not run.

Results are compared as bags, in order where the gold has a top-level ORDER BY (:func:`rows_match`).
"""

import itertools
import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from sqlglot import exp

from pipelines.aisql.diffs import differing_rows, rows_match
from pipelines.aisql.normal_form import normal_form
from pipelines.aisql.rewrite import AI_OPERATORS, operator_name

EQUAL, DIFFER, CANNOT = "equal", "differ", "cannot_decide"
# evidence, never a proof (#39 item 1, spec §5.5): agreement checked on this database only, or also on
# the generated test-suite databases; the judge counts both apart and never accepts on them
EQUAL_HERE, EQUAL_SUITE = "equal_on_database", "equal_on_test_suite"
PROOF_METHODS = ("syntactic", "normal_form")
MAX_EXHAUSTIVE_BITS = 10  # at most 2**10 valuations per polarity when enumerating every AI behaviour
HASH_SAMPLES = 6
MAX_POLARITY_PAIRS = 3


@dataclass
class StructuralVerdict:
    verdict: str  # equal | differ | cannot_decide
    reason: str
    method: str = ""  # syntactic | rowwise | exhaustive | witness | sampled | -
    polarity: list[str] = field(default_factory=list)  # per aligned boolean pair: same | opposite
    valuations: int = 0
    witness: dict = field(default_factory=dict)
    polarity_inputs: list[str] = field(default_factory=list)  # the input columns of each polarity pair

    def to_dict(self) -> dict:
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "method": self.method,
            "polarity": self.polarity,
            "polarity_inputs": self.polarity_inputs,
            "valuations": self.valuations,
            "witness": self.witness,
        }


# ----------------------------------------------------------------------------- symbols


@dataclass
class _Sym:
    key: str  # shared by an aligned gold/candidate pair
    kind: str  # bool | score | text | category


def top_calls(tree: exp.Expression) -> list[exp.Expression]:
    """AI calls not nested inside another AI call, in document order."""
    out = []
    for n in tree.walk(bfs=False):
        if isinstance(n, exp.Anonymous) and operator_name(n):
            anc = n.parent
            nested = False
            while anc is not None:
                if isinstance(anc, exp.Anonymous) and operator_name(anc):
                    nested = True
                    break
                anc = anc.parent
            if not nested:
                out.append(n)
    return out


def call_text(call: exp.Expression) -> str:
    """The call's text with its columns unqualified: the same prompt over the same column under two
    aliases (an outer query and its correlated subquery) is one function of the values (#39 item 2)."""
    c = call.copy()
    for col in c.find_all(exp.Column):
        col.set("table", None)
    return c.sql("duckdb", copy=False)  # c is our copy: no second one


_CALLS_MEMO: ContextVar[dict | None] = ContextVar("aisql_calls_memo", default=None)


@contextmanager
def calls_memo():
    """Within: each tree's AI calls are listed (and their texts written) once, however often the
    layers ask (#39 item 6: rewriting the texts was a third of a pair's time). The caller does not
    change a tree it passed in while the memo is open; every rewrite here works on a copy."""
    token = _CALLS_MEMO.set({})
    try:
        yield
    finally:
        _CALLS_MEMO.reset(token)


def _calls(tree: exp.Expression) -> tuple[list[str], list[int], list[exp.Expression]]:
    """(distinct call texts in document order, symbol index of every top call, the top calls)."""
    memo = _CALLS_MEMO.get()
    hit = memo.get(("calls", id(tree))) if memo is not None else None
    if hit is not None and hit[0] is tree:  # the tree is held, so its id is not reused
        return hit[1]
    texts: list[str] = []
    idx = []
    calls = top_calls(tree)
    for c in calls:
        t = call_text(c)
        if t not in texts:
            texts.append(t)
        idx.append(texts.index(t))
    out = (texts, idx, calls)
    if memo is not None:
        memo[("calls", id(tree))] = (tree, out)
    return out


def call_symbols(tree: exp.Expression) -> tuple[list[str], list[int]]:
    """(distinct call texts in document order, symbol index of every top call). Identical calls
    (movie Q8's SELECT and GROUP BY copies, or one prompt on one column under two aliases) are one
    unknown."""
    texts, idx, _ = _calls(tree)
    return list(texts), list(idx)


def _calls_by_text(tree: exp.Expression) -> dict[str, exp.Expression]:
    """{call text: the last top call with that text}."""
    texts, idx, calls = _calls(tree)
    return {texts[i]: c for c, i in zip(calls, idx)}


def _inputs(call: exp.Expression) -> list[exp.Column]:
    """The call's distinct input columns (copies, to read or copy again: never attach them)."""
    memo = _CALLS_MEMO.get()
    hit = memo.get(("inputs", id(call))) if memo is not None else None
    if hit is not None and hit[0] is call:
        return list(hit[1])
    seen, out = set(), []
    for col in call.find_all(exp.Column, bfs=False):
        s = col.sql("duckdb")
        if s not in seen:
            seen.add(s)
            out.append(col.copy())
    if memo is not None:
        memo[("inputs", id(call))] = (call, out)
    return list(out)


def _key_expr(key: str, salt, cols: list[exp.Column]) -> exp.Expression:
    args = [exp.Literal.string(key), exp.Literal.string(str(salt))]
    args += [exp.cast(c.copy(), "VARCHAR") for c in cols]
    return exp.Anonymous(this="hash", expressions=args)


def _kind_of(call: exp.Expression) -> str:
    return AI_OPERATORS[operator_name(call)]


def _literals(trees, kind: str) -> list:
    vals = set()
    for t in trees:
        for lit in t.find_all(exp.Literal):
            if kind in ("text", "category") and lit.is_string:
                vals.add(lit.this)
            elif kind == "score" and not lit.is_string:
                try:
                    vals.add(float(lit.this))
                except ValueError:
                    pass
    if kind == "score":
        vals |= {v + 0.5 for v in list(vals)} | {v - 0.5 for v in list(vals)} | {0.0, 1.0, 5.0}
        return sorted(vals)
    return sorted(vals) + ["<other AI answer>"]


# ----------------------------------------------------------------------------- valuations


@dataclass(frozen=True)
class Valuation:
    """How every unknown is valued: ('const', bool|index), ('hash', salt) or ('set', {key: hashes})."""

    mode: str
    arg: object = None
    label: str = ""


def _bool_expr(key: str, val: Valuation, cols) -> exp.Expression:
    if val.mode == "const":
        v = val.arg[key] if isinstance(val.arg, dict) else val.arg
        return exp.true() if v else exp.false()
    if val.mode == "hash":
        return exp.EQ(
            this=exp.Mod(this=_key_expr(key, val.arg, cols), expression=exp.Literal.number(2)),
            expression=exp.Literal.number(0),
        )
    # set: TRUE exactly for the listed input hashes
    hashes = sorted(val.arg.get(key, ()))
    if not hashes:
        return exp.false()
    return exp.In(this=_key_expr(key, "set", cols), expressions=[exp.Literal.number(h) for h in hashes])


def _value_expr(sym: _Sym, val: Valuation, cols, domain: list, call_kind: str, flip: bool) -> exp.Expression:
    """The valued call; NULL when an input is NULL, as the UDF (DuckDB skips NULL inputs)."""
    value = _raw_value_expr(sym, val, cols, domain, call_kind, flip)
    if not cols:
        return value
    null = exp.or_(*[exp.Is(this=c.copy(), expression=exp.Null()) for c in cols])
    return exp.Case(ifs=[exp.If(this=null, true=exp.cast(exp.Null(), _SQL_TYPE[call_kind]))], default=value)


_SQL_TYPE = {"bool": "BOOLEAN", "score": "DOUBLE", "text": "VARCHAR", "category": "VARCHAR"}


def _raw_value_expr(sym: _Sym, val: Valuation, cols, domain: list, call_kind: str, flip: bool) -> exp.Expression:
    if sym.kind == "bool":
        b = _bool_expr(sym.key, val, cols)
        if flip:
            b = exp.Not(this=exp.Paren(this=b))
        if call_kind == "bool":
            return exp.Paren(this=b)
        # a text call paired with a boolean one (AI.GENERATE(... TRUE or FALSE) = 'TRUE')
        return exp.Case(ifs=[exp.If(this=b, true=exp.Literal.string("TRUE"))], default=exp.Literal.string("FALSE"))
    lits = [exp.Literal.string(v) if isinstance(v, str) else exp.cast(exp.Literal.number(v), "DOUBLE") for v in domain]
    if val.mode == "const":
        i = 0 if not (val.arg if not isinstance(val.arg, dict) else val.arg.get(sym.key, True)) else len(lits) - 1
        return lits[i]
    salt = val.arg if val.mode == "hash" else "set"
    pick = exp.Add(
        this=exp.Mod(this=_key_expr(sym.key, salt, cols), expression=exp.Literal.number(len(lits))),
        expression=exp.Literal.number(1),
    )
    return exp.Bracket(this=exp.Array(expressions=lits), expressions=[pick])


def substitute(
    tree: exp.Expression,
    syms: list[_Sym],
    val: Valuation,
    domains: dict[str, list],
    flips: dict[str, bool] | None = None,
) -> exp.Expression:
    """``tree`` with its i-th distinct AI call valued by ``syms[i]`` under ``val`` (in place of the call)."""
    flips = flips or {}
    _, idx, calls = _calls(tree)
    out = tree.copy()
    # a copy lists its calls in the tree's order; the inputs are read off the tree's own call
    for call, own, i in zip(top_calls(out), calls, idx, strict=True):
        sym = syms[i]
        call.replace(
            _value_expr(sym, val, _inputs(own), domains.get(sym.key, []), _kind_of(call), flips.get(sym.key, False))
        )
    return out


def symbolic(tree: exp.Expression, syms: list[_Sym]) -> exp.Expression:
    """``tree`` with each distinct AI call replaced by ``__ai_<key>(inputs)`` (for syntactic identity)."""
    _, idx, calls = _calls(tree)
    out = tree.copy()
    for call, own, i in zip(top_calls(out), calls, idx, strict=True):  # a copy lists its calls in the tree's order
        sym = syms[i]
        args = [c.copy() for c in _inputs(own)]  # attached below: our own copies
        call.replace(exp.Anonymous(this=f"__ai_{sym.key}_{_kind_of(call)}", expressions=args))
    return out


# ----------------------------------------------------------------------------- the comparison


def _signature(call: exp.Expression) -> tuple:
    return tuple(sorted({c.name.lower() for c in _inputs(call)}))


def pair_calls(gold_tree: exp.Expression, cand_tree: exp.Expression) -> list[tuple[int | None, int | None]]:
    """Align the distinct AI calls (:func:`call_symbols` order) of gold and candidate: first by
    input column names, then by order; unmatched calls pair with None (spec §3.2)."""
    g_texts, _ = call_symbols(gold_tree)
    c_texts, _ = call_symbols(cand_tree)
    g_calls, c_calls = _calls_by_text(gold_tree), _calls_by_text(cand_tree)
    gsig = [_signature(g_calls[t]) for t in g_texts]
    csig = [_signature(c_calls[t]) for t in c_texts]
    left_g, left_c, pairs = list(range(len(g_texts))), list(range(len(c_texts))), []
    for gi in list(left_g):
        for ci in left_c:
            if gsig[gi] == csig[ci]:
                pairs.append((gi, ci))
                left_g.remove(gi)
                left_c.remove(ci)
                break
    while left_g and left_c:
        pairs.append((left_g.pop(0), left_c.pop(0)))
    return pairs + [(g, None) for g in left_g] + [(None, c) for c in left_c]


def _symbols(gold_tree, cand_tree, pairs):
    """Symbols of each side from ``pairs`` [(gold index | None, candidate index | None)]; notes on
    calls the structural layer cannot pair."""
    g_texts, _ = call_symbols(gold_tree)
    c_texts, _ = call_symbols(cand_tree)
    g_calls, c_calls = _calls_by_text(gold_tree), _calls_by_text(cand_tree)
    g_syms: list[_Sym | None] = [None] * len(g_texts)
    c_syms: list[_Sym | None] = [None] * len(c_texts)
    notes, bool_pairs = [], []
    for gi, ci in pairs:
        if gi is not None and gi >= len(g_texts) or ci is not None and ci >= len(c_texts):
            continue
        if gi is not None and ci is not None:
            gk, ck = _kind_of(g_calls[g_texts[gi]]), _kind_of(c_calls[c_texts[ci]])
            gin = sorted(c.name.lower() for c in _inputs(g_calls[g_texts[gi]]))
            cin = sorted(c.name.lower() for c in _inputs(c_calls[c_texts[ci]]))
            kinds_ok = gk == ck or {gk, ck} <= {"bool", "text"}
            if kinds_ok and gin == cin:
                kind = "bool" if "bool" in (gk, ck) else gk
                g_syms[gi] = c_syms[ci] = _Sym(f"p{gi}", kind)
                if kind == "bool":
                    bool_pairs.append(f"p{gi}")
                continue
            notes.append(
                f"gold AI call {gi} and candidate AI call {ci} "
                + ("read different input columns" if kinds_ok else f"return different kinds ({gk}, {ck})")
            )
    for i, s in enumerate(g_syms):
        if s is None:
            g_syms[i] = _Sym(f"g{i}", _kind_of(g_calls[g_texts[i]]))
            if not any(f"gold AI call {i} " in n for n in notes):
                notes.append(f"gold AI call {i} has no counterpart in the candidate")
    for i, s in enumerate(c_syms):
        if s is None:
            c_syms[i] = _Sym(f"c{i}", _kind_of(c_calls[c_texts[i]]))
            if not any(f"candidate AI call {i} " in n for n in notes):
                notes.append(f"candidate AI call {i} has no counterpart in the gold")
    return g_syms, c_syms, bool_pairs, notes


_NOT_ROW_LOCAL = (exp.AggFunc, exp.Window, exp.Select, exp.Subquery, exp.Exists, exp.Query)


def _tree_diff(a: exp.Expression, b: exp.Expression, out: list) -> bool:
    """Collect the outermost differing (gold, candidate) subexpressions; False if the trees differ
    in shape (another argument set or list length), which this method does not handle."""
    if a.sql("duckdb") == b.sql("duckdb"):
        return True
    set_a = {k for k, v in a.args.items() if v not in (None, [], False)}
    set_b = {k for k, v in b.args.items() if v not in (None, [], False)}
    if type(a) is not type(b) or set_a != set_b or isinstance(a, (exp.Literal, exp.Identifier)):
        out.append((a, b))
        return True
    for k in set_a:
        va, vb = a.args.get(k), b.args.get(k)
        if isinstance(va, list):
            if not isinstance(vb, list) or len(va) != len(vb):
                return False
            for x, y in zip(va, vb):
                if isinstance(x, exp.Expression) and isinstance(y, exp.Expression):
                    if not _tree_diff(x, y, out):
                        return False
                elif x != y:
                    return False
        elif isinstance(va, exp.Expression) and isinstance(vb, exp.Expression):
            if not _tree_diff(va, vb, out):
                return False
        elif va != vb:
            out.append((a, b))
            return True
    return True


def _row_local(node: exp.Expression, top: exp.Expression) -> bool:
    """A scalar expression evaluated once per row of the top block's FROM (WHERE, GROUP BY, the
    select list or an aggregate's argument), with no subquery, aggregate or window inside."""
    if isinstance(node, (exp.Where, exp.Group, exp.Having, exp.Order, exp.Limit, exp.From, exp.Join)) or any(
        isinstance(n, _NOT_ROW_LOCAL) for n in node.walk()
    ):
        return False
    anc = node.parent
    while anc is not None and anc is not top:
        if isinstance(
            anc,
            (
                exp.From,
                exp.Join,
                exp.Having,
                exp.Limit,
                exp.Offset,
                exp.Window,
                exp.Qualify,
                exp.Select,
                exp.Subquery,
                exp.Order,
                exp.Distinct,
            ),
        ):
            return False
        anc = anc.parent
    return anc is top


def _value_symbolic(node: exp.Expression, syms: dict, val: Valuation, domains: dict, flips: dict) -> exp.Expression:
    def value(call):
        key, kind = str(call.this)[5:].rsplit("_", 1)
        return _value_expr(syms[key], val, list(call.expressions), domains.get(key, []), kind, flips.get(key, False))

    out = node.copy()
    if _is_symbol(out):
        return value(out)
    for call in [n for n in out.walk() if _is_symbol(n)]:
        call.replace(value(call))
    return out


def _is_symbol(n) -> bool:
    return isinstance(n, exp.Anonymous) and str(n.this).startswith("__ai_")


def _sym_keys(node: exp.Expression) -> list[str]:
    return [str(n.this)[5:].rsplit("_", 1)[0] for n in node.walk() if _is_symbol(n)]


def _rowwise(runner, gold_tree, cand_tree, g_syms, c_syms, all_syms, bool_pairs, flip_sets, domains):
    """``equal`` when gold and candidate are identical except for row-local expressions that agree on
    every row of the FROM under every truth value of the AI calls; None when not applicable or not shown."""
    if not all(s.kind == "bool" for s in all_syms.values()) or len(all_syms) > MAX_EXHAUSTIVE_BITS:
        return None
    gs, cs = symbolic(gold_tree, g_syms), symbolic(cand_tree, c_syms)
    if not isinstance(gs, exp.Select) or not isinstance(cs, exp.Select):
        return None
    diffs: list = []
    if not _tree_diff(gs, cs, diffs) or not diffs:
        return None
    if not all(_row_local(g, gs) and _row_local(c, cs) for g, c in diffs):
        return None
    roots, seen = [], set()  # widen each difference to its largest row-local expression (commuted AND, CASE)
    for g, c in diffs:
        while g.parent is not None and c.parent is not None and _row_local(g.parent, gs) and _row_local(c.parent, cs):
            g, c = g.parent, c.parent
        if id(g) not in seen:
            seen.add(id(g))
            roots.append((g, c))
    diffs = roots
    outside = _sym_keys(gs) + _sym_keys(cs)
    inside = []
    for g, c in diffs:
        inside += _sym_keys(g) + _sym_keys(c)
    for k in inside:
        outside.remove(k)
    base = gs.copy()
    base.set("expressions", [exp.alias_(exp.Count(this=exp.Star()), "n")])
    for k in ("where", "group", "having", "order", "limit", "offset", "qualify", "distinct"):
        base.set(k, None)
    keys = sorted(set(inside))
    for flips in flip_sets:
        if any(flips.get(k) for k in outside):
            continue  # a flipped call also sits in the identical part: not row-wise comparable
        agree = True
        for bits in itertools.product((False, True), repeat=len(keys)):
            val = Valuation("const", dict(zip(keys, bits)))
            for g, c in diffs:
                gv = _value_symbolic(g, all_syms, val, domains, {})
                cv = _value_symbolic(c, all_syms, val, domains, flips)
                probe = base.copy()
                probe.set(
                    "where",
                    exp.Where(
                        this=exp.Not(
                            this=exp.Paren(this=exp.NullSafeEQ(this=exp.Paren(this=gv), expression=exp.Paren(this=cv)))
                        )
                    ),
                )
                status, rows = runner.rows(probe)
                if status != "ok" or rows[0][0] != 0:
                    agree = False
                    break
            if not agree:
                break
        if agree:
            return StructuralVerdict(
                EQUAL_HERE,
                "equal on this database, not a proof: the queries differ only in per-row expressions, which "
                "agree on every row of this database under every truth value of the AI calls",
                "rowwise",
                ["opposite" if flips.get(k) else "same" for k in bool_pairs],
                runner.n,
            )
    return None


def _as_run(con):
    """``con``: a DuckDB connection, or a callable running one SQL text and returning its rows (raising on error)."""
    return con if callable(con) and not hasattr(con, "execute") else (lambda sql: con.execute(sql).fetchall())


class _Runner:
    def __init__(self, run, ordered: bool):
        self.run = run
        self.ordered = ordered
        self.n = 0

    def rows(self, tree: exp.Expression):
        self.n += 1
        try:
            return "ok", self.run(tree.sql("duckdb", copy=False))  # every tree run here is a throwaway
        except Exception as exc:  # noqa: BLE001 - recorded: a valuation the query cannot run under
            return "error", " ".join(str(exc).split())[:200]


def _domain_hashes(run, key: str, cols: list[exp.Column], table_cols: dict[str, list[str]]) -> set | None:
    """Every hash(key, inputs) the unknown can be asked about: the product of each input column's
    distinct values over every table holding a column of that name (a superset; None = unknown)."""
    per_col = []
    for c in cols:
        sources = [t for t, names in table_cols.items() if c.name.lower() in (n.lower() for n in names)]
        if not sources:
            return None
        union = " UNION ".join(f'SELECT DISTINCT CAST("{c.name}" AS VARCHAR) AS v FROM {t}' for t in sources)
        per_col.append([r[0] for r in run(union)])
    combos = list(itertools.product(*per_col)) if per_col else [()]
    if len(combos) > MAX_EXHAUSTIVE_BITS:
        return None
    out = set()
    for combo in combos:
        vals = [exp.Literal.string(v) if v is not None else exp.Null() for v in combo]
        out.add(run(exp.select(_key_expr(key, "set", vals)).sql("duckdb"))[0][0])
    return out


def same_normal_form(gold_tree, cand_tree, schema: dict, g_syms=None, c_syms=None) -> bool:
    """True when both queries, each aligned AI call an unknown function of its inputs, share one
    normal form (:mod:`pipelines.aisql.normal_form`): equal on every database. Unpaired calls: False."""
    if g_syms is None:
        g_syms, c_syms, _, notes = _symbols(gold_tree, cand_tree, pair_calls(gold_tree, cand_tree))
        if notes:
            return False
    g_nf = normal_form(symbolic(gold_tree, g_syms), schema)
    return g_nf is not None and g_nf == normal_form(symbolic(cand_tree, c_syms), schema)


def compare_structures(
    con,
    gold_tree: exp.Expression,
    cand_tree: exp.Expression,
    pairs: list[tuple[int | None, int | None]],
    *,
    ordered: bool = False,
    table_columns: dict[str, list[str]] | None = None,
    seed: int = 0,
    schema: dict | None = None,
) -> StructuralVerdict:
    v = _compare(
        con, gold_tree, cand_tree, pairs, ordered=ordered, table_columns=table_columns, seed=seed, schema=schema
    )
    _, _, bool_pairs, _ = _symbols(gold_tree, cand_tree, pairs)
    texts, _ = call_symbols(gold_tree)
    calls = _calls_by_text(gold_tree)
    v.polarity_inputs = [",".join(_signature(calls[texts[int(k[1:])]])) for k in bool_pairs]
    if len(v.polarity) != len(bool_pairs):
        v.polarity = ["same"] * len(bool_pairs) if v.verdict in (EQUAL, EQUAL_HERE) else []
        v.polarity_inputs = v.polarity_inputs if v.polarity else []
    return v


def _compare(
    con,
    gold_tree: exp.Expression,
    cand_tree: exp.Expression,
    pairs: list[tuple[int | None, int | None]],
    *,
    ordered: bool = False,
    table_columns: dict[str, list[str]] | None = None,
    seed: int = 0,
    schema: dict | None = None,
) -> StructuralVerdict:
    """Decide whether gold and candidate agree for every behaviour of their AI calls (see module doc).

    ``con``: a DuckDB connection on the scenario database (no UDFs needed: every AI call is replaced);
    ``pairs``: aligned (gold call, candidate call) indices over :func:`call_symbols`' distinct calls;
    ``table_columns``: {qualified table: [columns]} for enumerating small input domains."""
    g_syms, c_syms, bool_pairs, notes = _symbols(gold_tree, cand_tree, pairs)
    unpaired = bool(notes)
    all_syms = {s.key: s for s in g_syms + c_syms}
    domains = {k: _literals([gold_tree, cand_tree], s.kind) for k, s in all_syms.items() if s.kind != "bool"}

    # 1. syntactic identity once aligned calls are one symbol (proven on every database)
    if symbolic(gold_tree, g_syms).sql("duckdb", copy=False) == symbolic(cand_tree, c_syms).sql("duckdb", copy=False):
        return StructuralVerdict(
            EQUAL, "identical once the aligned AI calls are identified", "syntactic", ["same"] * len(bool_pairs)
        )
    # 1b. normal forms: the same query after semantics-preserving rewrites (proven on every database)
    if not unpaired and schema is not None:
        if same_normal_form(gold_tree, cand_tree, schema, g_syms, c_syms):
            return StructuralVerdict(
                EQUAL,
                "the same normal form once the aligned AI calls are one unknown function of their inputs "
                "(holds on every database)",
                "normal_form",
                ["same"] * len(bool_pairs),
            )

    run = _as_run(con)
    runner = _Runner(run, ordered)
    flip_sets = (
        [dict(zip(bool_pairs, bits)) for bits in itertools.product((False, True), repeat=len(bool_pairs))]
        if len(bool_pairs) <= MAX_POLARITY_PAIRS
        else [dict.fromkeys(bool_pairs, False)]
    )
    polarity_complete = len(bool_pairs) <= MAX_POLARITY_PAIRS

    # 2. row-wise: the queries differ only in per-row expressions of the top block (every AI behaviour)
    rw = _rowwise(runner, gold_tree, cand_tree, g_syms, c_syms, all_syms, bool_pairs, flip_sets, domains)
    if rw is not None:
        return rw

    # 3. valuations: exhaustive when the AI inputs are few, else constants and seeded samples
    valuations: list[Valuation] = []
    exhaustive = False
    if all(s.kind == "bool" for s in all_syms.values()) and table_columns:
        doms = {}
        cols_of = {}
        for tree, syms in ((gold_tree, g_syms), (cand_tree, c_syms)):
            _, idx, calls = _calls(tree)
            for call, i in zip(calls, idx):
                cols_of.setdefault(syms[i].key, _inputs(call))
        for k, cols in cols_of.items():
            try:
                d = _domain_hashes(run, k, cols, table_columns)
            except Exception:  # noqa: BLE001 - a domain we cannot read: no enumeration
                d = None
            if d is None:
                doms = None
                break
            doms[k] = sorted(d)
        if doms is not None and sum(len(v) for v in doms.values()) <= MAX_EXHAUSTIVE_BITS:
            exhaustive = True
            keys = list(doms)
            flat = [(k, h) for k in keys for h in doms[k]]
            for bits in itertools.product((False, True), repeat=len(flat)):
                chosen = {k: {h for (kk, h), b in zip(flat, bits) if kk == k and b} for k in keys}
                valuations.append(Valuation("set", chosen, "enumerated"))
    if not exhaustive:
        keys = list(all_syms)
        for bits in itertools.product((True, False), repeat=min(len(keys), 3)):
            arg = dict(zip(keys, bits)) | {k: bits[0] for k in keys[3:]}
            valuations.append(
                Valuation("const", arg, "constants " + ", ".join(f"{k}={'T' if v else 'F'}" for k, v in arg.items()))
            )
        valuations += [Valuation("hash", seed * 1000 + r, f"seeded valuation {r}") for r in range(HASH_SAMPLES)]

    gold_results = {}
    witnesses = {}
    agreeing = None
    for fi, flips in enumerate(flip_sets):
        witness = None
        for vi, val in enumerate(valuations):
            if vi not in gold_results:
                gold_results[vi] = runner.rows(substitute(gold_tree, g_syms, val, domains))
            gs, grows = gold_results[vi]
            cs, crows = runner.rows(substitute(cand_tree, c_syms, val, domains, flips))
            if gs != "ok" and cs != "ok":
                continue
            if gs != cs or not rows_match(grows, crows, ordered):
                witness = {"valuation": val.label, "gold": _brief(gs, grows), "candidate": _brief(cs, crows)}
                if gs == cs == "ok":
                    witness["differ"] = differing_rows(grows, crows, ordered)
                break
        if witness is None:
            agreeing = flips
            break
        witnesses[fi] = witness
    pol = ["opposite" if (agreeing or {}).get(k) else "same" for k in bool_pairs]
    ran = sum(1 for s, _ in gold_results.values() if s == "ok")
    if not ran:
        first = next(iter(gold_results.values()), ("error", "no valuation"))
        return StructuralVerdict(CANNOT, f"the gold's structure does not run: {first[1]}", "-", [], runner.n)
    if agreeing is not None and exhaustive:
        return StructuralVerdict(
            EQUAL_HERE,
            f"equal on this database, not a proof: results agree under all {len(valuations)} behaviours "
            "of the AI calls on this database",
            "exhaustive",
            pol,
            runner.n,
        )
    if agreeing is not None:
        return StructuralVerdict(
            CANNOT,
            f"results agree under {len(valuations)} sampled AI behaviours, but the "
            "AI inputs are too many to try every behaviour" + _notes(notes),
            "sampled",
            pol,
            runner.n,
        )
    w = witnesses[0]
    if unpaired:
        return StructuralVerdict(
            CANNOT,
            "results differ under some AI behaviour, but the AI calls do not pair up"
            + _notes(notes)
            + " (the AI layer reports this)",
            "witness",
            pol,
            runner.n,
            w,
        )
    if not polarity_complete:
        return StructuralVerdict(
            CANNOT,
            "results differ under some AI behaviour, but too many AI calls to try every polarity",
            "witness",
            pol,
            runner.n,
            w,
        )
    return StructuralVerdict(
        DIFFER,
        "results differ on this database when the aligned AI calls behave identically: "
        f"{w['valuation']} gives gold {w['gold']} vs candidate {w['candidate']}{_shown(w)}",
        "witness",
        pol,
        runner.n,
        w,
    )


def _notes(notes: list[str]) -> str:
    return ("; " + "; ".join(notes)) if notes else ""


def _shown(w: dict) -> str:
    d = w.get("differ") or {}
    if "first_difference_at" in d:
        return f"; same rows, order parts at row {d['first_difference_at']}"
    if not d:
        return ""
    return f"; only in gold: {d['only_in_gold'][:3]}, only in candidate: {d['only_in_candidate'][:3]}"


def _brief(status: str, rows) -> str:
    if status != "ok":
        return f"error ({rows})"
    shown = ", ".join(re.sub(r"\s+", " ", str(r))[:40] for r in rows[:3])
    return f"{len(rows)} rows [{shown}{', ...' if len(rows) > 3 else ''}]"
