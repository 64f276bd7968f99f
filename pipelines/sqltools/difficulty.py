"""Difficulty relabelling from the SQL itself (ABISS §4.1, labels as in OmniSQL).

After SQL grounding, a question's difficulty is replaced by one computed from its ground-truth
SQL: :func:`analyze_sql` counts structural features on the sqlglot AST, :func:`relabel_difficulty`
turns them into points and the points into one of ``simple``, ``moderate``, ``complex``,
``highly complex``.

Points, rule by rule (weights are the ``POINTS`` constants below):

* **JOIN** — 2 per join (explicit ``JOIN`` or comma-separated table), i.e. per table beyond the
  first in a FROM clause: each one needs a join path found in the schema.
* **Subquery** — 3 per nested SELECT block (in WHERE/HAVING/FROM/SELECT, including ``EXISTS``);
  CTE bodies and set-operation branches are not subqueries (they are counted below).
* **Set operation** — 2 per UNION / INTERSECT / EXCEPT.
* **CTE** — 2 per common table expression, plus 2 more once if ``WITH RECURSIVE``.
* **Window function** — 3 per ``... OVER (...)``.
* **Aggregation** — 1 if the query uses any aggregate function (COUNT, SUM, AVG, MIN, MAX, ...)
  outside a window; 1 more per GROUP BY. HAVING adds no points of its own: its predicates count as conditions
  (a plain ``GROUP BY x HAVING COUNT(*) > 1`` stays ``moderate``).
* **Conditions** — 1 per predicate beyond the first, counting the atomic predicates of every
  WHERE and HAVING (a clause with ``n`` AND/OR connectors holds ``n + 1``). JOIN ... ON conditions
  are paid by the join itself.
* **CASE** — 1 per CASE expression.
* **ORDER BY** — 1 per ORDER BY of a query block (sorting must be right); window ORDER BYs are
  part of the window function.
* **Top-k** — 1 more per query block with both ORDER BY and LIMIT (a superlative: "the most ...");
  LIMIT alone and DISTINCT add nothing.

Label thresholds on the total: 0–1 ``simple``; 2–3 ``moderate``; 4–5 ``complex``; 6 or more
``highly complex``. Floors: a window function or a recursive CTE makes a query at least
``complex``, whatever its points (OmniSQL reserves them for the two upper levels).

Calibrated on Spider dev (tests/sqltools/test_difficulty.py checks it against Spider's own hardness
rules): ~90% of Spider "easy" queries are ``simple``, ~84% of "hard"/"extra" are ``complex`` or
above, ~80% of "extra" are ``highly complex``, and mean query length grows with the label.

SQL that sqlglot cannot parse is analysed by keyword counting (``parsed=False``, same points);
:func:`relabel_difficulty` then returns ``fallback`` when one is given.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

DIFFICULTY_LABELS = ("simple", "moderate", "complex", "highly complex")

POINTS = {
    "join": 2,
    "subquery": 3,
    "set_operation": 2,
    "cte": 2,
    "recursive_cte": 2,
    "window_function": 3,
    "aggregate": 1,
    "group_by": 1,
    "extra_condition": 1,
    "case": 1,
    "order_by": 1,
    "top_k": 1,
}
# Lowest points of each label above "simple".
THRESHOLDS = (("highly complex", 6), ("complex", 4), ("moderate", 2))


@dataclass(frozen=True)
class SqlFeatures:
    """Structural counts of one SQL query (see the module docstring for each rule)."""

    parsed: bool
    joins: int = 0
    subqueries: int = 0
    set_operations: int = 0
    ctes: int = 0
    recursive_cte: bool = False
    window_functions: int = 0
    aggregates: int = 0
    group_bys: int = 0
    havings: int = 0
    conditions: int = 0
    case_expressions: int = 0
    order_bys: int = 0
    top_k: int = 0

    @property
    def points(self) -> int:
        p = POINTS
        return (
            p["join"] * self.joins
            + p["subquery"] * self.subqueries
            + p["set_operation"] * self.set_operations
            + p["cte"] * self.ctes
            + p["recursive_cte"] * int(self.recursive_cte)
            + p["window_function"] * self.window_functions
            + p["aggregate"] * int(self.aggregates > 0)
            + p["group_by"] * self.group_bys
            + p["extra_condition"] * max(0, self.conditions - 1)
            + p["case"] * self.case_expressions
            + p["order_by"] * self.order_bys
            + p["top_k"] * self.top_k
        )


def analyze_sql(sql: str, dialect: str = "sqlite") -> SqlFeatures:
    """Count the features of ``sql``; never raises (keyword counting when it does not parse)."""
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except Exception:  # ParseError, TokenError, RecursionError, unknown dialect
        statements = []
    if len(statements) != 1:
        return _keyword_features(sql if isinstance(sql, str) else str(sql))
    return _ast_features(statements[0])


def relabel_difficulty(sql: str, fallback: str | None = None, dialect: str = "sqlite") -> str:
    """One of :data:`DIFFICULTY_LABELS` for ``sql``; ``fallback`` (if given) when it does not parse."""
    features = analyze_sql(sql, dialect)
    if not features.parsed and fallback is not None:
        return fallback
    return label_for(features)


def label_for(features: SqlFeatures) -> str:
    points = features.points
    label = next((name for name, low in THRESHOLDS if points >= low), "simple")
    if features.window_functions or features.recursive_cte:
        label = max(label, "complex", key=DIFFICULTY_LABELS.index)
    return label


# ------------------------------------------------------------------------------ AST analysis


def _enclosing_block(node: exp.Expression) -> exp.Expression | None:
    """The nearest SELECT or CTE above ``node`` (None for a top-level block)."""
    parent = node.parent
    while parent is not None and not isinstance(parent, (exp.Select, exp.CTE)):
        parent = parent.parent
    return parent


def _atomic_predicates(clause: exp.Expression) -> int:
    # Connectors of this clause only: a nested SELECT's own WHERE is counted on its own.
    connectors = sum(
        1 for node in clause.walk(prune=lambda n: isinstance(n, exp.Select)) if isinstance(node, exp.Connector)
    )
    return connectors + 1


def _query_orders(tree: exp.Expression):
    """ORDER BY clauses of query blocks (not those inside window specifications)."""
    return (o for o in tree.find_all(exp.Order) if not isinstance(o.parent, exp.Window))


def _ast_features(tree: exp.Expression) -> SqlFeatures:
    selects = list(tree.find_all(exp.Select))
    with_clauses = list(tree.find_all(exp.With))
    return SqlFeatures(
        parsed=True,
        joins=sum(1 for _ in tree.find_all(exp.Join)),
        subqueries=sum(1 for s in selects if isinstance(_enclosing_block(s), exp.Select)),
        set_operations=sum(1 for _ in tree.find_all(exp.SetOperation)),
        ctes=sum(1 for _ in tree.find_all(exp.CTE)),
        recursive_cte=any(w.args.get("recursive") for w in with_clauses),
        window_functions=sum(1 for _ in tree.find_all(exp.Window)),
        # RANK(), SUM(...) OVER (...) are paid as window functions, not as aggregation.
        aggregates=sum(1 for a in tree.find_all(exp.AggFunc) if not isinstance(a.parent, exp.Window)),
        group_bys=sum(1 for _ in tree.find_all(exp.Group)),
        havings=sum(1 for _ in tree.find_all(exp.Having)),
        conditions=sum(_atomic_predicates(c) for c in tree.find_all(exp.Where, exp.Having)),
        case_expressions=sum(1 for _ in tree.find_all(exp.Case)),
        order_bys=sum(1 for _ in _query_orders(tree)),
        top_k=sum(1 for o in _query_orders(tree) if o.parent.args.get("limit")),
    )


# ------------------------------------------------------------------------------ keyword fallback


def _count(pattern: str, text: str) -> int:
    return len(re.findall(pattern, text, re.I))


def _keyword_features(sql: str) -> SqlFeatures:
    """Rough counts for SQL sqlglot cannot parse (string literals removed first)."""
    text = re.sub(r"'(?:[^']|'')*'?", "''", sql)
    where_like = _count(r"\bwhere\b|\bhaving\b", text)
    return SqlFeatures(
        parsed=False,
        joins=_count(r"\bjoin\b", text),
        subqueries=max(0, _count(r"\(\s*select\b", text) - _count(r"\bas\s*\(\s*select\b", text)),
        set_operations=_count(r"\b(?:union|intersect|except)\b", text),
        ctes=_count(r"\bas\s*\(\s*select\b", text) if re.search(r"^\s*with\b", text, re.I) else 0,
        recursive_cte=bool(re.search(r"^\s*with\s+recursive\b", text, re.I)),
        window_functions=_count(r"\bover\s*\(", text),
        aggregates=_count(r"\b(?:count|sum|avg|min|max|group_concat|total)\s*\(", text),
        group_bys=_count(r"\bgroup\s+by\b", text),
        havings=_count(r"\bhaving\b", text),
        conditions=where_like + _count(r"\b(?:and|or)\b", text) - _count(r"\bbetween\b", text),
        case_expressions=_count(r"\bcase\b", text),
        order_bys=_count(r"\border\s+by\b", text) - _count(r"\bover\s*\([^)]*\border\s+by\b", text),
        top_k=min(_count(r"\border\s+by\b", text), _count(r"\blimit\b", text)),
    )


# ------------------------------------------------------------------------------ reference rules

RULE_SETS = ("quandary", "abiss_reference")
RULES_ENV = "QUANDARY_DIFFICULTY_RULES"
_WINDOW_NAMES = ("ROW_NUMBER", "RANK", "DENSE_RANK", "LAG", "LEAD", "NTILE", "FIRST_VALUE", "LAST_VALUE", "NTH_VALUE")
_AGGREGATE_NAMES = ("COUNT", "SUM", "AVG", "MIN", "MAX")


def reference_difficulty(sql: str | None, fallback: str | None = None, dialect: str = "sqlite") -> str:
    """The ABISS reference code's difficulty rules (``validators/difficulty_conformance.py``),
    re-implemented on the sqlglot AST and tokens, in Quandary's label vocabulary.

    First rule that fires, from the top:

    * **highly complex** — a recursive CTE, or two or more of: several CTEs; a recursive CTE; a
      UNION; two or more distinct window functions (ROW_NUMBER, RANK, DENSE_RANK, LAG, LEAD,
      NTILE, FIRST/LAST/NTH_VALUE); PIVOT / LATERAL / ARRAY / UNNEST; (worth 2) a CTE together
      with a window function and any parenthesised SELECT (a CTE body counts, as in the
      reference); several CTEs together with a window function, a parenthesised SELECT or 3+ joins;
    * **complex** — two or more subqueries outside CTE bodies; a self-join (a table twice in the
      outermost FROM/JOINs); a window function or OVER; a CTE; 2+ distinct aggregate functions
      with GROUP BY and HAVING; 2+ AND/OR connectors in WHERE together with HAVING;
    * **moderate** — a JOIN; a subquery; an aggregate with GROUP BY; IN / BETWEEN / LIKE; HAVING;
      2+ AND/OR connectors in the first WHERE (a BETWEEN's AND counts, as in the reference's
      text rule); 2+ distinct aggregate functions;
    * **simple** otherwise (also for empty SQL).

    Differences from Quandary's point rules (:func:`relabel_difficulty`): LIKE / BETWEEN / IN
    filters, single CTEs and self-joins rank higher here; joins, ORDER BY + LIMIT and extra
    conditions count less. SQL that does not parse → ``fallback`` when given, else ``simple``.
    """
    if not sql or not str(sql).strip():
        return "simple"
    try:
        tree = sqlglot.parse_one(sql, read=dialect)
        tokens = sqlglot.tokenize(sql, read=dialect)
    except Exception:  # noqa: BLE001
        return fallback or "simple"
    if tree is None:
        return fallback or "simple"

    def called(names) -> set[str]:
        return {
            t.text.upper()
            for t, nxt in zip(tokens, tokens[1:])
            if t.text.upper() in names and nxt.token_type == TokenType.L_PAREN
        }

    words = {t.text.upper() for t in tokens}
    n_ctes = sum(1 for _ in tree.find_all(exp.CTE))
    recursive = any(w.args.get("recursive") for w in tree.find_all(exp.With))
    joins = sum(1 for t in tokens if t.token_type == TokenType.JOIN)
    top = _top_level_selects(tree)
    selects = [s for s in tree.find_all(exp.Select) if not any(s is t for t in top)]
    in_cte = [s for s in selects if s.find_ancestor(exp.CTE) is not None]
    outside_cte = len(selects) - len(in_cte)
    windows = called(_WINDOW_NAMES)
    has_window = bool(windows) or tree.find(exp.Window) is not None
    aggregates = called(_AGGREGATE_NAMES)
    has_group, has_having = tree.find(exp.Group) is not None, tree.find(exp.Having) is not None
    complex_where = any(tree.find(k) is not None for k in (exp.In, exp.Between, exp.Like))
    where = tree.find(exp.Where)
    connectors = (
        sum(1 for _ in where.find_all(exp.And, exp.Or)) + sum(1 for _ in where.find_all(exp.Between))
        if where is not None
        else 0
    )
    many_conditions = connectors >= 2
    union = tree.find(exp.Union) is not None
    advanced = bool(words & {"PIVOT", "LATERAL", "ARRAY"}) or bool(called(("UNNEST",)))

    indicators = sum((n_ctes >= 2, recursive, union, len(windows) >= 2, advanced))
    if n_ctes and has_window and selects:
        indicators += 2
    if n_ctes >= 2 and (has_window or selects or joins >= 3):
        indicators += 1
    if indicators >= 2 or recursive:
        return "highly complex"
    if (
        outside_cte >= 2
        or _self_join(top)
        or has_window
        or n_ctes
        or (len(aggregates) >= 2 and has_group and has_having)
        or (many_conditions and has_having)
    ):
        return "complex"
    if (
        joins
        or outside_cte
        or (aggregates and has_group)
        or complex_where
        or has_having
        or many_conditions
        or len(aggregates) >= 2
    ):
        return "moderate"
    return "simple"


def _top_level_selects(tree: exp.Expression) -> list[exp.Expression]:
    if isinstance(tree, exp.Select):
        return [tree]
    if isinstance(tree, (exp.Union, exp.Intersect, exp.Except)):
        return _top_level_selects(tree.this) + _top_level_selects(tree.expression)
    if isinstance(tree, (exp.Subquery, exp.Paren)):
        return _top_level_selects(tree.this)
    return []


def _self_join(top: list[exp.Expression]) -> bool:
    for select in top:
        names = []
        from_ = select.args.get("from") or select.args.get("from_")
        sources = ([from_.this] if from_ is not None else []) + [j.this for j in select.args.get("joins") or []]
        names += [s.name.lower() for s in sources if isinstance(s, exp.Table)]
        if len(names) != len(set(names)):
            return True
    return False


def difficulty_for(
    sql: str | None, fallback: str | None = None, rules: str | None = None, dialect: str = "sqlite"
) -> str | None:
    """The difficulty label under a rule set: ``quandary`` (default, :func:`relabel_difficulty`) or
    ``abiss_reference`` (:func:`reference_difficulty`); ``$QUANDARY_DIFFICULTY_RULES`` picks the
    default."""

    rules = rules or os.environ.get(RULES_ENV) or "quandary"
    if rules not in RULE_SETS:
        raise ValueError(f"unknown difficulty rule set {rules!r}; use one of {RULE_SETS}")
    if not sql:
        return fallback
    if rules == "abiss_reference":
        return reference_difficulty(sql, fallback, dialect)
    return relabel_difficulty(sql, fallback, dialect)
