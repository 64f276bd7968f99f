"""AmbiTab-AmbiQT (deterministic, seeded; AmbiTab §3, App. B; AmbiQT column-synonym subset "C").

Source: Spider dev (``spider/dev.json``, ``tables.json``, ``database/<db>/<db>.sqlite``) plus the
AmbiQT synonym map (``ambiqt/benchmark/col-synonyms/two_col_synonyms.json``).

1. **Candidates** — the AmbiQT generator (``benchmark/col-synonyms/generate.py``), re-implemented
   here: for each dev example and each (column, table) of its SELECT list (not ``*``) that has two
   synonyms ``[syn1, syn2]``, query1 / query2 replace the column by syn1 / syn2 in the normalised,
   lower-cased SQL (quoted literals keep their case). The generator's ``set`` order is replaced by
   a sorted order so builds are reproducible.
2. **Protected keys** [I: Spider PK/FK] — candidates on a primary- or foreign-key column are
   refused (reject stage ``protected_key``), before any database is built.
3. **One SQLite database per unit** (db, table, column) [I: hence the paper's "172 DBs"], built
   under ``$QUANDARY_HOME/ambitab/ambiqt/``: a copy of the Spider database where the column is
   replaced by both synonyms. A per-unit seeded draw picks the synonym column that receives a copy
   of the original values; the other is filled per row by resampling with replacement from them.
   Files are content-addressed (``<unit>.<sha256[:16]>.sqlite``), made read-only after the build,
   and a rebuild with the same seed is byte-identical (fixed page size, VACUUM, no timestamps).
4. **Execution filter** — both readings must execute on the unit database and return different
   results (the BIRD set comparator); otherwise the pair is rejected (stage ``execute`` /
   ``filter``).
5. **Both hidden intents** are emitted (θ1 → query1, θ2 → query2), one ambiguity each [I]:
   term = the original column name (lower-cased, '_' → space), aliases = [original, syn1, syn2],
   resolution = frozen intent = "By <term> I mean the column <table>.<syn_k>."

A Spider database absent here (``wta_1`` ships only its DDL) makes its candidates rejects of stage
``database`` and a reported skipped step.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

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
from pipelines.ambitab.sources import MALFORMED, read_json, require_file, schema_text, sql_segments
from resources.sql import execute_sql
from storage.artifacts import file_sha256
from storage.paths import quandary_home
from storage.sqlnames import quote_ident

CORPUS = "ambiqt"
SPIDER_DEV = Path("spider") / "dev.json"
SPIDER_TABLES = Path("spider") / "tables.json"
SPIDER_DBS = Path("spider") / "database"
SYNONYMS = Path("ambiqt") / "benchmark" / "col-synonyms" / "two_col_synonyms.json"
DEFAULT_SEED = 0
BUILD_VERSION = "1"  # bump when the unit-database recipe changes
EXEC_TIMEOUT_S = 30.0


def units_dir() -> Path:
    p = quandary_home() / "ambitab" / "ambiqt"
    p.mkdir(parents=True, exist_ok=True)
    return p


# ------------------------------------------------------------------- AmbiQT's SQL handling


def lower_outside_quotes(s: str) -> str:
    s = s.replace("``", "`")
    out, quote = [], None
    for c in s:
        if quote is None:
            out.append(c.lower())
            if c in "\"'`":
                quote = c
        else:
            out.append(c)
            if c == quote:
                quote = None
    return "".join(out)


def normalize_sql(sql: str) -> str:
    """AmbiQT's normalisation: no trailing ';', lower-case outside quotes, tight parentheses."""
    sql = sql.strip()
    if sql.endswith(";"):
        sql = sql[:-1]
    sql = " ".join(lower_outside_quotes(sql).strip().split())
    sql = sql.replace(" ,", ",").replace("( ", "(").replace(" )", ")")
    for fn in ("count", "avg", "sum", "min", "max"):
        sql = sql.replace(fn + " (", fn + "(")
    return sql.replace(") ,", "),")


def _tokens(sql: str) -> list[str]:
    return normalize_sql(sql).replace(",", " , ").replace("(", " ( ").replace(")", " ) ").split()


def _aliases(tokens: list[str]) -> dict[str, str]:
    return {tokens[i + 1].lower(): tokens[i - 1].lower() for i in range(1, len(tokens) - 1) if tokens[i] == "as"}


def _table_of(tokens: list[str], idx: int, aliases: dict[str, str]) -> str | None:
    tok = tokens[idx]
    if len(tok) > 2 and tok[2] == ".":  # Spider's "t1.col" aliases
        return aliases.get(tok[:2])
    return tokens[tokens.index("from") + 1] if "from" in tokens else None


def _column_name(expr: str) -> str:
    if "(" in expr and ")" in expr:
        return _column_name(expr[expr.find("(") + 1 : expr.find(")")])
    if " " in expr:
        return _column_name(expr.split(" ")[-1])
    return expr[expr.rfind(".") + 1 :] if "." in expr else expr


def select_columns(sql: str) -> list[tuple[str, str]]:
    """(column, table) pairs of the SELECT list, as AmbiQT finds them (sorted, no '*')."""
    norm = normalize_sql(sql)
    tokens = _tokens(sql)
    aliases = _aliases(tokens)
    cols = {_column_name(c.strip()) for c in norm[norm.find("select") + 6 : norm.find("from")].strip().split(",")}
    found = set()
    for i, tok in enumerate(tokens):
        if tok == "from":
            break
        name = tok[3:] if len(tok) > 2 and tok[2] == "." else tok
        if name in cols and name != "*":
            table = _table_of(tokens, i, aliases)
            if table:
                found.add((name, table))
    return sorted(found)


def replace_column(sql: str, table: str, column: str, new: str) -> str:
    tokens = _tokens(sql)
    aliases = _aliases(tokens)
    for i, tok in enumerate(tokens):
        dotted = len(tok) > 2 and tok[2] == "."
        if (tok == column or (dotted and tok[3:] == column)) and _table_of(tokens, i, aliases) == table:
            tokens[i] = tok[:3] + new if dotted else new
    return normalize_sql(" ".join(tokens))


# ------------------------------------------------------------------------------ candidates


@dataclass(frozen=True)
class Candidate:
    example_idx: int
    db_id: str
    question: str
    orig_query: str
    table: str  # lower-case, as AmbiQT keys it
    column: str
    syn1: str
    syn2: str
    query1: str
    query2: str

    @property
    def unit(self) -> tuple[str, str, str]:
        return (self.db_id, self.table, self.column)

    @property
    def source_id(self) -> str:
        return f"dev[{self.example_idx}]:{self.table}.{self.column}"


def _lower_map(obj):
    if isinstance(obj, dict):
        return {k.lower(): _lower_map(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_lower_map(v) for v in obj]
    return obj.lower() if isinstance(obj, str) else obj


def generate_candidates(dev: list[dict], synonyms: dict, build: BuildResult | None = None) -> list[Candidate]:
    syn = _lower_map(synonyms)
    out = []
    for idx, ex in enumerate(dev):
        try:
            db, sql, question = ex["db_id"], ex["query"], ex["question"]
            if not all(isinstance(v, str) for v in (db, sql, question)):
                raise TypeError("db_id, query and question must be strings")
        except (KeyError, TypeError) as exc:  # the row is not what Spider's format promises
            if build is not None:
                build.reject(f"dev[{idx}]", MALFORMED, f"{SPIDER_DEV} item {idx + 1}: unreadable ({exc!r})", ex)
            continue
        try:
            pairs = select_columns(sql)
        except (ValueError, IndexError) as exc:
            if build is not None:
                build.reject(f"dev[{idx}]", "parse", f"Spider example unusable: {exc!r}", ex)
            continue
        for column, table in pairs:
            alts = syn.get(db.lower(), {}).get(table, {}).get(column)
            if not alts or len(alts) < 2:
                continue
            out.append(
                Candidate(
                    idx,
                    db,
                    question,
                    normalize_sql(sql),
                    table,
                    column,
                    alts[0],
                    alts[1],
                    replace_column(sql, table, column, alts[0]),
                    replace_column(sql, table, column, alts[1]),
                )
            )
    return out


def protected_columns(tables_json: list[dict]) -> dict[str, set[tuple[str, str]]]:
    """db_id -> {(table, column)} (lower-case) that are a primary or foreign key in Spider."""
    out: dict[str, set[tuple[str, str]]] = {}
    for t in tables_json:
        names = t["table_names_original"]
        cols = t["column_names_original"]
        idxs = set()
        for pk in t["primary_keys"]:
            idxs.update(pk if isinstance(pk, list) else [pk])
        for a, b in t["foreign_keys"]:
            idxs.update((a, b))
        out[t["db_id"]] = {(names[cols[i][0]].lower(), cols[i][1].lower()) for i in idxs if cols[i][0] >= 0}
    return out


# -------------------------------------------------------------------------- unit databases


_q = quote_ident


def unit_seed(seed: int, unit: tuple[str, str, str]) -> int:
    return int(hashlib.sha256(f"{seed}:{'|'.join(unit)}".encode()).hexdigest()[:12], 16)


def build_unit_db(
    source: Path, unit: tuple[str, str, str], syns: tuple[str, str], seed: int, out_dir: Path
) -> tuple[Path, dict]:
    """Build (or reuse) the content-addressed database of one unit; returns (path, facts)."""
    db_id, table, column = unit
    source_sha = file_sha256(source)
    key = hashlib.sha256(json.dumps([BUILD_VERSION, source_sha, unit, syns, seed]).encode()).hexdigest()[:16]
    manifest = out_dir / "manifest" / f"{key}.json"
    if manifest.is_file():
        facts = json.loads(manifest.read_text())
        path = out_dir / facts["file"]
        if path.is_file():
            return path, facts
    rng = random.Random(unit_seed(seed, unit))
    copy_idx = rng.randrange(2)  # which synonym column receives the original values
    copy_col, sample_col = syns[copy_idx], syns[1 - copy_idx]
    tmp = out_dir / f".{db_id}.{table}.{column}.{os.getpid()}.tmp"
    tmp.unlink(missing_ok=True)
    try:
        src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
        dst = sqlite3.connect(tmp)
        # a temp file renamed into place only when complete: no journal or fsync needed (and no
        # effect on the bytes of the finished file)
        dst.execute("PRAGMA journal_mode = OFF")
        dst.execute("PRAGMA synchronous = OFF")
        try:
            src.backup(dst)
        finally:
            src.close()
        try:
            real_table, real_col, col_type = _resolve_column(dst, table, column)
            dst.execute(f"ALTER TABLE {_q(real_table)} RENAME COLUMN {_q(real_col)} TO {_q(copy_col)}")
            dst.execute(f"ALTER TABLE {_q(real_table)} ADD COLUMN {_q(sample_col)} {col_type}")
            rows = dst.execute(f"SELECT rowid, {_q(copy_col)} FROM {_q(real_table)} ORDER BY rowid").fetchall()
            values = [v for _, v in rows]
            if values:
                drawn = rng.choices(values, k=len(values))
                dst.executemany(
                    f"UPDATE {_q(real_table)} SET {_q(sample_col)} = ? WHERE rowid = ?",
                    [(d, rid) for d, (rid, _) in zip(drawn, rows)],
                )
            dst.commit()
            dst.execute("VACUUM")
        finally:
            dst.close()
        sha = file_sha256(tmp)
        name = f"{db_id}__{table}__{column}.{sha[:16]}.sqlite"
        final = out_dir / name
        if final.exists():
            tmp.unlink()
        else:
            os.chmod(tmp, 0o444)
            os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    facts = {
        "file": name,
        "sha256": sha,
        "copy_column": copy_col,
        "resampled_column": sample_col,
        "table": real_table,
        "rows": len(values),
        "bytes": final.stat().st_size,
    }
    manifest.parent.mkdir(parents=True, exist_ok=True)
    tmp_m = manifest.with_suffix(f".{os.getpid()}.tmp")
    tmp_m.write_text(json.dumps(facts, sort_keys=True))
    os.replace(tmp_m, manifest)
    return final, facts


def _resolve_column(con: sqlite3.Connection, table: str, column: str) -> tuple[str, str, str]:
    tables = {r[0].lower(): r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if table not in tables:
        raise ValueError(f"table {table!r} not in the database")
    real_table = tables[table]
    info = {r[1].lower(): (r[1], r[2] or "") for r in con.execute(f"PRAGMA table_info({_q(real_table)})")}
    if column not in info:
        raise ValueError(f"column {table}.{column} not in the database")
    return real_table, info[column][0], info[column][1]


# ----------------------------------------------------------------------------------- build


def build(
    data_root: Path,
    seed: int = DEFAULT_SEED,
    out_dir: Path | None = None,
    limit_units: int | None = None,
    progress=None,
) -> BuildResult:
    result = BuildResult(CORPUS, stats={"seed": seed})
    dev = read_json(require_file(data_root / SPIDER_DEV, "Spider dev.json"))
    tables = read_json(require_file(data_root / SPIDER_TABLES, "Spider tables.json"))
    synonyms = read_json(require_file(data_root / SYNONYMS, "AmbiQT two_col_synonyms.json"))
    out_dir = out_dir or units_dir()
    out_dir.mkdir(parents=True, exist_ok=True)

    cands = generate_candidates(dev, synonyms, result)
    result.stats["generated_items"] = len(cands)
    result.stats["generated_units"] = len({c.unit for c in cands})
    protected = protected_columns(tables)
    kept = []
    for c in cands:
        if (c.table, c.column) in protected.get(c.db_id, set()):
            result.reject(
                c.source_id,
                "protected_key",
                f"{c.table}.{c.column} is a Spider primary/foreign key of {c.db_id}",
                c.__dict__,
            )
        else:
            kept.append(c)
    result.stats["after_key_filter_items"] = len(kept)

    by_unit: dict[tuple, list[Candidate]] = defaultdict(list)
    for c in kept:
        by_unit[c.unit].append(c)
    missing_dbs: dict[str, int] = defaultdict(int)
    buildable = {}
    for unit, cs in sorted(by_unit.items()):
        src = data_root / SPIDER_DBS / unit[0] / f"{unit[0]}.sqlite"
        if not src.is_file():
            missing_dbs[unit[0]] += len(cs)
            for c in cs:
                result.reject(
                    c.source_id,
                    "database",
                    f"Spider database {unit[0]}.sqlite not present "
                    f"(only its DDL ships); cannot build unit {'/'.join(unit)}",
                    c.__dict__,
                )
            continue
        buildable[unit] = (src, cs)
    for db, n in sorted(missing_dbs.items()):
        result.skip(f"build+execute {db}", f"Spider database {db}.sqlite is absent from the data folder", n)
    result.stats["candidates_before_execution"] = sum(len(cs) for _, cs in buildable.values())
    result.stats["candidate_units"] = len(buildable)

    units = sorted(buildable.items())
    if limit_units is not None:
        units = units[:limit_units]
    tick = item_progress("ambiqt units", len(units), progress)
    built_units, db_bytes = set(), 0
    for unit, (src, cs) in units:
        tick.advance()
        try:
            path, facts = build_unit_db(src, unit, (cs[0].syn1, cs[0].syn2), seed, out_dir)
        except Exception as exc:  # noqa: BLE001 - a unit that cannot be built rejects its items
            for c in cs:
                result.reject(c.source_id, "database", f"unit {'/'.join(unit)} build failed: {exc}", c.__dict__)
            continue
        try:
            schema = schema_text(path)
        except Exception as exc:  # noqa: BLE001
            for c in cs:
                result.reject(c.source_id, "database", f"unit database unreadable: {exc}", c.__dict__)
            continue
        for c in cs:
            recs = _convert(c, path, facts, schema, seed, result)
            if recs:
                built_units.add(unit)
                result.records.extend(recs)
        db_bytes += facts["bytes"]
    tick.close()
    result.stats["retained_items"] = len(result.records) // 2
    result.stats["retained_units"] = len(built_units)
    result.stats["unit_db_bytes"] = db_bytes
    result.stats["units_dir"] = str(out_dir)
    return result.finish()


def _convert(c: Candidate, path: Path, facts: dict, schema: str, seed: int, result: BuildResult) -> list[TaskRecord]:
    outs = []
    for k, sql in ((1, c.query1), (2, c.query2)):
        res = execute_sql(path, sql, timeout_s=EXEC_TIMEOUT_S)
        if not res.ok:
            result.reject(c.source_id, "execute", f"query{k} fails on the unit database: {res.one_line()}", c.__dict__)
            return []
        outs.append(res)
    if results_match(outs[0], outs[1]):
        result.reject(c.source_id, "filter", "query1 and query2 return equal results", c.__dict__)
        return []
    term = c.column.replace("_", " ")
    avt_id = make_avt_id(CORPUS, c.question, c.db_id, [term])
    records = []
    for k, (syn, sql, res) in enumerate(((c.syn1, c.query1, outs[0]), (c.syn2, c.query2, outs[1])), 1):
        resolution = f"By {term} I mean the column {c.table}.{syn}."
        interp = f"{c.example_idx}:{c.table}.{c.column}:q{k}"
        records.append(
            TaskRecord.create(
                CORPUS,
                avt_id,
                interp,
                user_query=c.question,
                db_id=c.db_id,
                db_schema=schema,
                db_path=str(path.resolve()),
                ambiguities=[
                    Ambiguity(
                        amb_id=f"{avt_id}-a0",
                        term=term,
                        aliases=[c.column, c.syn1, c.syn2],
                        kind=AmbiguityKind.CRITICAL,
                        type="column_synonym",
                        resolution=resolution,
                        frozen_intent=resolution,
                    )
                ],
                oracle_context=OracleContext(sql_segments=sql_segments(sql)),
                verifier=VerifierAssets(reference_sql=[sql]),
                provenance=Provenance(
                    source_ids={
                        "spider_dev_index": str(c.example_idx),
                        "db_id": c.db_id,
                        "table": c.table,
                        "column": c.column,
                        "unit_db": facts["file"],
                        "unit_sha256": facts["sha256"],
                    },
                    build_seed=seed,
                    filter_outcomes={
                        "protected_key": False,
                        "both_execute": True,
                        "results_differ": True,
                        "rows": res.row_count,
                        "copy_column": facts["copy_column"],
                        "resampled_column": facts["resampled_column"],
                    },
                    alternatives=[{"interpretation": f"q{3 - k}", "synonym": c.syn2 if k == 1 else c.syn1}],
                    notes=[f"original query: {c.orig_query}"],
                ),
            )
        )
    return records
