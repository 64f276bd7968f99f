"""What the judge accepts as input (#33 item 5), checked before anything runs: a pair in a dialect
we run, AI calls with the arity the local engine runs, and a gold query that parses.

Every problem is a :class:`BadPairInput` whose message is one line naming the query (gold or
candidate) and what is supported. Internal names (``AIOP_IF``, ``ai_if``) never reach a message:
:func:`public_names` maps them back to what the user wrote.
"""

import re

from sqlglot import exp

from pipelines.aisql.rewrite import (
    BIGQUERY_OPERATORS,
    DIALECTS,
    SqlRewriteError,
    _outside_literals,
    find_operator_names,
    operator_name,
    to_duckdb_tree,
)

SUPPORTED = (
    "BigQuery " + ", ".join(f"AI.{o}" for o in BIGQUERY_OPERATORS) + "; ThalamusDB NLfilter(column, 'instruction') "
    "and NLjoin(column1, column2, 'instruction')"
)
# AI-operator functions of other engines, as written outside string literals
_FOREIGN = (
    (re.compile(r"\bllm_[a-z_]+\s*\(", re.IGNORECASE), "FlockMTL"),
    (re.compile(r"\bSNOWFLAKE\s*\.\s*CORTEX\s*\.", re.IGNORECASE), "Snowflake Cortex"),
    (
        re.compile(
            r"\bai_(?:query|analyze_sentiment|classify|extract|fix_grammar|gen|mask|similarity|summarize|translate)\s*\(",
            re.IGNORECASE,
        ),
        "Databricks",
    ),  # noqa: E501
    (re.compile(r"\bAI_[A-Z_]+\s*\(", re.IGNORECASE), "Snowflake Cortex"),
    (re.compile(r"\bAIOP_[A-Z_]+\s*\(", re.IGNORECASE), "internal"),
)
_ARITY = {"nlfilter": (2, "NLfilter(column, 'instruction')"), "nljoin": (3, "NLjoin(column1, column2, 'instruction')")}
_INTERNAL = re.compile(r"\bAIOP_([A-Za-z_]+)")


class BadPairInput(ValueError):
    """The pair cannot be judged as given; the message is one line naming the query and the fix."""


def public_names(message: str) -> str:
    """``AIOP_IF`` (the name BigQuery's ``AI.IF`` has while sqlglot parses it) back to ``AI.IF``."""
    return _INTERNAL.sub(lambda m: f"AI.{m.group(1).upper()}", message)


def _foreign(sql: str) -> str | None:
    for a, b, code in _outside_literals(sql):
        if not code:
            continue
        for pattern, engine in _FOREIGN:
            m = pattern.search(sql[a:b])
            if m:
                name = m.group(0).rstrip("( ").strip()
                return f"{name} is not an AI operator this judge runs" + (
                    f" ({engine} dialect)" if engine != "internal" else ""
                )
    return None


def check_query(sql: str, dialect: str, who: str) -> exp.Expression:
    """The query's DuckDB tree, or :class:`BadPairInput` (``who``: gold or candidate)."""
    if dialect not in DIALECTS:
        raise BadPairInput(f"dialect {dialect!r} is not supported; supported: {', '.join(DIALECTS)}")
    foreign = _foreign(sql or "")
    if foreign:
        raise BadPairInput(f"{who}: {foreign}; supported: {SUPPORTED}")
    names = find_operator_names(sql or "")
    bq = [n for n in names if n.startswith("AI.")]
    other = [n for n in names if not n.startswith("AI.")]
    if dialect == "thalamusdb" and bq:
        raise BadPairInput(f"{who}: {bq[0]} is BigQuery, but the pair's dialect is thalamusdb; supported: {SUPPORTED}")
    if dialect == "bigquery" and other:
        raise BadPairInput(
            f"{who}: {other[0]} is ThalamusDB, but the pair's dialect is bigquery; supported: {SUPPORTED}"
        )
    try:
        tree = to_duckdb_tree(sql, dialect)
    except SqlRewriteError as exc:
        raise BadPairInput(f"{who}: {public_names(str(exc))}") from None
    for call in tree.find_all(exp.Anonymous):
        name = operator_name(call)
        if name in _ARITY and len(call.expressions) != _ARITY[name][0]:
            want, form = _ARITY[name]
            shown = "NLfilter" if name == "nlfilter" else "NLjoin"
            raise BadPairInput(
                f"{who}: {shown} takes {want} arguments here, got {len(call.expressions)}; write {form} "
                f"(supported: {SUPPORTED})"
            )
    return tree


def check_pair(gold_sql: str, cand_sql: str, dialect: str) -> None:
    """Both queries checked: a gold or candidate in another dialect, with a wrong arity or an
    operator we do not run is bad input. A candidate with a plain SQL syntax error is *not* bad
    input: it is judged (and rejected, it does not run); a gold that does not parse is."""
    check_query(gold_sql, dialect, "gold")
    try:
        check_query(cand_sql, dialect, "candidate")
    except BadPairInput as exc:
        if "does not parse" in str(exc) or "not a query" in str(exc) or "empty SQL" in str(exc):
            return
        raise
