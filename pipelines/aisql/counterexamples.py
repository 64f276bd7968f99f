"""Counterexample databases (#33 item 2; the test-suite idea of Zhong et al., 2020).

EX and the structural layer decide on SemBench's data only: ``LIMIT 5`` vs ``LIMIT 10`` on a short
list, ``NOT IN`` vs ``NOT EXISTS`` with NULLs, a DISTINCT where the data has no duplicates look
equal there. This module builds small databases from the schema — the column types, unique
non-NULL key columns, the literal values both queries mention, NULLs and duplicate rows — and runs
both queries on each, with the aligned AI calls valued by the same behaviour on both sides (all
TRUE, all FALSE, seeded functions of the inputs; opposite polarity tried as the structural layer
does). A database and behaviour where the results differ is a **witness**: the queries are not
equivalent, and the pair is rejected with it. Agreement on every generated database is reported as
"equal on the test suite", which is *not* a proof and is counted separately.

The generated databases live in one temporary DuckDB file (one schema per database); the queries
are rewritten to read that schema's tables and run through the same sandboxed executor as every
untrusted query (deadline, memory cap).
"""

import itertools
import random
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
from sqlglot import exp

from pipelines.aisql.diffs import differing_rows, rows_match
from pipelines.aisql.rewrite import operator_name
from pipelines.aisql.structural import (
    MAX_POLARITY_PAIRS,
    Valuation,
    _literals,
    _symbols,
    pair_calls,
    substitute,
)

DATABASES = 8  # generated databases per pair (each run costs a sandbox round trip)
MAX_ROWS = 5  # rows per table before duplicates
MAX_ROWS_CAP = 30  # odd databases get more rows when a LIMIT asks for them (LIMIT 5 vs LIMIT 10)
HASH_BEHAVIOURS = 2
DIFFER, AGREE, CANNOT = "differ", "agree", "cannot_decide"


@dataclass
class SuiteResult:
    verdict: str  # differ | agree | cannot_decide
    reason: str
    databases: int = 0
    behaviours: int = 0
    witness: dict = field(default_factory=dict)


def _cte_names(tree: exp.Expression) -> set[str]:
    return {c.alias.lower() for c in tree.find_all(exp.CTE) if c.alias}


def _tables(tree: exp.Expression, schema: dict) -> list[tuple[str, str]]:
    ctes = _cte_names(tree)
    out = []
    for t in tree.find_all(exp.Table):
        if not t.db and t.name.lower() in ctes:
            continue
        db = (t.db or "main").lower()
        if t.name.lower() not in schema.get(db, {}):
            raise KeyError(f"table {t.sql('duckdb')} is not in the schema")
        out.append((db, t.name.lower()))
    return out


def _retarget(tree: exp.Expression, k: int, copy: bool = True) -> exp.Expression:
    """Every base table read from generated database ``k``'s schema."""
    out = tree.copy() if copy else tree
    ctes = _cte_names(out)
    for t in out.find_all(exp.Table):
        if not t.db and t.name.lower() in ctes:
            continue
        t.set("db", exp.to_identifier(f"ts{k}_{(t.db or 'main').lower()}"))
        t.set("catalog", None)
    return out


def _suite_sql(valued: exp.Expression, k: int) -> str:
    """A valued query (our copy, changed in place) on generated database ``k``."""
    return _retarget(valued, k, copy=False).sql("duckdb", copy=False)


def _like_matches(pattern: str) -> set[str]:
    """Texts a LIKE pattern matches other than the pattern itself: each '_' another character, each
    '%' nothing or some text (an id 'a-b' matches 'a_b', which '=' tells apart; blind-11)."""
    return {pattern.replace("_", "-").replace("%", ""), pattern.replace("%", "zz"), pattern.replace("%", "")}


def _query_literals(trees) -> tuple[list[str], list[float]]:
    strings, numbers = set(), set()
    for tree in trees:
        for lit in tree.find_all(exp.Literal):
            anc = lit.parent
            in_call = False
            while anc is not None:
                if isinstance(anc, exp.Anonymous) and operator_name(anc):
                    in_call = True
                    break
                anc = anc.parent
            if in_call:
                continue
            if lit.is_string:
                strings.add(lit.this)
                if isinstance(lit.parent, (exp.Like, exp.ILike)) and lit is lit.parent.expression:
                    strings.update(_like_matches(lit.this))
            else:
                try:
                    numbers.add(float(lit.this))
                except ValueError:
                    pass
    return sorted(strings), sorted(numbers)


def _pool(type_name: str, strings: list[str], numbers: list[float]) -> list:
    t = type_name.upper()
    if any(x in t for x in ("INT", "BIGINT")):
        ints = {int(n) for n in numbers} | {int(n) + 1 for n in numbers} | {int(n) - 1 for n in numbers}
        return sorted(ints | {0, 1, 2, 3})
    if any(x in t for x in ("DOUBLE", "FLOAT", "DECIMAL", "REAL", "NUMERIC")):
        return sorted(set(numbers) | {n + 0.5 for n in numbers} | {0.0, 1.0, 2.5})
    if "BOOL" in t:
        return [True, False]
    if "DATE" in t or "TIME" in t:
        return ["2020-01-01", "2021-06-15"]
    if "VARCHAR" in t or "TEXT" in t or "STRING" in t:
        return strings + ["x", "y"]
    return []


def _unique(pool: list, type_name: str, rng: random.Random) -> list:
    """MAX_ROWS + 2 distinct non-NULL values for a key column (the pool's first, shuffled)."""
    values = list(dict.fromkeys(pool))
    rng.shuffle(values)
    n = MAX_ROWS_CAP + 2
    numeric = any(x in type_name.upper() for x in ("INT", "DOUBLE", "FLOAT", "DECIMAL", "REAL", "NUMERIC"))
    i = 1000
    while len(values) < n:
        values.append(i if numeric else f"k{i}")
        i += 1
    return values[:n]


def build_databases(
    path: Path, tables, schema: dict, keys: dict, strings, numbers, seed: int, max_rows: int = MAX_ROWS
) -> None:
    """``DATABASES`` schemas ts<k>_<db> in the DuckDB file ``path``, each with every table in
    ``tables``: random rows over the pools, NULLs, duplicate rows, unique non-NULL keys."""
    rng = random.Random(seed)
    con = duckdb.connect(str(path))
    try:
        for k in range(DATABASES):
            for db in sorted({d for d, _ in tables}):
                con.execute(f'CREATE SCHEMA "ts{k}_{db}"')
            for db, name in sorted(set(tables)):
                cols = schema[db][name]
                key = {c.lower() for c in keys.get(name, ()) or keys.get(f"{db}.{name}", ())}
                ddl = ", ".join(f'"{c}" {ty}' for c, ty in cols.items())
                con.execute(f'CREATE TABLE "ts{k}_{db}"."{name}" ({ddl})')
                n = rng.randint(0 if k else 1, MAX_ROWS) if k % 2 == 0 else max_rows
                key_values = {
                    c: _unique(_pool(ty, strings, numbers), ty, rng) for c, ty in cols.items() if c.lower() in key
                }
                rows = []
                for i in range(n):
                    row = []
                    for c, ty in cols.items():
                        pool = _pool(ty, strings, numbers)
                        if c in key_values:
                            row.append(key_values[c][i])
                        elif pool and rng.random() > 0.2:
                            mentioned = [v for v in pool if v in strings or v in numbers]
                            row.append(rng.choice(mentioned if mentioned and rng.random() < 0.6 else pool))
                        else:
                            row.append(None)
                    rows.append(tuple(row))
                for _ in range(rng.randint(0, 2) if rows else 0):  # duplicates (keys stay unique)
                    src = rng.choice(rows)
                    i = len(rows)
                    rows.append(tuple(key_values[c][i] if c in key_values else v for c, v in zip(cols, src)))
                if rows:  # one statement (executemany is slow in DuckDB)
                    marks = ", ".join(["(" + ", ".join("?" for _ in cols) + ")"] * len(rows))
                    con.execute(f'INSERT INTO "ts{k}_{db}"."{name}" VALUES {marks}', [v for r in rows for v in r])
    finally:
        con.close()


def _dump(path: Path, k: int, tables) -> dict:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {
            f"{db}.{name}": [list(map(str, r)) for r in con.execute(f'SELECT * FROM "ts{k}_{db}"."{name}"').fetchall()]
            for db, name in sorted(set(tables))
        }
    finally:
        con.close()


def search(
    run, gold_tree, cand_tree, schema: dict, keys: dict, *, ordered: bool, seed: int = 0, workdir=None
) -> SuiteResult:
    """Look for a generated database and an AI behaviour on which gold and candidate differ.
    ``run(db_path, sql)`` → (status, rows) runs one query (the sandboxed executor)."""
    g_syms, c_syms, bool_pairs, notes = _symbols(gold_tree, cand_tree, pair_calls(gold_tree, cand_tree))
    if notes:
        return SuiteResult(CANNOT, "the AI calls do not pair up: " + "; ".join(notes))
    try:
        tables = _tables(gold_tree, schema) + _tables(cand_tree, schema)
    except KeyError as exc:
        return SuiteResult(CANNOT, str(exc).strip("'\""))
    strings, numbers = _query_literals([gold_tree, cand_tree])
    all_syms = {s.key: s for s in g_syms + c_syms}
    domains = {k: _literals([gold_tree, cand_tree], s.kind) for k, s in all_syms.items() if s.kind != "bool"}
    behaviours = [
        Valuation("const", True, "every AI call TRUE / the last value"),
        Valuation("const", False, "every AI call FALSE / the first value"),
    ]
    behaviours += [Valuation("hash", 7919 * seed + r, f"seeded behaviour {r}") for r in range(HASH_BEHAVIOURS)]
    flip_sets = (
        [dict(zip(bool_pairs, bits)) for bits in itertools.product((False, True), repeat=len(bool_pairs))]
        if len(bool_pairs) <= MAX_POLARITY_PAIRS
        else None
    )
    if flip_sets is None:
        return SuiteResult(CANNOT, f"more than {MAX_POLARITY_PAIRS} aligned AI conditions (polarity choices)")
    tmp = tempfile.TemporaryDirectory(dir=workdir, prefix="aisql_suite_")
    try:
        path = Path(tmp.name) / "suite.duckdb"
        limits = [
            int(li.expression.this)
            for t in (gold_tree, cand_tree)
            for li in t.find_all(exp.Limit)
            if isinstance(li.expression, exp.Literal) and li.expression.is_int
        ]
        max_rows = min(MAX_ROWS_CAP, max([MAX_ROWS, *(n + 2 for n in limits)]))
        build_databases(path, tables, schema, keys, strings, numbers, seed, max_rows)
        ran = 0
        witness_for_all = None
        for flips in flip_sets:
            witness = None
            for k, val in itertools.product(range(DATABASES), behaviours):
                gs, grows = run(path, _suite_sql(substitute(gold_tree, g_syms, val, domains), k))
                if gs != "ok":
                    continue
                cs, crows = run(path, _suite_sql(substitute(cand_tree, c_syms, val, domains, flips), k))
                if cs != "ok":
                    continue
                ran += 1
                if not rows_match(grows, crows, ordered):
                    witness = {
                        "database": _dump(path, k, tables),
                        "behaviour": val.label,
                        "gold": [list(map(str, r)) for r in grows[:10]],
                        "candidate": [list(map(str, r)) for r in crows[:10]],
                        "differ": differing_rows(grows, crows, ordered),
                    }
                    break
            if witness is None:
                n = len(behaviours)
                return SuiteResult(
                    AGREE if ran else CANNOT,
                    f"equal on the test suite ({DATABASES} generated databases × {n} AI behaviours); not a proof"
                    if ran
                    else "no generated database ran both queries",
                    DATABASES,
                    n,
                )
            witness_for_all = witness_for_all or witness
        return SuiteResult(
            DIFFER,
            f"results differ on a generated database under {witness_for_all['behaviour']}: "
            f"only in gold {witness_for_all['differ'].get('only_in_gold', '(order)')}, "
            f"only in candidate {witness_for_all['differ'].get('only_in_candidate', '(order)')}"[:400],
            DATABASES,
            len(behaviours),
            witness_for_all,
        )
    finally:
        tmp.cleanup()
