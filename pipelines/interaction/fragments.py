"""Numbered SQL fragments of a gold query (ABISS §5.2 stage 1), extracted with sqlglot.

The simulated user locates a Technical clarification in the gold SQL through these fragments.
Node ids run from 1 in clause order: DISTINCT, SELECT items, FROM tables, JOINs, WHERE conjuncts,
GROUP BY, HAVING, ORDER BY, LIMIT — the reference code's order (``users/sql_ast.py``):

* SELECT: one node per projection (aliases kept); FROM: every table under the outermost FROM
  (tables of a derived table included); JOIN: one node per join of the outermost SELECT, the full
  ``JOIN ... ON ...`` text;
* WHERE: the first WHERE found breadth-first, split on AND only (an OR stays one node); a
  ``t1.a = t2.b`` conjunct between two different table qualifiers is an implicit join and is
  dropped;
* GROUP BY, HAVING, ORDER BY: one node each, keyword stripped; LIMIT: the value.

Choice where the reference is fragile: the FROM key is read as ``from`` or ``from_`` (its name
changed in sqlglot 28), so the fragments do not depend on the installed sqlglot version. A query
that does not parse (or no query) has no fragments.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp

CLAUSES = ("DISTINCT", "SELECT", "FROM", "JOIN", "WHERE", "GROUP_BY", "HAVING", "ORDER_BY", "LIMIT")


@dataclass(frozen=True)
class Fragment:
    id: int
    clause: str
    sql: str

    def render(self) -> str:
        return f"[{self.id}] {self.clause}: {self.sql}"


def _conjuncts(node: exp.Expression) -> list[exp.Expression]:
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    if isinstance(node, exp.Paren) and isinstance(node.this, exp.And):
        return _conjuncts(node.this)
    return [node]


def _implicit_join(node: exp.Expression) -> bool:
    if not isinstance(node, exp.EQ):
        return False
    left, right = node.this, node.expression
    return (
        isinstance(left, exp.Column)
        and isinstance(right, exp.Column)
        and bool(left.table)
        and bool(right.table)
        and left.table != right.table
    )


def _strip(text: str, keyword: str) -> str:
    return text[len(keyword) :].strip() if text.upper().startswith(keyword) else text


def extract_fragments(sql: str | None, dialect: str = "sqlite") -> list[Fragment]:
    """The numbered fragments of ``sql`` (empty when it is None or does not parse)."""
    if not sql or not sql.strip():
        return []
    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except Exception:  # noqa: BLE001 - any parse failure means "no fragments", as in the reference
        return []
    if tree is None:
        return []
    select = tree if isinstance(tree, exp.Select) else tree.find(exp.Select)
    if select is None:
        return []
    out: list[tuple[str, str]] = []

    def add(clause: str, node: exp.Expression | None, strip: str | None = None) -> None:
        if node is None:
            return
        text = node.sql(dialect=dialect)
        out.append((clause, _strip(text, strip) if strip else text))

    if select.args.get("distinct"):
        out.append(("DISTINCT", "DISTINCT"))
    for projection in select.expressions:
        add("SELECT", projection)
    from_ = select.args.get("from") or select.args.get("from_")
    if from_ is not None:
        for table in from_.find_all(exp.Table):
            add("FROM", table)
    for join in select.args.get("joins") or []:
        add("JOIN", join)
    where = tree.find(exp.Where)
    if where is not None:
        for conjunct in _conjuncts(where.this):
            if not _implicit_join(conjunct):
                add("WHERE", conjunct)
    add("GROUP_BY", tree.find(exp.Group), "GROUP BY")
    add("HAVING", tree.find(exp.Having), "HAVING")
    add("ORDER_BY", tree.find(exp.Order), "ORDER BY")
    limit = tree.find(exp.Limit)
    if limit is not None:
        add("LIMIT", limit.expression or limit.this)
    return [Fragment(i, clause, text) for i, (clause, text) in enumerate(out, start=1)]


def render_fragments(fragments: list[Fragment]) -> str:
    return "\n".join(f.render() for f in fragments) if fragments else "No SQL nodes available."
