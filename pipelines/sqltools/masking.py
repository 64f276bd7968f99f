"""Value-masked SQL for Stage 1 duplicate removal (ABISS §4.2, the OmniSQL check).

``SELECT * FROM students WHERE department = 'Engineering'`` masks to
``SELECT * FROM "students" WHERE "department" = ?``, so queries that differ only in literal
values share a :func:`dedup_key`.

Rules (sqlglot AST):

* string, number and boolean literals become ``?``; a negated number (``-5``) becomes one ``?``
  so it collides with ``5``;
* kept as they are, because they change the query's shape rather than a filter value: literals
  under LIMIT / OFFSET / FETCH, and positional references (``ORDER BY 1``, ``GROUP BY 2``);
* SQLite legacy quoting: in the ``sqlite`` dialect a double-quoted, unqualified name on the
  value side of a comparison (``name = "Bob"``, ``IN ("a", "b")``, ``BETWEEN "x" AND "y"``) is
  masked too, since SQLite reads it as a string when no such column exists and Spider-style SQL
  relies on that;
* NULL is not a value to mask (``IS NULL`` vs ``= ?`` are different queries);
* formatting is canonical: sqlglot's generator (upper-case keywords and functions, single
  spaces, no comments) with every identifier lower-cased and quoted (SQLite identifiers are
  case-insensitive, quoted or not; always quoting keeps keywords used as names valid);
* an IN list keeps its length (``IN (?, ?)`` vs ``IN (?, ?, ?)`` differ): the number of
  alternatives is part of the query's structure.

The masked SQL is a comparison key, not guaranteed to be executable. Unparseable input falls
back to a regex masking (quoted strings and numbers, except after LIMIT/OFFSET and right after
ORDER BY/GROUP BY) with whitespace and case normalisation. Neither function ever raises.
"""

from __future__ import annotations

import hashlib
import re

import sqlglot
from sqlglot import exp

PLACEHOLDER = "?"
_KEEP_UNDER = (exp.Limit, exp.Offset, exp.Fetch)


def masked_sql(sql: str, dialect: str = "sqlite") -> str:
    """Canonical SQL with literal values replaced by ``?`` (see the module docstring)."""
    text = sql if isinstance(sql, str) else str(sql)
    try:
        statements = [s for s in sqlglot.parse(text, read=dialect) if s is not None]
        if not statements:
            return _regex_masked(text)
        masked = (_mask_tree(s, dialect) for s in statements)
        return "; ".join(m.sql(dialect=dialect, comments=False, identify=True) for m in masked)
    except Exception:  # sqlglot ParseError/TokenError, RecursionError, unknown dialect, ...
        return _regex_masked(text)


def dedup_key(sql: str, dialect: str = "sqlite") -> str:
    """SHA-256 (hex) of :func:`masked_sql`: equal for queries differing only in literal values."""
    return hashlib.sha256(masked_sql(sql, dialect).encode("utf-8")).hexdigest()


# ------------------------------------------------------------------------------ AST masking


def _is_kept_literal(node: exp.Expression) -> bool:
    if any(isinstance(a, _KEEP_UNDER) for a in _ancestors(node)):
        return True
    parent = node.parent
    positional = isinstance(parent, exp.Ordered) or isinstance(parent, exp.Group)
    return positional and isinstance(node, exp.Literal) and not node.is_string


def _ancestors(node: exp.Expression):
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


_VALUE_SIDE_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.ILike)


def _is_double_quoted_value(column: exp.Column) -> bool:
    """``"Bob"`` in ``name = "Bob"``: a string in SQLite's legacy quoting, not a column."""
    if column.table or not (isinstance(column.this, exp.Identifier) and column.this.quoted):
        return False
    parent = column.parent
    if isinstance(parent, _VALUE_SIDE_COMPARISONS):
        return parent.expression is column
    if isinstance(parent, exp.In):
        return column in parent.expressions
    return isinstance(parent, exp.Between) and column is not parent.this


def _mask_tree(tree: exp.Expression, dialect: str) -> exp.Expression:
    tree = tree.copy()
    values = [n for n in tree.find_all(exp.Literal, exp.Boolean) if not _is_kept_literal(n)]
    if dialect == "sqlite":
        values += [c for c in tree.find_all(exp.Column) if _is_double_quoted_value(c)]
    for node in values:
        target = node
        if isinstance(node.parent, exp.Neg) and isinstance(node, exp.Literal) and not node.is_string:
            target = node.parent  # -5 -> ? (not -?), so it collides with 5
        target.replace(exp.Placeholder())
    for ident in list(tree.find_all(exp.Identifier)):
        ident.set("this", str(ident.this).lower())
    return tree


# ------------------------------------------------------------------------------ regex fallback

_COMMENT = re.compile(r"--[^\n]*|/\*.*?(?:\*/|$)", re.S)
_STRING = re.compile(r"'(?:[^']|'')*'?")  # unterminated strings are masked to the end
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?(?![\w.])|(?<![\w.])-?\.\d+(?![\w.])")
_SHAPE_CONTEXT = re.compile(r"(?:\blimit|\boffset|\border\s+by|\bgroup\s+by|\blimit\s+\d+\s*,)\s*$", re.I)


def _regex_masked(text: str) -> str:
    text = _COMMENT.sub(" ", text)
    text = _STRING.sub(PLACEHOLDER, text)

    def number(match: re.Match) -> str:
        # Only the few characters before the number decide (keeps the fallback linear).
        kept = _SHAPE_CONTEXT.search(text, max(0, match.start() - 40), match.start())
        return match.group(0) if kept else PLACEHOLDER

    text = _NUMBER.sub(number, text)
    text = " ".join(text.split()).lower()  # strings are masked already: lowering is safe
    return text.rstrip(";").strip()
