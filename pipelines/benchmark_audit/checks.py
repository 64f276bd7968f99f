"""The deterministic checks (no LLM) of one gold item, each a :class:`Finding` with the error type
it suggests (Jin et al. 2026), the probe queries that show it and their results.

| check | error type | what it means |
|---|---|---|
| ``gold_error`` | E2 | the gold SQL does not execute on its database |
| ``gold_timeout`` | E2 | the gold SQL runs past the timeout |
| ``empty_result`` | E2 | the gold returns no rows |
| ``null_result`` | E2 | every value the gold returns is NULL |
| ``ties_at_limit`` | E4 | ``ORDER BY … LIMIT k``: row k+1 has the same sort key as row k, so the answer is not unique |
| ``nondeterministic`` | E1 | ``RANDOM()``, the current date/time, or ``LIMIT`` without ``ORDER BY`` over more rows than the limit |
| ``duplicate_conflict`` | E4 | the same question (normalised) on the same database with gold results that differ |
| ``evidence_ignored`` | E3 | a literal, number or column the evidence names does not occur in the gold |
| ``evidence_contradicted`` | E3 | the gold compares a column the evidence binds to a different literal |
| ``question_column_untouched`` | E1 | the question names a column (a multi-word name, phrase for phrase) of a table the gold reads, and the gold never touches it |

A check that cannot decide (the SQL does not parse, a probe fails) says nothing: a finding is
always backed by a probe result or by the text it quotes.
"""

import json
import re
from dataclasses import asdict, dataclass, field

import sqlglot
from sqlglot import exp

from pipelines.sqltools.identifiers import identifier_words
from pipelines.sqltools.results import has_top_level_order_by, normalize_rows, results_match
from resources.catalog import DatabaseInfo
from resources.sql import FailureKind, QueryResult, execute_sql
from storage.sqlnames import quote_ident

CHECKS_VERSION = "1"  # part of every stored row's key: a changed check is a new finding
ERROR_TYPES = {
    "gold_error": "E2",
    "gold_timeout": "E2",
    "empty_result": "E2",
    "null_result": "E2",
    "ties_at_limit": "E4",
    "nondeterministic": "E1",
    "duplicate_conflict": "E4",
    "evidence_ignored": "E3",
    "evidence_contradicted": "E3",
    "question_column_untouched": "E1",
}
CHECKS = tuple(ERROR_TYPES)
PROBE_ROWS_SHOWN = 5  # rows of a probe's result kept as evidence


@dataclass(frozen=True)
class Probe:
    sql: str
    result: str  # a short JSON of columns + the first rows, or the failure's one line


@dataclass(frozen=True)
class Finding:
    check: str
    detail: str
    probes: tuple[Probe, ...] = field(default_factory=tuple)
    suggested_fix: str = ""  # JSON {"field": "gold_sql" | "evidence", "value": the corrected text}, or ""

    @property
    def error_type(self) -> str:
        return ERROR_TYPES[self.check]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["error_type"] = self.error_type
        return d


def shown(outcome) -> str:
    """A probe's outcome as stored evidence: columns, the row count and the first rows."""
    if not outcome.ok:
        return outcome.one_line()
    rows = [[v if isinstance(v, (int, float, str)) or v is None else repr(v) for v in r] for r in outcome.rows]
    return json.dumps(
        {"columns": outcome.columns, "rows": len(rows), "first": rows[:PROBE_ROWS_SHOWN]}, ensure_ascii=False
    )


def parse(sql: str) -> exp.Expression | None:
    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, ValueError):
        return None
    return tree


# --- execution ----------------------------------------------------------------------------------


def execution_findings(sql: str, outcome) -> list[Finding]:
    """``gold_error`` / ``gold_timeout`` / ``empty_result`` / ``null_result`` from the gold's own run."""
    if not outcome.ok:
        check = "gold_timeout" if outcome.kind == FailureKind.TIMEOUT else "gold_error"
        return [Finding(check, outcome.one_line(), (Probe(sql, shown(outcome)),))]
    if not outcome.rows:
        return [Finding("empty_result", "the gold returns no rows", (Probe(sql, shown(outcome)),))]
    if all(v is None for row in outcome.rows for v in row):
        return [Finding("null_result", f"all {len(outcome.rows)} row(s) are NULL only", (Probe(sql, shown(outcome)),))]
    return []


# --- ties at the cut and LIMIT without ORDER BY -------------------------------------------------


def _int_literal(node) -> int | None:
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return int(node.this)
        except ValueError:
            return None
    return None


def _limit_of(select: exp.Select) -> int | None:
    limit = select.args.get("limit")
    if limit is None:
        return None
    return _int_literal(limit.expression if limit.expression is not None else limit.this)


def _with_limit(select: exp.Select, n: int) -> exp.Select:
    probe = select.copy()
    probe.set("limit", exp.Limit(expression=exp.Literal.number(n)))
    return probe


def _key_probe(select: exp.Select, k: int) -> tuple[exp.Select, list[int]] | None:
    """``select`` with its ORDER BY keys as extra columns and ``LIMIT k+1``; the key columns' indexes."""
    if select.args.get("distinct") or any(isinstance(p, exp.Star) for p in select.expressions):
        return None  # an extra column would change DISTINCT's rows; * hides the width
    probe = select.copy()
    projections = list(probe.expressions)
    aliases = {p.alias_or_name.lower(): i for i, p in enumerate(projections) if p.alias_or_name}
    indexes = []
    for n, ordered in enumerate(probe.args["order"].expressions):
        key = ordered.this
        position = _int_literal(key)
        if position is not None and 1 <= position <= len(projections):
            indexes.append(position - 1)
        elif isinstance(key, exp.Column) and not key.table and key.name.lower() in aliases:
            indexes.append(aliases[key.name.lower()])
        else:
            projections.append(exp.alias_(key.copy(), f"__audit_key{n}"))
            indexes.append(len(projections) - 1)
    probe.set("expressions", projections)
    probe.set("limit", exp.Limit(expression=exp.Literal.number(k + 1)))
    probe.set("offset", select.args.get("offset").copy() if select.args.get("offset") else None)
    return probe, indexes


def _standalone_selects(tree: exp.Expression):
    """Every SELECT of the tree (the outermost first); a correlated one fails as a probe and is skipped."""
    yield from (s for s in tree.find_all(exp.Select))


def limit_findings(db_path, tree: exp.Expression | None, timeout_s: float) -> list[Finding]:
    """``ties_at_limit`` and ``nondeterministic`` (LIMIT without ORDER BY) by probing each SELECT
    that has a LIMIT: its first k+1 rows show whether the cut is unique."""
    if tree is None:
        return []
    findings = []
    for select in _standalone_selects(tree):
        k = _limit_of(select)
        if k is None or k <= 0:
            continue
        if select.args.get("order") is None:
            if isinstance(select.parent, exp.Exists):
                continue  # EXISTS (... LIMIT 1) asks whether a row exists: which one does not matter
            probe = _with_limit(select, k + 1).sql(dialect="sqlite")
            out = execute_sql(db_path, probe, timeout_s=timeout_s)
            if isinstance(out, QueryResult) and len(out.rows) > k:
                findings.append(
                    Finding(
                        "nondeterministic",
                        f"LIMIT {k} without ORDER BY over more than {k} rows: which rows come back is up to the engine",
                        (Probe(probe, shown(out)),),
                    )
                )
            continue
        built = _key_probe(select, k)
        if built is None:
            continue
        probe_tree, indexes = built
        probe = probe_tree.sql(dialect="sqlite")
        out = execute_sql(db_path, probe, timeout_s=timeout_s)
        if not isinstance(out, QueryResult) or len(out.rows) <= k:
            continue
        keys = normalize_rows([tuple(row[i] for i in indexes) for row in out.rows[k - 1 : k + 1]])
        if keys[0] == keys[1]:
            findings.append(
                Finding(
                    "ties_at_limit",
                    f"row {k + 1} has the same ORDER BY key {list(keys[1])} as row {k}: "
                    f"the gold's LIMIT {k} cuts through a tie",
                    (Probe(probe, shown(out)),),
                )
            )
    return findings


_NOW = re.compile(r"""['"]now['"]""", re.I)


def construct_findings(sql: str, tree: exp.Expression | None) -> list[Finding]:
    """``nondeterministic`` from the text alone: RANDOM(), the current date or time."""
    reasons = []
    if tree is not None:
        for fn in tree.find_all(exp.Func):
            name = (fn.sql_name() if not isinstance(fn, exp.Anonymous) else fn.name).upper()
            if name in ("RAND", "RANDOM", "RANDOMBLOB"):
                reasons.append("RANDOM()")
            elif isinstance(fn, (exp.CurrentDate, exp.CurrentTime, exp.CurrentTimestamp)):
                reasons.append(name)
    if _NOW.search(sql):
        reasons.append("'now'")
    if not reasons:
        return []
    listed = ", ".join(dict.fromkeys(reasons))
    return [Finding("nondeterministic", f"the result depends on {listed}: it changes from run to run")]


# --- duplicates ----------------------------------------------------------------------------------


def normalised_question(question: str) -> str:
    """Lower case, punctuation dropped, whitespace collapsed: "What is X?" == "what is  x"."""
    return " ".join(re.sub(r"[^\w\s]", " ", question.lower()).split())


def same_result(sql_a: str, out_a, sql_b: str, out_b) -> bool:
    """The one result comparison: ordered when both golds order their rows, else as bags."""

    ordered = has_top_level_order_by(sql_a) and has_top_level_order_by(sql_b)
    return results_match(out_a.rows, out_b.rows, "ordered" if ordered else "bag")


# --- evidence (BIRD) -----------------------------------------------------------------------------

# a quote after a letter is an apostrophe ("heroes' names"), not the start of a literal
_QUOTED = re.compile(r"(?<![A-Za-z])'((?:[^']|'')*)'(?![A-Za-z])")
_IDENT = r"`[^`]+`|\"[^\"]+\"|[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)?"
_BINDING = re.compile(rf"({_IDENT})\s*(=|!=|<>|>=|<=|>|<)\s*('(?:[^']|'')*'|-?\d+(?:\.\d+)?)")
_NUMBER_COMPARED = re.compile(r"(?:=|!=|<>|>=|<=|>|<)\s*(-?\d+(?:\.\d+)?)")


def _bare(name: str) -> str:
    name = name.strip()
    if name[:1] in '`"' and name[-1:] == name[:1]:
        name = name[1:-1]
    return name.split(".")[-1].lower() if "`" not in name and '"' not in name else name.lower()


def _gold_columns(tree: exp.Expression | None) -> set[str]:
    return {c.name.lower() for c in tree.find_all(exp.Column)} if tree is not None else set()


def _gold_bindings(tree: exp.Expression | None) -> dict[str, set[str]]:
    """column -> the string literals the gold compares it with (``=``, ``IN``, ``LIKE``)."""
    out: dict[str, set[str]] = {}
    if tree is None:
        return out
    for node in tree.find_all(exp.EQ, exp.Like, exp.In):
        column = node.this if isinstance(node.this, exp.Column) else None
        values = node.expressions if isinstance(node, exp.In) else [node.expression]
        if column is None and isinstance(node, exp.EQ) and isinstance(node.expression, exp.Column):
            column, values = node.expression, [node.this]
        if column is None:
            continue
        for v in values:
            if isinstance(v, exp.Literal) and v.is_string:
                out.setdefault(column.name.lower(), set()).add(v.this)
    return out


def _numbers(tree: exp.Expression | None, sql: str) -> set[float]:
    if tree is not None:
        found = set()
        for lit in tree.find_all(exp.Literal):
            if not lit.is_string:
                try:
                    found.add(float(lit.this))
                except ValueError:
                    pass
            else:  # BIRD compares numbers stored as text: '1990' counts
                try:
                    found.add(float(lit.this))
                except ValueError:
                    pass
        return found
    return {float(m) for m in re.findall(r"-?\d+(?:\.\d+)?", sql)}


def _value_count(db_path, schema: DatabaseInfo | None, tables: set[str], column: str, literal: str, timeout_s: float):
    """(probe, rows of the gold's tables whose ``column`` equals ``literal``), or None when undecidable."""
    if db_path is None or schema is None:
        return None
    owners = [t.name for t in schema.tables if t.name.lower() in tables and t.column(column) is not None]
    if len(owners) != 1:
        return None
    quoted = literal.replace("'", "''")
    sql = f"SELECT COUNT(*) FROM {quote_ident(owners[0])} WHERE {quote_ident(column)} = '{quoted}'"
    out = execute_sql(db_path, sql, timeout_s=timeout_s)
    return (Probe(sql, shown(out)), out.rows[0][0]) if isinstance(out, QueryResult) and out.rows else None


def evidence_findings(
    evidence: str,
    sql: str,
    tree: exp.Expression | None,
    schema: DatabaseInfo | None = None,
    db_path=None,
    timeout_s: float = 3.0,
) -> list[Finding]:
    """``evidence_ignored`` / ``evidence_contradicted``: what the evidence binds, set against the gold.
    A contradiction is probed: the rows each literal matches say which side the database agrees
    with, and the fix goes to that side (the evidence when only the gold's literal matches rows)."""
    if not evidence.strip():
        return []
    findings = []
    gold_text = sql.lower()
    bindings = _gold_bindings(tree)
    columns = _gold_columns(tree)
    tables = {t.name.lower() for t in tree.find_all(exp.Table)} if tree is not None else set()
    ignored: list[str] = []
    for m in _BINDING.finditer(evidence):
        column, value = _bare(m.group(1)), m.group(3)
        if not value.startswith("'"):
            continue
        literal = value[1:-1].replace("''", "'")
        gold_values = bindings.get(column, set())
        if literal in gold_values or not gold_values:
            continue
        shown_gold = ", ".join(repr(g) for g in sorted(gold_values))
        detail = f"the evidence binds {column} = '{literal}', the gold compares {column} with {shown_gold}"
        probes, fix = [], ""
        evidence_side = _value_count(db_path, schema, tables, column, literal, timeout_s)
        gold_side = [_value_count(db_path, schema, tables, column, g, timeout_s) for g in sorted(gold_values)]
        if evidence_side is not None and all(g is not None for g in gold_side):
            probes = [evidence_side[0], *(g[0] for g in gold_side)]
            gold_rows = sum(g[1] for g in gold_side)
            detail += f" ({evidence_side[1]} row(s) match the evidence's value, {gold_rows} the gold's)"
            if evidence_side[1] == 0 and gold_rows > 0 and len(gold_values) == 1:
                fix = json.dumps(
                    {"field": "evidence", "value": evidence.replace(f"'{literal}'", f"'{next(iter(gold_values))}'")}
                )
            elif gold_rows == 0 and evidence_side[1] > 0 and len(gold_values) == 1:
                wrong = next(iter(gold_values)).replace("'", "''")
                right = literal.replace("'", "''")
                fix = json.dumps({"field": "gold_sql", "value": sql.replace(f"'{wrong}'", f"'{right}'")})
        findings.append(Finding("evidence_contradicted", detail, tuple(probes), suggested_fix=fix))
    contradicted = {f.detail for f in findings}
    for literal in dict.fromkeys(m.group(1).replace("''", "'") for m in _QUOTED.finditer(evidence)):
        if literal and literal.lower() not in gold_text and not any(f"'{literal}'" in c for c in contradicted):
            ignored.append(f"literal '{literal}'")
    gold_numbers = _numbers(tree, sql)
    for number in dict.fromkeys(_NUMBER_COMPARED.findall(evidence)):
        if float(number) not in gold_numbers:
            ignored.append(f"number {number}")
    schema_columns = {c.name.lower() for t in schema.tables for c in t.columns} if schema else set()
    named = {
        _bare(tok)
        for tok in re.findall(_IDENT, evidence)
        if ("_" in tok or tok[:1] in '`"') and _bare(tok) in schema_columns
    }
    for column in sorted(named - columns):
        if column not in gold_text:
            ignored.append(f"column {column}")
    if ignored:
        findings.append(Finding("evidence_ignored", "the gold does not use the evidence's " + ", ".join(ignored)))
    return findings


# --- columns the question names ------------------------------------------------------------------


def _phrase(words: list[str]) -> str:
    return " ".join(w.lower() for w in words)


def question_column_findings(question: str, tree: exp.Expression | None, schema: DatabaseInfo | None) -> list[Finding]:
    """``question_column_untouched``: a column of a table the gold reads whose multi-word name
    ("hair colour" for ``hair_colour_id``'s words minus "id" are not used: only the full name) occurs
    in the question as a phrase, unique to one table among the gold's, and absent from the gold."""
    if tree is None or schema is None:
        return []
    tables = {t.name.lower() for t in tree.find_all(exp.Table)}
    used = _gold_columns(tree)
    text = f" {normalised_question(question)} "
    owners: dict[str, list[str]] = {}
    for table in schema.tables:
        if table.name.lower() not in tables:
            continue
        for col in table.columns:
            words = identifier_words(col.name)
            if len(words) < 2 or words[-1].lower() == "id":
                continue  # one word ("name") is too common to tell; ids are join keys
            owners.setdefault(col.name.lower(), []).append(table.name)
            phrase = _phrase(words)
            if f" {phrase} " in text and col.name.lower() not in used:
                owners.setdefault(f"hit:{col.name.lower()}", []).append(phrase)
    hits = sorted(k[4:] for k in owners if k.startswith("hit:"))
    if not hits:
        return []
    named = ", ".join(f"{h} ({owners['hit:' + h][0]!r} in the question)" for h in hits)
    return [Finding("question_column_untouched", f"the question names {named}; the gold never reads it")]
