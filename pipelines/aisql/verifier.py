"""A bounded symbolic verifier for the structural layer (#39 item 2), on z3.

Both queries are encoded over the *same* small symbolic database: every table the queries read has
``k`` candidate rows, each with a presence flag (so any bag of at most ``k`` rows, duplicates
included) and, per column, a value and a NULL flag. A key the schema declares and the shipped data
satisfies is kept unique and non-NULL (a key read off the data alone is not; SemBench declares
none); nothing else is assumed. Each aligned AI call is an uninterpreted function of its input
values and their NULL flags, whose answer may be NULL (no NULL propagation assumed: a prompt
renders a NULL input as text): a boolean for AI.IF, any string for a text call, any number for a
score. Shared by gold and candidate, so the answer holds for every behaviour of the AI calls.
SQL's three-valued logic is kept (a condition is a pair
value / is-NULL). The solver looks for a database and behaviour under which the two result bags
differ:

* **sat** — a counterexample. It is replayed on a real DuckDB database built from the model (the
  AI calls valued by the model's function): only a replayed difference is reported, with the rows.
* **unsat** — no counterexample with at most ``k`` rows per table: "equivalent up to k rows per
  table", a decided class of its own (not a proof over every database).
* anything the encoding does not cover (ORDER BY, LIMIT, window functions, set operations,
  LIKE, string ordering, ...) raises :class:`Unsupported`; the caller falls back
  to the test suite and says why. A solver past its budget is "unknown".

Covered: SELECT [DISTINCT] over base tables, derived tables and CTEs with inner, comma and LEFT
joins; WHERE; GROUP BY (a position names a projection) / HAVING; COUNT(*), COUNT(x), COUNT(DISTINCT x), SUM, AVG, MIN, MAX; EXISTS / NOT EXISTS / IN over a
one-block subquery (correlated or not); CASE, COALESCE, IS [NOT] NULL, BETWEEN, IN (list), + - * /
(x / 0 is an unknown function of x, as DuckDB answers inf or NaN; under BigQuery, ``division_errors``, where
one side may raise x / 0's error and the other not the pair is not decided), SAFE_DIVIDE, NULLIF, comparisons (dates as day
numbers), EXTRACT(YEAR), IF, casts to numbers. Property-tested against DuckDB on random small databases
(``tests/aisql/test_verifier.py``).
"""

import contextlib
import datetime
import itertools
import os
import time
from dataclasses import dataclass, field

import duckdb
import z3
from sqlglot import exp

from pipelines.aisql.diffs import differing_rows, rows_match
from pipelines.aisql.rewrite import operator_name
from pipelines.aisql.structural import _inputs, _symbols, call_symbols, call_text, pair_calls, top_calls

VALUE_SORT = {"text": "str", "category": "str", "score": "real"}  # a non-boolean AI call's answer
DEFAULT_K = 3  # rows per table
BUDGET_MS = 3000  # solver time per pair (all polarity choices together)
BUDGET_ENV = "QUANDARY_VERIFIER_BUDGET_MS"


def default_budget_ms() -> int:
    """The solver's wall-clock budget per pair: ``$QUANDARY_VERIFIER_BUDGET_MS`` or 3 s. A budget
    spent reads "unknown" (never a verdict), so on a loaded machine more pairs stay undecided; the
    test suite raises it so that load never changes the verdict a test expects."""
    value = os.environ.get(BUDGET_ENV, "").strip()
    if not value:
        return BUDGET_MS
    try:
        ms = int(value)
    except ValueError:
        ms = 0
    if ms < 1:  # 0 or a negative budget would leave every pair "unknown": refuse, never run it
        raise ValueError(f"{BUDGET_ENV}={value!r}: give a positive number of milliseconds (unset it for {BUDGET_MS})")
    return ms


PRESENT = "\x00present"  # a derived row's presence, kept beside its columns (no column has this name)
MAX_COMBOS = 64  # row combinations of one FROM clause (k ** tables)

EQUIVALENT_UP_TO_K, DIFFER, UNSUPPORTED, UNKNOWN = "equivalent_up_to_k", "differ", "unsupported", "unknown"


DIV_ERROR = (
    "x / 0 raises an error in BigQuery (SAFE_DIVIDE, NULLIF or a CASE guard give NULL instead), and on a "
    "database of at most k rows per table one query may raise it where the other cannot"
)
DIV_ONLY = "the results differ only on databases where a division by zero may raise BigQuery's error"


class Unsupported(Exception):
    """A construct the encoding does not cover (the message names it)."""


@dataclass
class VerifierResult:
    verdict: str
    reason: str
    k: int = DEFAULT_K
    witness: dict = field(default_factory=dict)
    polarity: list = field(default_factory=list)  # per aligned boolean pair (structural order): same | opposite


# ----------------------------------------------------------------------------- values


@dataclass
class V:
    """A symbolic SQL value: ``v`` (z3 term of sort int | real | str | bool) and ``null`` (z3 bool)."""

    sort: str
    v: object
    null: object


def _lit_date(text: str):
    try:
        return datetime.date.fromisoformat(text[:10]).toordinal()
    except ValueError:
        return None


SORT_OF = {
    "BIGINT": "int",
    "INT": "int",
    "INTEGER": "int",
    "SMALLINT": "int",
    "TINYINT": "int",
    "HUGEINT": "int",
    "DOUBLE": "real",
    "FLOAT": "real",
    "REAL": "real",
    "DECIMAL": "real",
    "VARCHAR": "str",
    "TEXT": "str",
    "BOOLEAN": "bool",
    "DATE": "date",
}


def _z3_sort(sort: str):
    return {"int": z3.IntSort(), "date": z3.IntSort(), "real": z3.RealSort(), "str": z3.StringSort()}.get(
        sort, z3.BoolSort()
    )


def _z3_default(sort: str):
    """The value an AI function is given for a NULL input (its NULL flag says it is NULL)."""
    return {"int": z3.IntVal(0), "date": z3.IntVal(0), "real": z3.RealVal(0), "str": z3.StringVal("")}.get(
        sort, z3.BoolVal(False)
    )


def _num(a: V):
    return z3.ToReal(a.v) if a.sort in ("int", "date") else a.v


def _coerce(a: V, b: V) -> tuple[object, object]:
    """Both values on one sort for comparison (a date against a 'YYYY-MM-DD' literal: day numbers)."""
    if a.sort == b.sort or {a.sort, b.sort} <= {"int", "date"}:
        return a.v, b.v
    if {a.sort, b.sort} <= {"int", "real", "date"}:
        return _num(a), _num(b)
    raise Unsupported(f"comparison of {a.sort} with {b.sort}")


# ----------------------------------------------------------------------------- the database


class SymDB:
    def __init__(self, schema: dict, keys: dict, k: int):
        self.schema, self.keys, self.k = schema, keys, k
        self.tables: dict[str, dict] = {}  # qualified -> {"present": [..], "cols": {name: [V]}}
        self.constraints: list = []

    def table(self, t: exp.Table) -> tuple[str, dict]:
        db = (t.db or "main").lower()
        name = t.name.lower()
        cols = self.schema.get(db, {}).get(name)
        if cols is None:
            raise Unsupported(f"table {t.sql('duckdb')} is not in the schema")
        q = f"{db}.{name}"
        if q not in self.tables:
            rows = {"present": [z3.Bool(f"{q}#{i}") for i in range(self.k)], "cols": {}, "types": cols}
            for c, typ in cols.items():
                sort = SORT_OF.get(str(typ).upper().split("(")[0])
                if sort is None:
                    sort = "unsupported:" + str(typ)
                rows["cols"][c] = [
                    V(sort, z3.Const(f"{q}.{c}#{i}", _z3_sort(sort)), z3.Bool(f"{q}.{c}#{i}?null"))
                    for i in range(self.k)
                ]
            for vals in rows["cols"].values():
                if vals[0].sort == "date":  # day numbers DuckDB can hold as a DATE (years 1..9999)
                    self.constraints += [z3.And(v.v >= 1, v.v <= 3652059) for v in vals]
            key = [c.lower() for c in self.keys.get(q, ()) or self.keys.get(name, ())]
            if key and all(c in rows["cols"] for c in key):
                for i in range(self.k):
                    for c in key:
                        self.constraints.append(z3.Implies(rows["present"][i], z3.Not(rows["cols"][c][i].null)))
                    for j in range(i):
                        same = z3.And(*[rows["cols"][c][i].v == rows["cols"][c][j].v for c in key])
                        self.constraints.append(z3.Not(z3.And(rows["present"][i], rows["present"][j], same)))
            self.tables[q] = rows
        return q, self.tables[q]


# ----------------------------------------------------------------------------- the encoder


class Encoder:
    """Encodes one query (gold or candidate) over a shared :class:`SymDB` and shared AI functions."""

    def __init__(self, db: SymDB, tree: exp.Expression, syms, funcs: dict, flips: dict, div_errors: bool = False):
        self.db, self.funcs, self.flips = db, funcs, flips
        # BigQuery raises an error on x / 0 (#39): with ``div_errors`` every division records when it
        # may raise, i.e. it may be evaluated (``ctx``) with a zero divisor and a non-NULL dividend
        self.div_errors, self.errors, self.ctx = div_errors, [], z3.BoolVal(True)
        texts, _ = call_symbols(tree)
        self.sym_of = {t: syms[i] for i, t in enumerate(texts)}
        self.used: dict[str, str] = {}  # call text -> the z3 function valuing it (for the replay)
        self.ctes: dict[str, exp.Select] = {}
        self.derived_sorts: dict[str, dict[str, str]] = {}  # derived-table alias -> {column: sort}
        self.divz = funcs.setdefault("__div0__", z3.Function("div0", z3.RealSort(), z3.RealSort()))

    # rows of a FROM clause: list of (condition, env); env: alias -> (qualified table, row index | None)
    def from_rows(self, sel: exp.Select, outer: dict) -> list[tuple[object, dict]]:
        src = sel.args.get("from_") or sel.args.get("from")
        if src is None:
            return [(z3.BoolVal(True), dict(outer))]
        items = [(src.this, None, None)]
        for j in sel.args.get("joins") or []:
            kind = (j.side or "").upper()
            if j.args.get("using") or (j.kind or "").upper() in ("CROSS",) and j.args.get("on"):
                raise Unsupported("JOIN ... USING")
            if kind not in ("", "LEFT") or (j.kind or "").upper() not in ("", "INNER", "CROSS"):
                raise Unsupported(f"{kind or j.kind} JOIN")
            items.append((j.this, kind, j.args.get("on")))
        rows = [(z3.BoolVal(True), dict(outer))]
        for node, kind, on in items:
            alias, sources = self._source(node)
            out = []
            for cond, env in rows:
                matched = []
                for present, binding in sources:
                    e2 = {**env, alias: binding}
                    c = z3.And(cond, present)
                    if on is not None:
                        with self.evaluated_when(c):
                            c = z3.And(c, self.truth(self.expr(on, e2)))
                    out.append((c, e2))
                    matched.append(c)
                if kind == "LEFT":
                    pad = (sources[0][1][0], None) if sources else ("__derived__", None)
                    out.append((z3.And(cond, z3.Not(z3.Or(*matched))), {**env, alias: pad}))
            rows = out
            if len(rows) > MAX_COMBOS:
                raise Unsupported(f"more than {MAX_COMBOS} row combinations in one FROM")
        return rows

    def _source(self, node) -> tuple[str, list[tuple[object, tuple]]]:
        """(alias, [(row present, env binding)]) of one FROM item: a base table's k symbolic rows, or
        a derived table's / CTE's output rows (its columns by their output names)."""
        inner = None
        if isinstance(node, exp.Subquery):
            inner = node.this
        elif isinstance(node, exp.Table) and not node.db and node.name.lower() in self.ctes:
            inner = self.ctes[node.name.lower()]
        if inner is None:
            if not isinstance(node, exp.Table):
                raise Unsupported(f"{type(node).__name__} in FROM")
            q, t = self.db.table(node)
            return (node.alias_or_name or node.name).lower(), [(t["present"][i], (q, i)) for i in range(self.db.k)]
        if not isinstance(inner, exp.Select):
            raise Unsupported("a derived table other than one SELECT block")
        # BigQuery reads an unaliased derived table's columns by their bare names
        alias = (node.alias_or_name or f"__derived{len(self.derived_sorts)}").lower()
        names = [x.alias_or_name.lower() for x in inner.expressions]
        if any(not n or n == "*" for n in names) or len(set(names)) != len(names):
            raise Unsupported("a derived table without one distinct name per column")
        if node.args.get("alias") is not None and node.args["alias"].columns:
            raise Unsupported("a derived table with renamed columns")
        rows = self.output(inner, top=False)
        if not rows:
            raise Unsupported("an empty derived table")
        self.derived_sorts[alias] = {n: v.sort for n, v in zip(names, rows[0][1])}
        return alias, [(p, ("__derived__", {**dict(zip(names, vals)), PRESENT: p})) for p, vals in rows]

    @staticmethod
    def truth(b: V):
        return z3.And(z3.Not(b.null), b.v)

    @contextlib.contextmanager
    def evaluated_when(self, cond):
        """Expressions encoded inside are evaluated only when ``cond`` holds (a row that exists, a
        CASE branch taken): where a division may raise BigQuery's error."""
        outer = self.ctx
        self.ctx = z3.And(outer, cond)
        try:
            yield
        finally:
            self.ctx = outer

    def rows_exist(self, env: dict):
        """The rows an environment binds are in their tables (a NULL-extended row is no row)."""
        flags = []
        for q, i in env.values():
            if i is None:
                continue
            if q == "__derived__":
                flags.append(i[PRESENT])
            elif q in self.db.tables:
                flags.append(self.db.tables[q]["present"][i])
        return z3.And(*flags) if flags else z3.BoolVal(True)

    def error_term(self):
        """The query may raise a division-by-zero error on this database (BigQuery semantics)."""
        return z3.Or(*self.errors) if self.errors else z3.BoolVal(False)

    # ------------------------------------------------------------------ expressions
    def column(self, col: exp.Column, env: dict) -> V:
        name = col.name.lower()
        alias = col.table.lower() if col.table else None
        hits = []
        for a, (q, i) in env.items():
            if alias is not None and a != alias:
                continue
            if q == "__derived__":
                known = self.derived_sorts.get(a, {})
                if name in known:
                    hits.append((a, q, i))
                continue
            cols = self.db.tables[q]["cols"]
            if name in cols:
                hits.append((a, q, i))
        if alias is None and len(hits) > 1:
            hits = hits[-1:]  # the innermost scope (env keeps insertion order: outer first)
        if not hits:
            raise Unsupported(f"column {col.sql('duckdb')}")
        a, q, i = hits[-1]
        if q == "__derived__":
            if i is None:  # a NULL-extended row of a LEFT JOIN over a derived table
                sort = self.derived_sorts[a][name]
                return V(sort, z3.FreshConst(_z3_sort(sort)), z3.BoolVal(True))
            return i[name]
        sort = self.db.tables[q]["cols"][name][0].sort
        if sort.startswith("unsupported"):
            raise Unsupported(f"column type {sort.split(':', 1)[1]}")
        if i is None:  # a NULL-extended row of a LEFT JOIN
            return V(sort, z3.Const(f"__nullpad_{q}_{name}", _z3_sort(sort)), z3.BoolVal(True))
        return self.db.tables[q]["cols"][name][i]

    def literal(self, node) -> V:
        if isinstance(node, exp.Null):
            return V("null", z3.BoolVal(False), z3.BoolVal(True))
        if isinstance(node, exp.Boolean):
            return V("bool", z3.BoolVal(bool(node.this)), z3.BoolVal(False))
        if node.is_string:
            return V("strlit", node.this, z3.BoolVal(False))
        text = node.this
        if "." in text or "e" in text.lower():
            return V("real", z3.RealVal(text), z3.BoolVal(False))
        return V("int", z3.IntVal(int(text)), z3.BoolVal(False))

    def _fix_strlit(self, a: V, other: V | None) -> V:
        """A string literal takes the other side's sort: a day number against a date."""
        if a.sort != "strlit":
            return a
        if other is not None and other.sort == "date":
            d = _lit_date(a.v)
            if d is None:
                raise Unsupported(f"date literal {a.v!r}")
            return V("date", z3.IntVal(d), a.null)
        return V("str", z3.StringVal(a.v), a.null)

    def _pair(self, a: V, b: V) -> tuple[V, V]:
        a, b = self._fix_strlit(a, b), self._fix_strlit(b, a)
        if a.sort == "null":
            a = V(b.sort, z3.FreshConst(_z3_sort(b.sort)), z3.BoolVal(True))
        if b.sort == "null":
            b = V(a.sort, z3.FreshConst(_z3_sort(a.sort)), z3.BoolVal(True))
        return a, b

    def expr(self, node, env: dict, group=None) -> V:
        F = z3.BoolVal(False)
        if isinstance(node, exp.Paren):
            return self.expr(node.this, env, group)
        if isinstance(node, exp.Column):
            if group is not None and group["leader"] is not None:
                return self.column(node, group["leader"])
            return self.column(node, env)
        if isinstance(node, (exp.Literal, exp.Null, exp.Boolean)):
            return self.literal(node)
        if isinstance(node, exp.Anonymous) and operator_name(node):
            return self.ai_call(node, group["leader"] if group and group["leader"] is not None else env)
        if isinstance(node, exp.AggFunc):
            if group is None:
                raise Unsupported("an aggregate outside a grouped query")
            return self.aggregate(node, group)
        if isinstance(node, exp.And):
            a, b = self.expr(node.this, env, group), self.expr(node.expression, env, group)
            fa, fb = z3.And(z3.Not(a.null), z3.Not(a.v)), z3.And(z3.Not(b.null), z3.Not(b.v))
            false = z3.Or(fa, fb)
            return V("bool", z3.Not(false), z3.And(z3.Not(false), z3.Or(a.null, b.null)))
        if isinstance(node, exp.Or):
            a, b = self.expr(node.this, env, group), self.expr(node.expression, env, group)
            true = z3.Or(self.truth(a), self.truth(b))
            return V("bool", true, z3.And(z3.Not(true), z3.Or(a.null, b.null)))
        if isinstance(node, exp.Not):
            a = self.expr(node.this, env, group)
            self._want(a, "bool")
            return V("bool", z3.Not(a.v), a.null)
        if isinstance(node, exp.Is):
            a = self.expr(node.this, env, group)
            rhs = node.expression
            if isinstance(rhs, exp.Null):
                return V("bool", a.null, F)
            if isinstance(rhs, exp.Boolean):
                return V("bool", z3.And(z3.Not(a.null), a.v == z3.BoolVal(bool(rhs.this))), F)
            raise Unsupported(f"IS {rhs.sql('duckdb')}")
        if isinstance(node, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ)):
            a, b = self._pair(self.expr(node.this, env, group), self.expr(node.expression, env, group))
            if a.sort == "str" and not isinstance(node, (exp.EQ, exp.NEQ, exp.NullSafeEQ, exp.NullSafeNEQ)):
                raise Unsupported("string ordering")
            x, y = _coerce(a, b)
            op = {
                exp.EQ: lambda: x == y,
                exp.NEQ: lambda: x != y,
                exp.GT: lambda: x > y,
                exp.GTE: lambda: x >= y,
                exp.LT: lambda: x < y,
                exp.LTE: lambda: x <= y,
            }
            if isinstance(node, (exp.NullSafeEQ, exp.NullSafeNEQ)):
                same = z3.Or(z3.And(a.null, b.null), z3.And(z3.Not(a.null), z3.Not(b.null), x == y))
                return V("bool", same if isinstance(node, exp.NullSafeEQ) else z3.Not(same), F)
            return V("bool", op[type(node)](), z3.Or(a.null, b.null))
        if isinstance(node, exp.Between):
            lo = exp.GTE(this=node.this, expression=node.args["low"])
            hi = exp.LTE(this=node.this, expression=node.args["high"])
            return self.expr(exp.And(this=lo, expression=hi), env, group)
        if isinstance(node, exp.In):
            if node.args.get("query") is not None:
                return self.in_subquery(node, env)
            if not node.expressions:
                raise Unsupported("IN ()")
            disj = node.expressions[0]
            e = exp.EQ(this=node.this, expression=disj)
            out = e
            for d in node.expressions[1:]:
                out = exp.Or(this=out, expression=exp.EQ(this=node.this, expression=d))
            return self.expr(out, env, group)
        if isinstance(node, exp.Exists):
            return self.exists(node.this, env)
        if isinstance(node, exp.Neg):
            a = self.expr(node.this, env, group)
            return V(a.sort, -a.v, a.null)
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div)):
            a, b = self.expr(node.this, env, group), self.expr(node.expression, env, group)
            a, b = self._pair(a, b)
            if a.sort not in ("int", "real") or b.sort not in ("int", "real"):
                raise Unsupported(f"arithmetic on {a.sort} and {b.sort}")
            null = z3.Or(a.null, b.null)
            if isinstance(node, exp.Div):
                if node.args.get("typed") or node.args.get("safe"):
                    raise Unsupported("integer division")
                num, den = _num(a), _num(b)
                if self.div_errors:  # BigQuery: x / 0 is an error (a NULL operand gives NULL first)
                    self.errors.append(z3.And(self.ctx, den == 0, z3.Not(a.null), z3.Not(b.null)))
                return V("real", z3.If(den == 0, self.divz(num), num / den), null)
            if a.sort == b.sort == "int":
                x, y, sort = a.v, b.v, "int"
            else:
                x, y, sort = _num(a), _num(b), "real"
            val = {exp.Add: lambda: x + y, exp.Sub: lambda: x - y, exp.Mul: lambda: x * y}[type(node)]()
            return V(sort, val, null)
        if isinstance(node, exp.Cast):
            a = self.expr(node.this, env, group)
            to = node.to.this.name if hasattr(node.to.this, "name") else str(node.to.this)
            if to.upper() in ("DOUBLE", "FLOAT", "DECIMAL") and a.sort in ("int", "real"):
                return V("real", _num(a), a.null)
            if SORT_OF.get(to.upper()) == a.sort or (a.sort == "strlit" and to.upper() in ("VARCHAR", "TEXT")):
                return a
            if a.sort == "strlit" and to.upper() == "DATE":
                return self._fix_strlit(a, V("date", None, None))
            raise Unsupported(f"CAST to {to}")
        if isinstance(node, exp.SafeDivide):  # SAFE_DIVIDE(x, y): NULL where y = 0, never an error
            a, b = self._pair(self.expr(node.this, env, group), self.expr(node.expression, env, group))
            if a.sort not in ("int", "real") or b.sort not in ("int", "real"):
                raise Unsupported(f"SAFE_DIVIDE on {a.sort} and {b.sort}")
            num, den = _num(a), _num(b)
            return V("real", z3.If(den == 0, z3.RealVal(0), num / den), z3.Or(a.null, b.null, den == 0))
        if isinstance(node, exp.Nullif):  # NULLIF(x, y): NULL where x = y is TRUE, else x
            a = self.expr(node.this, env, group)
            same = self.truth(self.expr(exp.EQ(this=node.this, expression=node.expression), env, group))
            return V(a.sort, a.v, z3.Or(a.null, same))
        if isinstance(node, exp.Coalesce):
            args = [node.this, *node.expressions]
            vals = []
            for x in args:  # an argument is evaluated only when every one before it is NULL
                with self.evaluated_when(z3.And(*[v.null for v in vals]) if vals else z3.BoolVal(True)):
                    vals.append(self.expr(x, env, group))
            out = vals[-1]
            for v in reversed(vals[:-1]):
                v, out = self._pair(v, out)
                x, y = _coerce(v, out) if v.sort != out.sort else (v.v, out.v)
                out = V(v.sort if v.sort == out.sort else "real", z3.If(v.null, y, x), z3.And(v.null, out.null))
            return out
        if isinstance(node, exp.If):  # IF(c, a, b): CASE WHEN c THEN a ELSE b END (NULL goes to b)
            case = exp.Case(ifs=[exp.If(this=node.this, true=node.args["true"])], default=node.args.get("false"))
            return self.expr(case, env, group)
        if isinstance(node, exp.Extract):
            return self.extract_year(node, env, group)
        if isinstance(node, exp.Case):
            if node.this is not None:
                raise Unsupported("CASE x WHEN")
            # BigQuery evaluates the conditions in order and only the chosen result (its docs on
            # conditional expressions): an error in a branch not taken is not raised
            branches, earlier = [], []
            for ifn in node.args["ifs"]:
                before = z3.Not(z3.Or(*earlier)) if earlier else z3.BoolVal(True)
                with self.evaluated_when(before):
                    cond = self.truth(self.expr(ifn.this, env, group))
                with self.evaluated_when(z3.And(before, cond)):
                    branches.append((cond, self.expr(ifn.args["true"], env, group)))
                earlier.append(cond)
            default = node.args.get("default")
            with self.evaluated_when(z3.Not(z3.Or(*earlier)) if earlier else z3.BoolVal(True)):
                out = self.expr(default, env, group) if default is not None else self.literal(exp.Null())
            for cond, then in reversed(branches):
                then, out = self._pair(then, out)
                x, y = _coerce(then, out) if then.sort != out.sort else (then.v, out.v)
                sort = then.sort if then.sort == out.sort else "real"
                out = V(sort, z3.If(cond, x, y), z3.If(cond, then.null, out.null))
            return out
        raise Unsupported(type(node).__name__)

    def extract_year(self, node: exp.Extract, env: dict, group) -> V:
        """EXTRACT(YEAR FROM d) of a day number d (Python's ordinal: 0001-01-01 is 1): the one year y
        with ordinal(y-01-01) <= d < ordinal((y+1)-01-01), by the Gregorian leap rules."""
        if (node.this.name or "").upper() != "YEAR":
            raise Unsupported(f"EXTRACT({node.this.name})")
        d = self._fix_strlit(self.expr(node.expression, env, group), V("date", None, None))
        if d.sort != "date":
            raise Unsupported(f"EXTRACT(YEAR) of {d.sort}")
        y = z3.FreshInt("year")

        def first_day(year):  # ordinal of January 1st of ``year``
            n = year - 1
            return 365 * n + n / 4 - n / 100 + n / 400 + 1

        defined = z3.And(z3.Not(d.null), d.v >= 1, d.v <= 3652059)  # a NULL date (or a padding) leaves y free
        self.db.constraints.append(
            z3.Implies(defined, z3.And(y >= 1, y <= 9999, first_day(y) <= d.v, d.v < first_day(y + 1)))
        )
        return V("int", y, d.null)

    @staticmethod
    def _want(a: V, sort: str):
        if a.sort != sort:
            raise Unsupported(f"{a.sort} where {sort} was expected")

    def ai_call(self, node, env: dict) -> V:
        sym = self.sym_of.get(call_text(node))
        if sym is None or sym.kind not in ("bool", *VALUE_SORT):
            raise Unsupported("an AI call of an unknown kind")
        out_sort = "bool" if sym.kind == "bool" else VALUE_SORT[sym.kind]  # a text / score: any value
        inputs = [self.expr(c, env) for c in _inputs(node)]
        inputs = [self._fix_strlit(i, None) for i in inputs]
        if any(i.sort not in ("int", "real", "str", "date", "bool") for i in inputs):
            raise Unsupported("an AI call over an untyped input")
        # An AI call is any function of its inputs, NULL inputs included: BigQuery's FORMAT renders a
        # NULL as 'NULL' and the model may answer TRUE to that prompt, so no NULL propagation is
        # assumed (#39, blind-14). Arguments: each input's value (a fixed one when NULL) and its NULL
        # flag; the answer may itself be NULL (a second function), which covers the UDFs' NULL in,
        # NULL out as one behaviour among all.
        name = f"ai_{sym.key}_{out_sort}_" + "_".join(i.sort for i in inputs)
        f = self.funcs.get(name)
        if f is None:
            sorts = [_z3_sort(i.sort) for i in inputs] + [z3.BoolSort()] * len(inputs)
            f = self.funcs[name] = z3.Function(name, *sorts, _z3_sort(out_sort))
            self.funcs["__null__" + name] = z3.Function("null_" + name, *sorts, z3.BoolSort())
        self.used[call_text(node)] = name
        args = [z3.If(i.null, _z3_default(i.sort), i.v) for i in inputs] + [i.null for i in inputs]
        val = f(*args) if inputs else f()
        null = self.funcs["__null__" + name](*args) if inputs else self.funcs["__null__" + name]()
        if out_sort != "bool":
            return V(out_sort, val, null)
        if self.flips.get(sym.key):
            val = z3.Not(val)
        from pipelines.aisql.rewrite import AI_OPERATORS

        if AI_OPERATORS[operator_name(node)] == "bool":
            return V("bool", val, null)
        return V("str", z3.If(val, z3.StringVal("TRUE"), z3.StringVal("FALSE")), null)

    # ------------------------------------------------------------------ subqueries
    def _block(self, q) -> exp.Select:
        while isinstance(q, exp.Subquery):
            q = q.this
        if not isinstance(q, exp.Select) or _unsupported_block(q):
            raise Unsupported("a subquery other than one SELECT block without GROUP BY, LIMIT or set operations")
        return q

    def exists(self, q, env: dict) -> V:
        sel = self._block(q)
        rows = self.from_rows(sel, env)
        where = sel.args.get("where")
        kept = [self._where(where, c, e) for c, e in rows]
        return V("bool", z3.Or(*kept) if kept else z3.BoolVal(False), z3.BoolVal(False))

    def _where(self, where, cond, env: dict):
        """A row's condition with the WHERE clause; WHERE is evaluated on every row that exists
        (BigQuery does not promise to evaluate a join's ON first)."""
        if where is None:
            return cond
        with self.evaluated_when(self.rows_exist(env)):
            return z3.And(cond, self.truth(self.expr(where.this, env)))

    def in_subquery(self, node: exp.In, env: dict) -> V:
        sel = self._block(node.args["query"])
        if len(sel.expressions) != 1:
            raise Unsupported("IN over a multi-column subquery")
        x = self.expr(node.this, env)
        rows = self.from_rows(sel, env)
        where = sel.args.get("where")
        hit, unknown = [], []
        for c, e in rows:
            kept = self._where(where, c, e)
            with self.evaluated_when(kept):
                y = self.expr(sel.expressions[0].unalias(), e)
            a, b = self._pair(x, y)
            xv, yv = _coerce(a, b)
            hit.append(z3.And(kept, z3.Not(a.null), z3.Not(b.null), xv == yv))
            unknown.append(z3.And(kept, z3.Or(a.null, b.null)))
        true = z3.Or(*hit) if hit else z3.BoolVal(False)
        return V("bool", true, z3.And(z3.Not(true), z3.Or(*unknown) if unknown else z3.BoolVal(False)))

    # ------------------------------------------------------------------ aggregates
    def _member(self, arg, cond, env: dict) -> V:
        """An aggregate's argument for one row of its group (evaluated only for the group's rows)."""
        with self.evaluated_when(cond):
            return self.expr(arg, env)

    def aggregate(self, node, group) -> V:
        members = group["members"]  # [(in-group condition, env)]
        if isinstance(node, exp.Count):
            arg = node.this
            distinct = isinstance(arg, exp.Distinct)
            if distinct:
                if len(arg.expressions) != 1:
                    raise Unsupported("COUNT(DISTINCT a, b)")
                arg = arg.expressions[0]
            if isinstance(arg, exp.Star) or arg is None:
                return V("int", z3.Sum([z3.If(c, 1, 0) for c, _ in members] or [z3.IntVal(0)]), z3.BoolVal(False))
            vals = [(c, self._member(arg, c, e)) for c, e in members]
            terms = []
            for i, (c, v) in enumerate(vals):
                ok = z3.And(c, z3.Not(v.null))
                if distinct:
                    for cj, vj in vals[:i]:
                        a, b = self._pair(v, vj)
                        x, y = _coerce(a, b)
                        ok = z3.And(ok, z3.Not(z3.And(cj, z3.Not(vj.null), x == y)))
                terms.append(z3.If(ok, 1, 0))
            return V("int", z3.Sum(terms or [z3.IntVal(0)]), z3.BoolVal(False))
        if len(node.expressions) > 0 or isinstance(node.this, exp.Distinct):
            raise Unsupported(f"{node.key.upper()} with DISTINCT or several arguments")
        vals = [(c, self._fix_strlit(self._member(node.this, c, e), None)) for c, e in members]
        if not vals:
            raise Unsupported("an aggregate over an empty FROM")
        sort = vals[0][1].sort
        oks = [z3.And(c, z3.Not(v.null)) for c, v in vals]
        none = z3.Not(z3.Or(*oks))
        if isinstance(node, (exp.Sum, exp.Avg)):
            if sort not in ("int", "real"):
                raise Unsupported(f"{node.key.upper()} over {sort}")
            total = z3.Sum([z3.If(ok, v.v if sort == "real" else v.v, 0) for ok, (_, v) in zip(oks, vals)])
            if isinstance(node, exp.Sum):
                return V(sort, total, none)
            n = z3.Sum([z3.If(ok, 1, 0) for ok in oks])
            num = z3.ToReal(total) if sort == "int" else total
            return V("real", z3.If(n == 0, z3.RealVal(0), num / z3.ToReal(n)), none)
        if isinstance(node, (exp.Min, exp.Max)):
            if sort not in ("int", "real", "date"):
                raise Unsupported(f"{node.key.upper()} over {sort}")
            best = vals[0][1].v
            seen = z3.BoolVal(False)
            for ok, (_, v) in zip(oks, vals):
                better = v.v < best if isinstance(node, exp.Min) else v.v > best
                best = z3.If(z3.And(ok, z3.Or(z3.Not(seen), better)), v.v, best)
                seen = z3.Or(seen, ok)
            return V(sort, best, none)
        raise Unsupported(f"aggregate {node.key.upper()}")

    # ------------------------------------------------------------------ the query
    def output(self, tree, top: bool = True) -> list[tuple[object, list[V]]]:
        """The query's result as candidate rows: (present, [values])."""
        sel = tree
        if not isinstance(sel, exp.Select):
            raise Unsupported("a query other than SELECT blocks (set operations)")
        with_ = sel.args.get("with_") or sel.args.get("with")
        if with_ is not None:
            if with_.args.get("recursive"):
                raise Unsupported("WITH RECURSIVE")
            for cte in with_.expressions:
                if cte.args.get("alias") is not None and cte.args["alias"].columns:
                    raise Unsupported("a CTE with renamed columns")
                self.ctes[cte.alias.lower()] = cte.this
        for k in ("order", "limit", "offset", "qualify", "windows"):
            if sel.args.get(k):
                raise Unsupported(k.upper().replace("_", " ") if k != "order" else "ORDER BY")
        if any(isinstance(n, exp.Window) for n in sel.walk()):
            raise Unsupported("a window function")
        if any(isinstance(x, exp.Star) for x in sel.expressions):
            raise Unsupported("SELECT *")
        rows = self.from_rows(sel, {})
        where = sel.args.get("where")
        kept = [(self._where(where, c, e), e) for c, e in rows]
        projections = [x.unalias() for x in sel.expressions]
        group_by = sel.args.get("group")
        having = sel.args.get("having")
        aggregated = group_by is not None or any(x.find(exp.AggFunc) for x in projections) or having is not None
        out = []
        if not aggregated:
            for c, e in kept:
                with self.evaluated_when(c):  # the SELECT list: for the rows WHERE kept
                    out.append((c, [self._fix_strlit(self.expr(x, e), None) for x in projections]))
        elif group_by is None:
            group = {"members": kept, "leader": None}
            present = z3.BoolVal(True)
            if having is not None:
                present = self.truth(self.expr(having.this, {}, group))
            with self.evaluated_when(present):
                out.append((present, [self._fix_strlit(self.expr(x, {}, group), None) for x in projections]))
        else:
            # GROUP BY 1: the first projection (positions name projections, not constants)
            keys = [
                projections[int(x.this) - 1]
                if isinstance(x, exp.Literal) and x.is_int and 1 <= int(x.this) <= len(projections)
                else x
                for x in group_by.expressions
            ]
            if any(isinstance(x, exp.Literal) for x in keys):
                raise Unsupported("GROUP BY a constant")
            keyvals = [[self._fix_strlit(self._member(x, c, e), None) for x in keys] for c, e in kept]
            for i, (c, e) in enumerate(kept):
                same = [z3.And(cj, _row_eq(keyvals[j], keyvals[i])) for j, (cj, _) in enumerate(kept)]
                leader = z3.And(c, *[z3.Not(same[j]) for j in range(i)])
                group = {"members": [(same[j], ej) for j, (_, ej) in enumerate(kept)], "leader": e}
                present = leader
                with self.evaluated_when(leader):  # HAVING and the SELECT list: once per group
                    if having is not None:
                        present = z3.And(present, self.truth(self.expr(having.this, e, group)))
                    with self.evaluated_when(present):
                        vals = [self._fix_strlit(self.expr(x, e, group), None) for x in projections]
                out.append((present, vals))
        if sel.args.get("distinct"):
            out = [
                (z3.And(p, *[z3.Not(z3.And(pj, _row_eq(vj, v))) for pj, vj in out[:i]]), v)
                for i, (p, v) in enumerate(out)
            ]
        return out


def _row_eq(a: list[V], b: list[V]):
    """Null-safe equality of two rows (results compare NULL with NULL as equal)."""
    if len(a) != len(b):
        return z3.BoolVal(False)
    terms = []
    for x, y in zip(a, b):
        if x.sort != y.sort:
            try:
                xv, yv = _coerce(x, y)
            except Unsupported:
                return z3.BoolVal(False)
        else:
            xv, yv = x.v, y.v
        terms.append(z3.Or(z3.And(x.null, y.null), z3.And(z3.Not(x.null), z3.Not(y.null), xv == yv)))
    return z3.And(*terms)


def _unsupported_block(q: exp.Select) -> bool:
    return any(q.args.get(k) for k in ("group", "having", "order", "limit", "offset", "qualify", "distinct", "with"))


def _bags_differ(g: list, c: list):
    """Some tuple has another multiplicity in the gold's bag than in the candidate's."""
    if g and c and len(g[0][1]) != len(c[0][1]):  # another number of columns: differ whenever either has a row
        return z3.Or(*[p for p, _ in g + c])
    alts = []
    for p, vals in g + c:
        cg = z3.Sum([z3.If(z3.And(q, _row_eq(vals, w)), 1, 0) for q, w in g] or [z3.IntVal(0)])
        cc = z3.Sum([z3.If(z3.And(q, _row_eq(vals, w)), 1, 0) for q, w in c] or [z3.IntVal(0)])
        alts.append(z3.And(p, cg != cc))
    return z3.Or(*alts) if alts else z3.BoolVal(False)


# ----------------------------------------------------------------------------- entry point


def verify(
    gold_tree: exp.Expression,
    cand_tree: exp.Expression,
    schema: dict,
    keys: dict,
    *,
    k: int = DEFAULT_K,
    budget_ms: int | None = None,
    division_errors: bool = False,
) -> VerifierResult:
    """Look for a database of at most ``k`` rows per table and an AI behaviour under which the two
    queries return different bags; see the module docstring for the verdicts. ``division_errors``
    (BigQuery): x / 0 raises an error, so a pair is decided only when both queries may raise it on
    the same databases, and a counterexample must be one on which neither may raise it."""
    if gold_tree.find(exp.Order) is not None and gold_tree.args.get("order") is not None:
        return VerifierResult(UNSUPPORTED, "ORDER BY (ordered results are left to the test suite)", k)
    # an unpaired call is a function of its own (the AI layer reports it; a difference it makes is real)
    g_syms, c_syms, bool_pairs, _ = _symbols(gold_tree, cand_tree, pair_calls(gold_tree, cand_tree))
    if len(bool_pairs) > 2:
        return VerifierResult(UNSUPPORTED, "more than 2 aligned AI conditions (polarity choices)", k)
    budget_ms = default_budget_ms() if budget_ms is None else budget_ms
    deadline = time.monotonic() + budget_ms / 1000
    last_model = None
    div_note = ""  # why a polarity choice was left to the test suite (x / 0 under BigQuery)
    for bits in itertools.product((False, True), repeat=len(bool_pairs)):
        flips = dict(zip(bool_pairs, bits))
        db = SymDB(schema, keys, k)
        funcs: dict = {}
        try:
            ge = Encoder(db, gold_tree, g_syms, funcs, {}, division_errors)
            ce = Encoder(db, cand_tree, c_syms, funcs, flips, division_errors)
            g, c = ge.output(gold_tree), ce.output(cand_tree)
        except Unsupported as exc:
            return VerifierResult(UNSUPPORTED, f"not covered by the verifier: {exc}", k)
        except (z3.Z3Exception, TypeError, AttributeError, KeyError) as exc:
            return VerifierResult(UNSUPPORTED, f"not covered by the verifier: {type(exc).__name__} {exc}"[:200], k)
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            return VerifierResult(UNKNOWN, f"solver budget ({budget_ms} ms) spent", k)
        s = z3.Solver()
        s.set("timeout", left_ms)
        s.add(*db.constraints)
        no_error = z3.BoolVal(True)
        if division_errors and (ge.errors or ce.errors):  # no division on either side: nothing to check
            g_err, c_err = ge.error_term(), ce.error_term()
            s.push()
            s.add(g_err != c_err)
            res = s.check()
            side = "gold" if res == z3.sat and z3.is_true(s.model().eval(g_err, model_completion=True)) else "candidate"
            s.pop()
            if res == z3.sat:
                div_note = f"{DIV_ERROR}: the {side} may raise it"
                continue
            if res == z3.unknown:
                return VerifierResult(UNKNOWN, f"solver budget ({budget_ms} ms) spent: {s.reason_unknown()}", k)
            no_error = z3.And(z3.Not(g_err), z3.Not(c_err))
        s.add(_bags_differ(g, c))
        res = s.check()
        if res == z3.sat and division_errors and (ge.errors or ce.errors):
            s.add(no_error)  # a witness: a database on which neither query may raise x / 0's error
            res = s.check()
            if res == z3.unsat:
                div_note = DIV_ONLY
                continue
        if res == z3.unsat:
            pol = ["opposite" if flips[key] else "same" for key in bool_pairs]
            return VerifierResult(
                EQUIVALENT_UP_TO_K,
                f"no counterexample with up to {k} rows per table (every NULL, duplicate and AI behaviour; "
                "bounded, not a proof over every database)",
                k,
                polarity=pol,
            )
        if res == z3.unknown:
            return VerifierResult(UNKNOWN, f"solver budget ({budget_ms} ms) spent: {s.reason_unknown()}", k)
        if not bits or not any(bits):
            last_model = (s.model(), db, funcs, flips, ge.used, ce.used)
    if last_model is None:
        return VerifierResult(UNSUPPORTED, div_note, k) if div_note else VerifierResult(UNKNOWN, "no model", k)
    return VerifierResult(DIFFER, "a counterexample database (replay pending)", k, witness={"_model": last_model})


# ----------------------------------------------------------------------------- witness replay


def _py(v: V, model):
    if z3.is_true(model.eval(v.null, model_completion=True)):
        return None
    val = model.eval(v.v, model_completion=True)
    if v.sort in ("int",):
        return val.as_long()
    if v.sort == "date":
        return datetime.date.fromordinal(val.as_long())
    if v.sort == "real":
        return float(val.as_fraction()) if z3.is_rational_value(val) else float(val.as_decimal(12).rstrip("?"))
    if v.sort == "str":
        return val.as_string()
    if v.sort == "bool":
        return z3.is_true(val)
    return None


def witness_database(model, db: SymDB) -> dict[str, list[dict]]:
    out = {}
    for q, t in db.tables.items():
        rows = []
        for i in range(db.k):
            if z3.is_true(model.eval(t["present"][i], model_completion=True)):
                rows.append({c: _py(vals[i], model) for c, vals in t["cols"].items()})
        out[q] = rows
    return out


def replay(gold_tree, cand_tree, result: VerifierResult, schema: dict) -> VerifierResult:
    """Run both queries on a DuckDB database built from the counterexample, each aligned AI call
    valued as the model's function (TRUE exactly on the inputs the model says). Only a difference
    seen there is reported; anything else is 'unknown' (the encoding and the engine disagree)."""
    model, db, funcs, flips, g_used, c_used = result.witness["_model"]
    tables = witness_database(model, db)
    con = duckdb.connect(":memory:")
    try:
        for q, rows in tables.items():
            sch, name = q.split(".", 1)
            types = db.tables[q]["types"]
            if sch != "main":
                con.execute(f'CREATE SCHEMA IF NOT EXISTS "{sch}"')
            cols = ", ".join(f'"{c}" {typ}' for c, typ in types.items())
            con.execute(f'CREATE TABLE "{sch}"."{name}" ({cols})')
            for r in rows:
                con.execute(
                    f'INSERT INTO "{sch}"."{name}" VALUES ({", ".join("?" for _ in types)})', [r[c] for c in types]
                )
        gsql = _valued(gold_tree, model, funcs, g_used, {}).sql("duckdb", copy=False)
        csql = _valued(cand_tree, model, funcs, c_used, flips).sql("duckdb", copy=False)
        grows, crows = con.execute(gsql).fetchall(), con.execute(csql).fetchall()
    except (duckdb.Error, Unsupported, ValueError, OverflowError, z3.Z3Exception) as exc:
        return VerifierResult(UNKNOWN, f"the counterexample did not replay: {exc}"[:300], result.k)
    finally:
        con.close()
    if rows_match(grows, crows, False):
        return VerifierResult(UNKNOWN, "the counterexample did not replay on DuckDB (left undecided)", result.k)
    behaviour = _behaviour(model, funcs)
    witness = {
        "database": {q: [[str(v) for v in r.values()] for r in rows] for q, rows in tables.items()},
        "columns": {q: list(db.tables[q]["types"]) for q in tables},
        "behaviour": behaviour,
        "gold": [list(map(str, r)) for r in grows[:10]],
        "candidate": [list(map(str, r)) for r in crows[:10]],
        "differ": differing_rows(grows, crows),
    }
    d = witness["differ"]
    return VerifierResult(
        DIFFER,
        f"a counterexample database with at most {result.k} rows per table ({_rows_text(tables)}), AI calls "
        f"{behaviour or 'unused'}: only in gold {d.get('only_in_gold')}, only in candidate {d.get('only_in_candidate')}"[
            :500
        ],
        result.k,
        witness,
    )


def _rows_text(tables: dict) -> str:
    return "; ".join(f"{q.split('.')[-1]}: {len(rows)} rows" for q, rows in tables.items())


def _behaviour(model, funcs: dict) -> str:
    """Each AI function of the counterexample as 'inputs -> answer' entries (strings as text, a NULL
    input as NULL; a NULL answer where its NULL function says so)."""
    out = []
    for name, f in funcs.items():
        if name.startswith("__"):
            continue
        parts = []
        for fn, label in ((f, None), (funcs.get("__null__" + name), "NULL")):
            if fn is None or not any(d.eq(fn) for d in model.decls()):
                if label is None:
                    parts.append("any answer")
                continue
            interp = model.get_interp(fn)
            if not isinstance(interp, z3.FuncInterp):
                parts.append(f"always {label or interp}" if label is None or z3.is_true(interp) else "")
                continue
            n = interp.arity() // 2
            for i in range(interp.num_entries()):
                e = interp.entry(i)
                if label and not z3.is_true(e.value()):
                    continue
                shown = [
                    "NULL" if z3.is_true(e.arg_value(n + k)) else str(z3.simplify(e.arg_value(k))) for k in range(n)
                ]
                parts.append(f"({', '.join(shown)}) -> {label or e.value()}")
            if label is None:
                parts.append(f"otherwise {interp.else_value()}")
            elif z3.is_true(interp.else_value()):
                parts.append("otherwise NULL")
        out.append(f"{name.split('_')[1]}: " + "; ".join(p for p in parts if p))
    return " | ".join(out)[:300]


def _valued(tree, model, funcs: dict, used: dict, flips: dict) -> exp.Expression:
    """``tree`` with each AI call replaced by the model's function of its inputs, as SQL: the tables of
    entries of its answer and of its NULL answer as CASEs over the input columns, a NULL input matched
    by ``IS NULL`` (the function is defined on NULL inputs too)."""
    from pipelines.aisql.rewrite import AI_OPERATORS

    out = tree.copy()
    for call in top_calls(out):
        cols = _inputs(call)
        fname = used.get(call_text(call))
        if fname is None:
            raise Unsupported("an AI call the encoding did not value")
        null = _interp_sql(model, funcs["__null__" + fname], cols)
        rng = funcs[fname].range()
        if rng != z3.BoolSort():  # a text / score call: the model's values
            sql_type = "DOUBLE" if rng == z3.RealSort() else "VARCHAR"
            # a function the model leaves out may take any value; never NULL, which the NULL flag
            # above decides (NULL here made a witness that did not replay: z3 seeds 20 and 35)
            any_value = exp.Literal.number(0) if sql_type == "DOUBLE" else exp.Literal.string("")
            value = _interp_sql(model, funcs[fname], cols, exp.cast(any_value, sql_type))
            call.replace(exp.Case(ifs=[exp.If(this=null, true=exp.cast(exp.Null(), sql_type))], default=value))
            continue
        cond = _interp_sql(model, funcs[fname], cols)
        if flips.get(fname.split("_")[1]):
            cond = exp.Not(this=exp.Paren(this=cond))
        boolean = AI_OPERATORS[operator_name(call)] == "bool"
        value = (
            exp.Paren(this=cond)
            if boolean
            else exp.Case(ifs=[exp.If(this=cond, true=exp.Literal.string("TRUE"))], default=exp.Literal.string("FALSE"))
        )
        value = exp.Case(
            ifs=[exp.If(this=null, true=exp.cast(exp.Null(), "BOOLEAN" if boolean else "VARCHAR"))], default=value
        )
        call.replace(value)
    return out


def _interp_sql(model, f, cols: list[exp.Column], unconstrained: exp.Expression | None = None) -> exp.Expression:
    """A function of the model (arguments: the inputs' values, then their NULL flags) as a SQL CASE
    over the input columns; unconstrained by the model: ``unconstrained`` (FALSE)."""
    if not any(d.eq(f) for d in model.decls()):
        return unconstrained if unconstrained is not None else exp.false()
    interp = model.get_interp(f)
    entries, default = [], interp
    if isinstance(interp, z3.FuncInterp):
        for i in range(interp.num_entries()):
            e = interp.entry(i)
            entries.append(([e.arg_value(j) for j in range(e.num_args())], _sql_lit(e.value())))
        default = interp.else_value()
    if default is None:
        raise Unsupported("an AI function the replay cannot write as SQL")
    cond = _sql_lit(default)
    n = len(cols)
    for args, value in reversed(entries):
        match = exp.and_(
            *[
                exp.Is(this=c.copy(), expression=exp.Null())
                if z3.is_true(args[n + k])
                else exp.EQ(this=c.copy(), expression=_sql_lit(args[k]))
                for k, c in enumerate(cols)
            ]
        )
        cond = exp.Case(ifs=[exp.If(this=match, true=value)], default=cond)
    return cond


def _sql_lit(v) -> exp.Expression:
    v = z3.simplify(v)  # a model may write the string "a" as Unit(97)
    if z3.is_string_value(v):
        return exp.Literal.string(v.as_string())
    if z3.is_int_value(v):
        return exp.Literal.number(v.as_long())
    if z3.is_rational_value(v):
        return exp.Literal.number(float(v.as_fraction()))
    if z3.is_true(v) or z3.is_false(v):
        return exp.true() if z3.is_true(v) else exp.false()
    raise Unsupported(f"an AI input value {v}")
