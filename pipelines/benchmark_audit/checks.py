"""The deterministic checks (no LLM) of one gold item, each a :class:`Finding` with the error type
it suggests (Jin et al. 2026), the probe queries that show it and their results.

| check | error type | what it means |
|---|---|---|
| ``gold_error`` | E2 | the gold SQL does not execute on its database |
| ``gold_timeout`` | E2 | the gold SQL runs past the timeout |
| ``empty_result`` | E2 | the gold returns no rows because a constant or join key misses the data by case, whitespace or a misspelling (the near miss is shown) |
| ``null_result`` | E2 | every value the gold returns is NULL, and not because its column is NULL everywhere: a near miss as above, or NULL only in the rows it picks |
| ``ties_at_limit`` | E4 | ``ORDER BY … LIMIT k``: row k+1 has the same sort key as row k, so the answer is not unique |
| ``nondeterministic`` | E1 | ``RANDOM()``, the current date/time, or ``LIMIT`` without ``ORDER BY`` over more rows than the limit |
| ``duplicate_conflict`` | E4 | the same question (normalised) on the same database with gold results that differ |
| ``evidence_ignored`` | E3 | a literal, number or column the evidence names does not occur in the gold |
| ``evidence_contradicted`` | E3 | the gold compares a column the evidence binds to a different literal |
| ``question_column_untouched`` | E1 | the question sorts ("ordered by X") or filters ("whose X is ...") by a column the gold's ORDER BY / WHERE never touches (:mod:`.question_checks`) |
| ``answer_shape`` | E1 | the question asks a count / a number / names, the gold projects something else (:mod:`.question_checks`) |
| ``comparison_strictness`` | E1 | "less than 2" answered by ``<= 2``, "at least 10" by ``> 10`` (:mod:`.question_checks`) |
| ``text_sorted_as_number`` | E2 | ORDER BY ... LIMIT on a TEXT column holding numbers: the text order picks other rows than the numeric one |

*Weak* items are reported apart, never as flags: ``weak_empty_result`` (the gold returns no rows, yet no
constant it compares and no join key misses the data by case, whitespace or spelling: correct, but it cannot
tell systems apart on this database) and ``weak_null_column`` (it returns only NULL because the
column it reads is NULL in every row). :mod:`.near_miss` tells the two apart.

A check that cannot decide (the SQL does not parse, a probe fails) says nothing: a finding is
always backed by a probe result or by the text it quotes.
"""

import json
import re
from dataclasses import asdict, dataclass, field

import sqlglot
from sqlglot import exp

from pipelines.benchmark_audit import near_miss
from pipelines.sqltools.results import has_top_level_order_by, normalize_rows, results_match
from resources.catalog import DatabaseInfo
from resources.sql import FailureKind, QueryResult, execute_sql
from storage.sqlnames import quote_ident

CHECKS_VERSION = "2"  # part of every stored row's key: a changed check is a new finding
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
    "answer_shape": "E1",
    "comparison_strictness": "E1",
    "text_sorted_as_number": "E2",
}
CHECKS = tuple(ERROR_TYPES)
# correct but uninformative here: reported apart from the flags, with their own counts
WEAK_CHECKS = {
    "weak_empty_result": "no constant it compares and no join key misses the data by case, whitespace or spelling",
    "weak_null_column": "the gold returns only NULL: the column it reads is NULL in every row",
}
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
    def weak(self) -> bool:
        return self.check in WEAK_CHECKS

    @property
    def error_type(self) -> str:
        return "" if self.weak else ERROR_TYPES[self.check]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["error_type"] = self.error_type
        d["weak"] = self.weak
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


def execution_findings(
    sql: str,
    outcome,
    db_path=None,
    tree: exp.Expression | None = None,
    schema: DatabaseInfo | None = None,
    timeout_s: float = 3.0,
) -> list[Finding]:
    """``gold_error`` / ``gold_timeout`` from the gold's own run; an empty or NULL-only result is an
    ``empty_result`` / ``null_result`` flag only with a near miss to show, else a weak item."""
    if not outcome.ok:
        check = "gold_timeout" if outcome.kind == FailureKind.TIMEOUT else "gold_error"
        return [Finding(check, outcome.one_line(), (Probe(sql, shown(outcome)),))]
    empty = not outcome.rows
    if not empty and not all(v is None for row in outcome.rows for v in row):
        return []
    gold = Probe(sql, shown(outcome))
    diagnosis = near_miss.near_misses(db_path, tree, schema, timeout_s)
    misses = diagnosis.misses
    # a weak item says what it could not check: "correct" rests on the comparisons that were checked
    unchecked = f" (not checked: {'; '.join(diagnosis.unchecked)})" if diagnosis.unchecked else ""
    if misses:
        fixed = near_miss.mechanical_fix(sql, misses)
        what = "the gold returns no rows" if empty else f"all {len(outcome.rows)} row(s) are NULL only"
        return [
            Finding(
                "empty_result" if empty else "null_result",
                f"{what}: {near_miss.describe(misses)}",
                (gold, *(Probe(m.probe, json.dumps(list(m.found), ensure_ascii=False)) for m in misses)),
                suggested_fix=json.dumps({"field": "gold_sql", "value": fixed}) if fixed else "",
            )
        ]
    if empty:
        detail = f"the gold returns no rows, yet {WEAK_CHECKS['weak_empty_result']}: correct, but empty here{unchecked}"
        return [Finding("weak_empty_result", detail, (gold,))]
    nulls = near_miss.null_columns(db_path, tree, schema, timeout_s) if db_path is not None else None
    if nulls:
        named = ", ".join(f"{where} (NULL in all {n} rows)" for where, n, _ in nulls)
        probes = (gold, *(Probe(p, f"NULL in all {n} rows") for _, n, p in nulls))
        return [Finding("weak_null_column", f"the gold returns only NULL: {named}", probes)]
    nothing = near_miss.aggregates_over_nothing(db_path, tree, timeout_s) if db_path is not None else None
    if nothing:
        detail = f"the gold's aggregates run over no row (NULL), yet {WEAK_CHECKS['weak_empty_result']}{unchecked}"
        return [Finding("weak_empty_result", detail, (gold, Probe(nothing, "0")))]
    return [Finding("null_result", f"all {len(outcome.rows)} row(s) are NULL only", (gold,))]


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


def limit_findings(
    db_path, tree: exp.Expression | None, timeout_s: float, any_rows_asked=lambda k: False
) -> list[Finding]:
    """``ties_at_limit`` and ``nondeterministic`` (LIMIT without ORDER BY) by probing each SELECT
    that has a LIMIT: its first k+1 rows show whether the cut is unique. ``any_rows_asked(k)``: the
    question itself asks for any k rows ("list at least five …"): still a flag (EX scores a correct
    prediction that returns other rows as wrong), but the detail says so — a blind second reader took
    two such BIRD golds for right answers, which they are for the question, not for the benchmark."""
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
                        f"the question accepts any {k} rows, but the gold's unordered LIMIT {k} fixes one "
                        f"arbitrary set: a correct prediction returning other rows is scored wrong by EX"
                        if any_rows_asked(k)
                        else f"LIMIT {k} without ORDER BY over more than {k} rows: which rows come back is up to "
                        "the engine",
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


_TEXT_NUMBER_SHARE = 0.8  # a TEXT column whose values are at least this share numbers holds numbers
_NUMERIC_TEXT = "({c} GLOB '*[0-9]*' AND {c} NOT GLOB '*[^0-9.+-]*')"
NUMBER_TYPE = re.compile(r"INT|REAL|NUM|DOUB|FLOA|DEC|BOOL", re.I)  # declared types that hold numbers


def _holds_numbers_as_text(db_path, table: str, column: str, schema: DatabaseInfo, timeout_s: float) -> bool:
    declared = schema.table(table).column(column).type or ""
    if NUMBER_TYPE.search(declared):
        return False
    c = quote_ident(column)
    out = execute_sql(
        db_path,
        f"SELECT COUNT({c}), SUM({_NUMERIC_TEXT.format(c=c)}) FROM {quote_ident(table)} WHERE typeof({c}) = 'text'",
        timeout_s=timeout_s,
    )
    if not isinstance(out, QueryResult) or not out.rows or not out.rows[0][0]:
        return False
    total, numeric = out.rows[0]
    return (numeric or 0) >= _TEXT_NUMBER_SHARE * total


def text_number_findings(db_path, tree, schema: DatabaseInfo | None, timeout_s: float) -> list[Finding]:
    """``text_sorted_as_number``: ``ORDER BY key LIMIT k`` where the key is a TEXT column holding
    numbers ('97' sorts after '110'): the gold's rows set against the same query ordered by the
    number (non-numbers last); a difference is the finding, with both probes."""
    if tree is None or schema is None or db_path is None:
        return []
    resolver = near_miss.Resolver(tree, schema)
    for select in _standalone_selects(tree):
        if _limit_of(select) is None or select.args.get("order") is None:
            continue
        for n, ordered in enumerate(select.args["order"].expressions):
            key = ordered.this
            where = resolver.column(key) if isinstance(key, exp.Column) else None
            if where is None or not _holds_numbers_as_text(db_path, *where, schema, timeout_s):
                continue
            numeric = select.copy()
            keys = numeric.args["order"].expressions
            text = key.sql(dialect="sqlite")
            last = exp.maybe_parse(f"CASE WHEN {_NUMERIC_TEXT.format(c=text)} THEN 0 ELSE 1 END", dialect="sqlite")
            by_number = exp.Ordered(
                this=exp.Cast(this=key.copy(), to=exp.DataType.build("REAL")), desc=ordered.args.get("desc")
            )
            keys[n : n + 1] = [exp.Ordered(this=last), by_number]
            numeric.set("order", exp.Order(expressions=keys))
            as_text, as_number = select.sql(dialect="sqlite"), numeric.sql(dialect="sqlite")
            a = execute_sql(db_path, as_text, timeout_s=timeout_s)
            b = execute_sql(db_path, as_number, timeout_s=timeout_s)
            if isinstance(a, QueryResult) and isinstance(b, QueryResult) and not results_match(a.rows, b.rows, "bag"):
                return [
                    Finding(
                        "text_sorted_as_number",
                        f"{where[0]}.{where[1]} is TEXT holding numbers: ORDER BY {text} sorts it as text, "
                        "and ordered by its number the LIMIT keeps other rows",
                        (Probe(as_text, shown(a)), Probe(as_number, shown(b))),
                    )
                ]
    return []


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
    sql = f"SELECT COUNT(*) FROM {quote_ident(owners[0])} WHERE {quote_ident(column)} = {near_miss.sql_string(literal)}"
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
    gold_literals = {v.lower() for values in bindings.values() for v in values} | {
        lit.this.lower() for lit in (tree.find_all(exp.Literal) if tree is not None else ()) if lit.is_string
    }
    gold_numbers = _numbers(tree, sql)
    resolved: list[Probe] = []
    for literal in dict.fromkeys(m.group(1).replace("''", "'") for m in _QUOTED.finditer(evidence)):
        if literal and literal.lower() not in gold_text and not any(f"'{literal}'" in c for c in contradicted):
            probe = _id_of_name(evidence, literal, gold_numbers, schema, db_path, timeout_s)
            if probe:
                resolved.append(probe)
            else:
                ignored.append(f"literal '{literal}'")
    for number in dict.fromkeys(_NUMBER_COMPARED.findall(evidence)):
        if float(number) not in gold_numbers:
            probe = _name_of_id(evidence, number, gold_literals, schema, db_path, timeout_s)
            if probe:
                resolved.append(probe)
            else:
                ignored.append(f"number {number}")
    schema_columns = {c.name.lower() for t in schema.tables for c in t.columns} if schema else set()
    named = {_bare(tok) for tok in _evidence_columns(evidence) if _bare(tok) in schema_columns}
    for column in sorted(named - columns):
        if column not in gold_text and not (column.endswith("_id") and resolved):
            ignored.append(f"column {column}")
    if ignored:
        detail = "the gold does not use the evidence's " + ", ".join(ignored)
        if resolved:
            detail += f" (resolved through their lookup tables: {len(resolved)} other value(s))"
        findings.append(Finding("evidence_ignored", detail, tuple(resolved)))
    return findings


def _evidence_columns(evidence: str) -> list[str]:
    """Columns the evidence points at: bound to a value (``col = 'x'``, ``col > 3``) or named after
    "refers to"; a column inside a formula (``SUM(superhero_name ...)``) is not a claim on the gold."""
    found = [m.group(1) for m in _BINDING.finditer(evidence)]
    found += re.findall(rf"refers?\s+to\s+(?:the\s+)?({_IDENT})", evidence, re.I)
    return [tok for tok in found if "_" in tok or tok[:1] in '`"']


def _lookup_table(ident: str, schema: DatabaseInfo):
    """The table an id column points at: ``gender.id`` -> gender, ``race_id`` -> race (by foreign
    key, else by name: ``eye_colour_id`` -> colour); None when it cannot be told."""
    ident = ident.strip('`"')
    if "." in ident:
        table, _, column = ident.partition(".")
        info = schema.table(table)
        return (info, column) if info is not None and column.lower() == "id" and info.column("id") else None
    name = ident.lower()
    if not name.endswith("_id"):
        return None
    for t in schema.tables:
        for fk in t.foreign_keys:
            if fk.column.lower() == name and schema.table(fk.ref_table) is not None:
                return schema.table(fk.ref_table), fk.ref_column
    stem = name[:-3]
    owners = [t for t in schema.tables if (stem == t.name.lower() or stem.endswith("_" + t.name.lower()))]
    owners = [t for t in owners if t.column("id") is not None]
    return (owners[0], "id") if len(owners) == 1 else None


def _name_of_id(evidence, number, gold_literals, schema, db_path, timeout_s) -> Probe | None:
    """A number the evidence binds to an id (``alignment_id = 3``) that the gold names instead:
    the probe reading the lookup row, when one of its text values is a literal of the gold."""
    if schema is None or db_path is None:
        return None
    for m in _BINDING.finditer(evidence):
        if m.group(3) != number:
            continue
        lookup = _lookup_table(m.group(1), schema)
        if lookup is None:
            continue
        table, key = lookup
        sql = f"SELECT * FROM {quote_ident(table.name)} WHERE {quote_ident(key)} = {number}"
        out = execute_sql(db_path, sql, timeout_s=timeout_s)
        if not isinstance(out, QueryResult) or len(out.rows) != 1:
            continue
        names = [v for v in out.rows[0] if isinstance(v, str)]
        if any(v.lower() in gold_literals for v in names):
            return Probe(sql, shown(out))
    return None


def _id_of_name(evidence, literal, gold_numbers, schema, db_path, timeout_s) -> Probe | None:
    """A name the evidence binds (``publisher_name = 'Marvel Comics'``) whose row's id the gold
    compares instead: the probe reading that id, when the gold holds it as a number."""
    if schema is None or db_path is None:
        return None
    for m in _BINDING.finditer(evidence):
        if m.group(3)[1:-1].replace("''", "'") != literal:
            continue
        column = _bare(m.group(1))
        for table in schema.tables:
            if table.column(column) is None or table.column("id") is None:
                continue
            sql = f"SELECT id FROM {quote_ident(table.name)} WHERE {quote_ident(column)} = {near_miss.sql_string(literal)}"
            out = execute_sql(db_path, sql, timeout_s=timeout_s)
            if isinstance(out, QueryResult) and len(out.rows) == 1 and isinstance(out.rows[0][0], (int, float)):
                if float(out.rows[0][0]) in gold_numbers:
                    return Probe(sql, shown(out))
    return None
