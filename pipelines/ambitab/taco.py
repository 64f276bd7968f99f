"""AmbiTab-TACO (deterministic; AmbiTab §3, App. B).

Source: TACO single-database query files ``taco/<region>/new_sql_nl_single/<db>.jsonl`` with the
schema ``<region>/new_schema/<db>_schema.json`` and, where present, the SQLite database
``<region>/database/<db>/<db>.(db|sqlite)``. The paper uses the US region; the US databases are
not available here, so the Beijing region (whose ``tourism_accommodation`` database is present)
is also converted — every record says its region in ``provenance.source_ids``.

1. Keep **single-table SELECTs**: one table, no join, every column qualified by that table (or
   unqualified); otherwise reject (stage ``parse`` / ``shape``).
2. **Verbalise** deterministically, withholding the table and the WHERE literals the user leaves
   open [I]: "Show the <c1>, <c2>[ for records where <col> <op> a specific value] from the relevant
   table." A literal is *user-held* when the source row's natural-language request states it (the
   literal occurs in ``natural_language_query`` as a whole word, case-insensitive, LIKE wildcards
   stripped): the user said it, so it stays visible ("<col> is 'Operational'"). Only a literal the
   request never states is a withheld value choice (the paper: "withholding table or literal-value
   choices", about 10 of 187 records carry one; withholding every literal gave 8 of 13 here).
   (identifiers lower-cased, '_' → space; aggregates as "the number / average / total / minimum /
   maximum of <col>"; ORDER BY / LIMIT appended). Shapes the template cannot say are rejected.
3. Ambiguities [I]: the table — term "the relevant table", aliases table / dataset / data source,
   resolution "Use the table <T>."; one value ambiguity per withheld literal — term <col>,
   resolution "<col> should be <literal>." Both critical; the resolutions are the frozen intents.
4. **Filter** — the query executes and returns rows, and some other table of the database that
   has every referenced column gives a *different* result (BIRD set comparator). Alternatives and
   their outcomes go to ``provenance.alternatives``.
5. **Duplicate readings** [I]: source rows that land in one AVT with the same SQL (normalised) or,
   where the database is present, the same result are one reading, not two: the first is kept, the
   others are rejected (stage ``duplicate``) before the blocking readings-differ check — the paper's
   construction gives each hidden reading its own verifiable outcome. Without the database only the structural half
   runs (a column-compatible alternative table must exist) and the record is non-executable; the
   skipped execution is reported.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import sqlglot
from sqlglot import exp

from pipelines.ambitab.build import BuildResult, item_progress
from pipelines.ambitab.comparison import results_match
from pipelines.ambitab.record import (
    Ambiguity,
    AmbiguityKind,
    OracleContext,
    Provenance,
    TaskRecord,
    VerifierAssets,
    make_avt_id,
)
from pipelines.ambitab.sources import SourceMissing, iter_json_rows, read_json, schema_text, sql_segments
from resources.sql import execute_sql

CORPUS = "taco"
TACO = Path("taco")
REGIONS = ("us", "beijing")
TABLE_TERM = "the relevant table"
TABLE_ALIASES = ["table", "dataset", "data source"]
EXEC_TIMEOUT_S = 30.0
_OPS = {
    "EQ": "is",
    "NEQ": "is not",
    "GT": "is greater than",
    "LT": "is less than",
    "GTE": "is at least",
    "LTE": "is at most",
    "Like": "matches",
    "ILike": "matches",
}
_AGG = {"Count": "the number of", "Avg": "the average", "Sum": "the total", "Min": "the minimum", "Max": "the maximum"}


class Unverbalisable(ValueError):
    """The SQL is outside what the template can say (message says what)."""


def human(name: str) -> str:
    """'_' to space, lower-case; a quoted "table.column" identifier keeps only the column."""
    name = name.rsplit(".", 1)[-1]
    return " ".join(name.replace("_", " ").split()).lower()


def _parse(sql: str):
    log = logging.getLogger("sqlglot")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        return sqlglot.parse_one(sql, read="sqlite")
    finally:
        log.setLevel(level)


def single_table(sql: str) -> tuple[object, str]:
    """(parsed tree, table) of a single-table SELECT; raises Unverbalisable otherwise."""

    try:
        tree = _parse(sql)
    except Exception as exc:  # noqa: BLE001 - sqlglot raises several error types
        raise Unverbalisable(f"SQL does not parse: {str(exc).splitlines()[0][:120]}") from exc
    if not isinstance(tree, exp.Select):
        raise Unverbalisable("not a SELECT")
    if tree.args.get("joins"):
        raise Unverbalisable("has a JOIN (not single-table)")
    tables = {t.name for t in tree.find_all(exp.Table)}
    if len(tables) != 1:
        raise Unverbalisable(f"uses {len(tables)} tables (not single-table)")
    (table,) = tables
    if any(isinstance(s, exp.Subquery) for s in tree.find_all(exp.Subquery)):
        raise Unverbalisable("has a subquery")
    qualifiers = {c.table for c in tree.find_all(exp.Column) if c.table}
    if qualifiers - {table}:
        raise Unverbalisable(f"references other tables {sorted(qualifiers - {table})}")
    return tree, table


def _select_phrase(e) -> str:
    if isinstance(e, exp.Alias):
        e = e.this
    if isinstance(e, exp.Column):
        if isinstance(e.this, exp.Star):
            return "all columns"
        return human(e.name)
    if isinstance(e, exp.Star):
        return "all columns"
    for cls, words in _AGG.items():
        if type(e).__name__ == cls:
            arg = e.this
            if isinstance(arg, exp.Distinct):
                arg = arg.expressions[0] if arg.expressions else None
                words += " distinct"
            if arg is None or isinstance(arg, exp.Star):
                return f"{words} records" if cls == "Count" else words
            if isinstance(arg, exp.Column):
                return f"{words} {human(arg.name)}"
    raise Unverbalisable(f"select expression {e.sql()[:60]!r} has no template")


def _conditions(where) -> list:
    if where is None:
        return []
    node = where.this
    out = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, exp.Paren):
            stack.append(n.this)
        elif isinstance(n, exp.And):
            stack.extend([n.expression, n.this])
        else:
            out.append(n)
    return out


def states_literal(request: str | None, literal: str) -> bool:
    """True when the user's request states ``literal`` (a whole word, case-insensitive; LIKE
    wildcards stripped): such a literal is user-held, not a value choice left open."""
    lit = literal.strip("%_ ").strip()
    if not request or not lit:
        return False
    return re.search(rf"(?<!\w){re.escape(lit)}(?!\w)", request, re.IGNORECASE) is not None


def _literal_text(right) -> str:
    if isinstance(right, exp.Literal) and right.is_string:
        return "'" + right.this + "'"
    return right.sql()


def verbalise(sql: str, request: str | None = None) -> tuple[str, str, list[dict]]:
    """(request text, table, withheld literals [{column, op, literal}]) for a single-table SELECT.

    ``request`` is the source's natural-language request: a literal it states is user-held and
    verbalised as is; without it every literal is withheld."""

    tree, table = single_table(sql)
    cols = [_select_phrase(e) for e in tree.expressions]
    distinct = "distinct " if tree.args.get("distinct") else ""
    text = f"Show the {distinct}{', '.join(cols)}"
    withheld, clauses = [], []
    for cond in _conditions(tree.args.get("where")):
        if isinstance(cond, exp.Not) and isinstance(cond.this, exp.Is):
            clauses.append(f"{human(cond.this.this.name)} is present")
            continue
        if isinstance(cond, exp.Is) and isinstance(cond.this, exp.Column):
            clauses.append(f"{human(cond.this.name)} is missing")
            continue
        op = type(cond).__name__
        left, right = getattr(cond, "this", None), getattr(cond, "expression", None)
        if op in _OPS and isinstance(left, exp.Column) and isinstance(right, (exp.Literal, exp.Neg)):
            lit = right.sql() if isinstance(right, exp.Neg) else right.this
            if states_literal(request, str(lit)):
                clauses.append(f"{human(left.name)} {_OPS[op]} {_literal_text(right)}")
                continue
            clauses.append(f"{human(left.name)} {_OPS[op]} a specific value")
            withheld.append({"column": left.name, "op": op, "literal": str(lit)})
            continue
        raise Unverbalisable(f"WHERE condition {cond.sql()[:60]!r} has no template")
    if clauses:
        text += " for records where " + " and ".join(clauses)
    text += f" from {TABLE_TERM}"
    order = tree.args.get("order")
    if order:
        keys = []
        for o in order.expressions:
            if not isinstance(o.this, exp.Column):
                raise Unverbalisable("ORDER BY on an expression has no template")
            keys.append(human(o.this.name) + (" in descending order" if o.args.get("desc") else ""))
        text += ", sorted by " + ", ".join(keys)
    limit = tree.args.get("limit")
    if limit is not None:
        n = limit.expression if hasattr(limit, "expression") and limit.expression is not None else limit.this
        text += f" (first {n.sql() if hasattr(n, 'sql') else n} rows)"
    return text + ".", table, withheld


def referenced_columns(sql: str) -> set[str]:
    return {c.name.lower() for c in _parse(sql).find_all(exp.Column) if not isinstance(c.this, exp.Star)}


def retarget(sql: str, table: str, new_table: str) -> str:
    """The same query against ``new_table`` (table and column qualifiers renamed)."""

    tree = _parse(sql)
    for t in tree.find_all(exp.Table):
        if t.name == table:
            t.set("this", exp.to_identifier(new_table, quoted=True))
    for c in tree.find_all(exp.Column):
        if c.table == table:
            c.set("table", exp.to_identifier(new_table, quoted=True))
    return tree.sql(dialect="sqlite")


# ---------------------------------------------------------------------------------- schema


def load_schema(path: Path) -> dict[str, set[str]]:
    data = read_json(path)
    return {t["table_name"]: {c["column_name"].lower() for c in t.get("columns", [])} for t in data.get("tables", [])}


def ddl_from_schema(path: Path) -> str:
    data = read_json(path)
    parts = []
    for t in data.get("tables", []):
        cols = ",\n".join(f'  "{c["column_name"]}" {c.get("data_type") or ""}'.rstrip() for c in t.get("columns", []))
        parts.append(
            f'CREATE TABLE "{t["table_name"]}" (\n{cols}\n);\n/* example rows unavailable: the database is not present */'
        )
    return "\n\n".join(parts)


def _db_file(data_root: Path, region: str, db: str) -> Path | None:
    for suffix in (".sqlite", ".db"):
        p = data_root / TACO / region / "database" / db / f"{db}{suffix}"
        if p.is_file():
            return p
    return None


# ----------------------------------------------------------------------------------- build


def build(data_root: Path, seed: int = 0, regions: tuple[str, ...] = REGIONS, progress=None) -> BuildResult:
    result = BuildResult(CORPUS, stats={"seed": seed})
    files = []
    for region in regions:
        files += [(region, f) for f in sorted((data_root / TACO / region / "new_sql_nl_single").glob("*.jsonl"))]
    if not files:
        raise SourceMissing(
            f"no TACO query files under {data_root / TACO}/<region>/new_sql_nl_single; point --data "
            "at a folder that holds them (the workplace's ../shared/data)"
        )
    structural_dbs = []
    for region, path in files:
        db = path.stem
        schema_path = data_root / TACO / region / "new_schema" / f"{db}_schema.json"
        if not schema_path.is_file():
            result.reject(f"{region}/{db}", "database", f"schema file {schema_path.name} not found")
            continue
        columns = load_schema(schema_path)
        db_path = _db_file(data_root, region, db)
        if db_path is None:
            schema = ddl_from_schema(schema_path)
        else:
            try:
                schema = schema_text(db_path)
            except Exception as exc:  # noqa: BLE001
                result.reject(f"{region}/{db}", "database", f"cannot open {db_path.name}: {exc}")
                continue
        rows = list(iter_json_rows(path, result, ("sql",)))
        tick = item_progress(f"taco {region}/{db}", len(rows), progress)
        n_struct = 0
        seen: dict[str, list[tuple[str, str, object]]] = {}  # avt -> (interpretation, sql key, result)
        for sid, row in rows:
            tick.advance()
            rec = _convert(f"{region}/{sid}", row, region, db, db_path, schema, columns, seed, result)
            if rec is None or _duplicate_reading(rec, seen, row, result):
                continue
            result.records.append(rec)
            n_struct += not rec.verifier.executable
        tick.close()
        if db_path is None:
            structural_dbs.append((f"{region}/{db}", n_struct))
    if structural_dbs:
        result.skip(
            "execute + non-empty + result-distinct alternative",
            "SQLite databases not present for "
            + ", ".join(d for d, _ in structural_dbs)
            + "; records kept on the structural check (a column-compatible alternative table exists)",
            sum(n for _, n in structural_dbs),
        )
    result.stats["value_ambiguities"] = sum(len(r.ambiguities) - 1 for r in result.records)
    return result.finish()


def _sql_key(sql: str) -> str:
    try:
        return _parse(sql).sql(dialect="sqlite", normalize=True).lower()
    except Exception:  # noqa: BLE001 - unparseable: compare the whitespace-normalised text
        return " ".join(sql.split()).lower()


def _duplicate_reading(rec: TaskRecord, seen: dict, row: dict, result: BuildResult) -> bool:
    """True (and a ``duplicate`` reject) when ``rec`` repeats a reading already kept in its AVT:
    the same SQL, or, with the database present, the same result under the corpus comparator."""
    sql = rec.verifier.reference_sql[0]
    key = _sql_key(sql)
    res = execute_sql(rec.db_path, sql, timeout_s=EXEC_TIMEOUT_S) if rec.verifier.executable else None
    for other, other_key, other_res in seen.get(rec.avt_id, []):
        same = (
            "SQL"
            if key == other_key
            else ("result" if res is not None and other_res is not None and results_match(res, other_res) else None)
        )
        if same:
            result.reject(
                rec.interpretation_id,
                "duplicate",
                f"same reading as {other} (identical {same}) in AVT {rec.avt_id}: kept once",
                row,
            )
            result.count("duplicate_readings")
            return True
    seen.setdefault(rec.avt_id, []).append((rec.interpretation_id, key, res))
    return False


def _convert(source_id, row, region, db, db_path, schema, columns, seed, result) -> TaskRecord | None:
    sql = row["sql"]
    try:
        text, table, withheld = verbalise(sql, row.get("natural_language_query"))
    except Unverbalisable as exc:
        stage = "parse" if "does not parse" in str(exc) else "shape"
        result.reject(source_id, stage, str(exc), row)
        return None
    if table not in columns:
        result.reject(source_id, "shape", f"table {table} is not in the schema file", row)
        return None
    needed = referenced_columns(sql)
    compatible = [t for t, cols in sorted(columns.items()) if t != table and needed <= cols]
    alternatives = []
    gold = None
    if db_path is not None:
        gold = execute_sql(db_path, sql, timeout_s=EXEC_TIMEOUT_S)
        if not gold.ok:
            result.reject(source_id, "execute", f"reference SQL fails: {gold.one_line()}", row)
            return None
        if not gold.rows:
            result.reject(source_id, "filter", "reference SQL returns no rows", row)
            return None
        for alt in compatible:
            res = execute_sql(db_path, retarget(sql, table, alt), timeout_s=EXEC_TIMEOUT_S)
            alternatives.append(
                {"table": alt, "executes": res.ok, "differs": bool(res.ok and not results_match(gold, res))}
            )
        if not any(a["differs"] for a in alternatives):
            result.reject(
                source_id,
                "filter",
                f"no result-distinct alternative table ({len(compatible)} column-compatible tried)",
                row,
            )
            return None
    else:
        if not compatible:
            result.reject(source_id, "filter", "no other table has every referenced column", row)
            return None
        alternatives = [{"table": alt, "executes": None, "differs": None} for alt in compatible]
    ambs = [
        Ambiguity(
            amb_id="t",
            term=TABLE_TERM,
            aliases=TABLE_ALIASES,
            kind=AmbiguityKind.CRITICAL,
            type="table",
            resolution=f"Use the table {table}.",
            frozen_intent=f"Use the table {table}.",
        )
    ]
    for i, w in enumerate(withheld):
        res_text = f"{human(w['column'])} should be {w['literal']}."
        ambs.append(
            Ambiguity(
                amb_id=f"v{i}",
                term=human(w["column"]),
                aliases=[w["column"]],
                kind=AmbiguityKind.CRITICAL,
                type="value",
                resolution=res_text,
                frozen_intent=res_text,
            )
        )
    avt_id = make_avt_id(CORPUS, text, db, [a.term for a in ambs])
    ambs = [a.model_copy(update={"amb_id": f"{avt_id}-{a.amb_id}"}) for a in ambs]
    executable = db_path is not None
    return TaskRecord.create(
        CORPUS,
        avt_id,
        source_id,
        user_query=text,
        db_id=db,
        db_schema=schema,
        db_path=str(db_path.resolve()) if executable else None,
        ambiguities=ambs,
        oracle_context=OracleContext(clear_query=row.get("natural_language_query"), sql_segments=sql_segments(sql)),
        verifier=VerifierAssets(
            reference_sql=[sql],
            executable=executable,
            skip_reason=None if executable else f"TACO database {region}/{db} is not available here",
        ),
        provenance=Provenance(
            source_ids={
                "region": region,
                "db": db,
                "row": source_id,
                "table": table,
                "source_path": str(row.get("_source_path") or ""),
            },
            build_seed=seed,
            alternatives=alternatives,
            filter_outcomes={
                "executes": True if executable else None,
                "rows": gold.row_count if gold is not None else None,
                "result_distinct_alternatives": sum(bool(a["differs"]) for a in alternatives) if executable else None,
                "column_compatible_alternatives": len(compatible),
            },
        ),
    )
