"""Identical large results compared inside the database (#38 item 4).

A gold result past the executor's cap is compared by row count and digest: the prediction's rows
are read to their end in Python and folded, which on a loaded machine can take longer than the
prediction's budget (a prediction identical to a 471,696-row gold read in 6.8 s against 3 s, and
its EX was undecided). The database can answer the question "same bag of rows?" itself, without
sending a row out: per distinct row its count, on both sides, and the rows of each side missing
from the other. Only a "same rows" answer is taken from it; anything else (different rows, a
different number of columns, a failure) falls back to the digest path, which can still match
columns in another order or decide "different row count".
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from resources.sql import execute_sql
from resources.sql.results import engine_of


def _body(sql: str, dialect: str) -> str | None:
    """The query as a CTE body, or None unless it is exactly one query: a prediction is untrusted
    text, and one that closed the CTE's parenthesis could make the comparison say anything."""
    text = sql.strip().rstrip(";").strip()
    try:
        parsed = [e for e in sqlglot.parse(text, read=dialect) if e is not None]
    except sqlglot.errors.SqlglotError:
        return None
    if len(parsed) != 1 or not isinstance(parsed[0], exp.Query):
        return None
    return text


def same_bag_sql(gold_sql: str, pred_sql: str, n_columns: int, dialect: str = "sqlite") -> str | None:
    """One query whose single value is the number of (row, count) pairs the two results do not
    share: 0 iff both are the same bag of rows, columns in the same order (NULL equals NULL, as in
    GROUP BY and EXCEPT). None when either side is not exactly one query."""
    gold, pred = _body(gold_sql, dialect), _body(pred_sql, dialect)
    if gold is None or pred is None:
        return None
    by = ", ".join(str(i) for i in range(1, n_columns + 1))
    # each body on its own lines: a trailing -- comment ends before the closing parenthesis
    return (
        f"WITH g AS (\n{gold}\n), p AS (\n{pred}\n), "
        f"gc AS (SELECT *, COUNT(*) AS quandary_n FROM g GROUP BY {by}), "
        f"pc AS (SELECT *, COUNT(*) AS quandary_n FROM p GROUP BY {by}) "
        "SELECT (SELECT COUNT(*) FROM (SELECT * FROM gc EXCEPT SELECT * FROM pc)) "
        "+ (SELECT COUNT(*) FROM (SELECT * FROM pc EXCEPT SELECT * FROM gc))"
    )


def same_rows_in_database(db_path: str, gold_sql: str, pred_sql: str, n_columns: int, timeout_s: float) -> bool:
    """True when the database finds both results the same bag of rows within ``timeout_s``; False
    when it finds otherwise or cannot tell (then the caller compares another way)."""
    sql = same_bag_sql(gold_sql, pred_sql, n_columns, engine_of(db_path)) if n_columns >= 1 else None
    if sql is None:
        return False
    out = execute_sql(db_path, sql, timeout_s=timeout_s)
    return bool(out.ok and out.rows and out.rows[0][0] == 0)
