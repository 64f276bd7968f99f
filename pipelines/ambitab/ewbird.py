"""AmbiTab-EW-Bird ("evidence-withheld" BIRD; deterministic build + LLM keep/drop filter).

Source: BIRD dev (``bird/dev/dev.jar.json``, lower-case ``sql``) — [I] the source's test split is
the public BIRD dev set, so every record here has ``split="dev"`` (BIRD train is not available).

Build (deterministic):

1. ``evidence`` is split on ';' and empty pieces dropped; a row without evidence has nothing to
   register and is rejected (stage ``no_evidence``).
2. Each hint becomes one **masked knowledge ambiguity** whose resolution is the hint verbatim.
   [I] Hints with the same term (casefolded, whitespace collapsed) are one ambiguity, as in
   BIRD-Interact: its resolution is those hints joined with "; " in source order, its concepts
   the union (the merges are listed in ``provenance.filter_outcomes``), so the full asker's one
   question per distinct term gets every hint and Rec = Prec = 1 holds.
   [I] Term: the text before the first of " refers to ", " means ", " = ", ":" that occurs, tried
   in that order (the whole hint when none occurs). Concepts: the quoted literals and the schema identifiers on the right-hand side.
3. All hints are removed from the visible spec (they are the oracle's ``withheld_evidence``); the
   spec keeps the question, the schema (CREATE TABLE + 3 rows where the database is present, the
   DDL from ``dev_tables.jar.json`` otherwise) and BIRD's column meanings, minus any meaning that
   quotes one of the row's hints (it would show the withheld evidence).
4. Where the database is present (superhero here) the reference SQL must execute (else reject);
   elsewhere the record is structural (``verifier.executable=False`` with the reason).

Filter (LLM, through the council's ``solvers`` role; a ``default`` council stands in when the
config has no ``solvers``): keep a row if **some** member fails without the evidence and succeeds
with it (the paper: Qwen3-Coder-30B-A3B *or* Gemma-3-27B; one sample, [I] temperature as
configured). It needs the database, so it runs only on executable rows; the step is reported as
skipped for the rest, and entirely when no council is given.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

from pydantic import BaseModel, Field

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
from pipelines.ambitab.sources import iter_json_rows, read_json, require_file, schema_text, sql_segments
from pipelines.core.prompting import messages
from resources.sql import execute_sql

CORPUS = "ew_bird"
DEV = Path("bird") / "dev" / "dev.jar.json"
DEV_TABLES = Path("bird") / "dev" / "dev_tables.jar.json"
COLUMN_MEANINGS = Path("bird") / "metadata" / "column_meaning.json"
DB_ROOT = Path("bird") / "dev_databases"
REQUIRED_KEYS = ("question_id", "db_id", "question", "evidence", "sql")
SEPARATORS = (" refers to ", " means ", " = ", ":")
EXEC_TIMEOUT_S = 30.0
FILTER_ROLE = "solvers"
FILTER_PROMPT_VERSION = "ewbird-filter-1"


# ------------------------------------------------------------------------------------ hints


def split_evidence(evidence: str | None) -> list[str]:
    return [h.strip() for h in (evidence or "").split(";") if h.strip()]


_QUOTED = re.compile(r"'([^']+)'|\"([^\"]+)\"|`([^`]+)`")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?")


def parse_hint(hint: str, identifiers: set[str] | None = None) -> tuple[str, str, list[str]]:
    """(term, separator kind, concepts) of one hint [I]."""
    # the separators in priority order (the local dev counts match this reading: 1,752 "refers to")
    best = next(((hint.find(sep), sep) for sep in SEPARATORS if hint.find(sep) > 0), None)
    if best is None:
        return hint.strip(), "other", []
    pos, sep = best
    term = hint[:pos].strip() or hint.strip()
    rhs = hint[pos + len(sep) :]
    concepts: list[str] = []
    for m in _QUOTED.finditer(rhs):
        lit = next(g for g in m.groups() if g)
        if lit not in concepts:
            concepts.append(lit)
    unquoted = _QUOTED.sub(" ", rhs)
    idents = {i.lower() for i in identifiers} if identifiers else None
    for tok in _IDENT.findall(unquoted):
        name = tok.split(".")[-1]
        if (idents is not None and name.lower() in idents) or (idents is None and "_" in name):
            if name not in concepts:
                concepts.append(name)
    kind = {" refers to ": "refers_to", " means ": "means", " = ": "equals", ":": "colon"}[sep]
    return term, kind, concepts


# ---------------------------------------------------------------------------------- schemas


def ddl_from_tables(tables: list[dict]) -> str:
    """CREATE TABLE text from ``dev_tables.jar.json`` entries (no rows: the database is absent)."""
    parts = []
    for t in tables:
        cols = ",\n".join(f'  "{c}" {ty.upper()}' for c, ty in zip(t["column_names_original"], t["column_types"]))
        parts.append(
            f'CREATE TABLE "{t["table_name_original"]}" (\n{cols}\n);\n'
            f"/* example rows unavailable: the database is not present */"
        )
    return "\n\n".join(parts)


class _DevSchemas:
    def __init__(self, data_root: Path):
        self.tables: dict[str, list[dict]] = defaultdict(list)
        p = data_root / DEV_TABLES
        if p.is_file():
            for v in read_json(p).values():
                self.tables[v["db_id"]].append(v)
        self.meanings: dict[str, dict[str, str]] = defaultdict(dict)
        m = data_root / COLUMN_MEANINGS
        if m.is_file():
            for k, v in read_json(m).items():
                self.meanings[k.split("|", 1)[0]][k] = v
        self.data_root = data_root

    def db_path(self, db_id: str) -> Path:
        return self.data_root / DB_ROOT / db_id / f"{db_id}.sqlite"

    def identifiers(self, db_id: str) -> set[str]:
        out = set()
        for t in self.tables.get(db_id, []):
            out.add(t["table_name_original"])
            out.update(t["column_names_original"])
        return out


# ----------------------------------------------------------------------------------- filter


class SolverSQL(BaseModel):
    """The filter solver's answer (the paper's solver output, reasoning first)."""

    reasoning: str = Field(default="", description="schema linking and plan, briefly")
    output: str = Field(description="one SQLite SELECT statement")


def filter_messages(record: TaskRecord, with_evidence: bool) -> list[dict]:
    spec = record.spec
    parts = [
        f"You are a good data scientist with great {spec.sql_engine_name} writing ability. "
        f'You have a DB called "{spec.db_name}".',
        "## DB Schema Information:\n" + spec.db_schema,
    ]
    if spec.column_meanings:
        parts.append("## DB Column Meanings:\n" + json.dumps(spec.column_meanings, ensure_ascii=False))
    if with_evidence:
        parts.append("## External Knowledge:\n" + "\n".join(record.oracle_context.withheld_evidence))
    parts.append("## Text-to-SQL Question:\n" + spec.user_query)
    parts.append('Answer with JSON {"reasoning": "...", "output": "<one SQLite statement>"}.')
    return messages(None, "\n\n".join(parts))


def _solved(record: TaskRecord, sql: str | None, gold) -> bool:
    if not sql:
        return False
    res = execute_sql(record.db_path, sql, timeout_s=EXEC_TIMEOUT_S)
    return bool(res.ok and results_match(gold, res, record.verifier.comparison))


def solvers_council(council_factory):
    """The ``solvers`` council, else ``default``; None when the config has neither."""
    for role in (FILTER_ROLE, "default"):
        try:
            return council_factory(role)
        except KeyError:
            continue
    return None


def run_filter(records: list[TaskRecord], council, golds: dict, result: BuildResult, progress=None) -> list[TaskRecord]:
    """Keep rows where some member fails without the evidence and succeeds with it."""
    members = council.member_names
    tick = item_progress("ew_bird filter (rows)", len(records), progress)
    verdicts: dict[str, dict] = {r.record_id: {} for r in records}
    calls = cached = failed = 0
    for member in members:
        for with_ev in (False, True):
            msgs = [filter_messages(r, with_ev) for r in records]
            tags = [
                {
                    "stage": "ambitab_ew_bird_filter",
                    "candidate_id": r.record_id,
                    "with_evidence": with_ev,
                    "prompt_version": FILTER_PROMPT_VERSION,
                }
                for r in records
            ]
            answers = council.ask_many(member, msgs, SolverSQL, tags=tags)
            for r, a in zip(records, answers):
                calls += 1
                cached += bool(a.cached)
                failed += not a.ok
                sql = a.parsed.output if a.ok and a.parsed else None
                verdicts[r.record_id].setdefault(member, {})["with" if with_ev else "without"] = {
                    "solved": _solved(r, sql, golds[r.record_id]),
                    "call_id": a.call_id,
                    "status": a.status,
                }
        if progress:
            progress(f"ew_bird filter: member {member} done ({calls} calls, {cached} cached, {failed} failed)")
    kept = []
    for r in records:
        tick.advance()
        v = verdicts[r.record_id]
        benefit = [m for m, o in v.items() if not o["without"]["solved"] and o["with"]["solved"]]
        outcome = {
            "llm_filter": "kept" if benefit else "dropped",
            "benefit_members": benefit,
            "per_member": {m: {k: o[k]["solved"] for k in ("without", "with")} for m, o in v.items()},
        }
        if benefit:
            prov = r.provenance.model_copy(update={"filter_outcomes": {**r.provenance.filter_outcomes, **outcome}})
            kept.append(r.model_copy(update={"provenance": prov}))
        else:
            result.reject(
                r.provenance.source_ids["question_id"],
                "llm_filter",
                "no solver member failed without the evidence and succeeded with it",
                outcome,
            )
    tick.close()
    result.stats.update(filter_calls=calls, filter_cached=cached, filter_failed=failed, filter_kept=len(kept))
    return kept


# ------------------------------------------------------------------------------------ build


def build(
    data_root: Path,
    seed: int = 0,
    council_factory=None,
    max_rows: int | None = None,
    db_ids: list[str] | None = None,
    progress=None,
) -> BuildResult:
    result = BuildResult(CORPUS, stats={"seed": seed})
    src = require_file(data_root / DEV, "BIRD dev file dev.jar.json")
    schemas = _DevSchemas(data_root)
    rows = list(iter_json_rows(src, result, REQUIRED_KEYS, id_key="question_id"))
    if db_ids:
        rows = [(s, r) for s, r in rows if r["db_id"] in db_ids]
    if max_rows is not None:
        rows = rows[:max_rows]
    result.stats["source_rows"] = len(rows)
    tick = item_progress("ew_bird rows", len(rows), progress)
    executable, structural, golds = [], [], {}
    hint_kinds: dict[str, int] = defaultdict(int)
    for sid, row in rows:
        tick.advance()
        rec, gold = _convert(sid, row, schemas, result, seed, hint_kinds)
        if rec is None:
            continue
        if rec.verifier.executable:
            executable.append(rec)
            golds[rec.record_id] = gold
        else:
            structural.append(rec)
    tick.close()
    result.stats["hints"] = sum(hint_kinds.values())
    result.stats["hint_separators"] = dict(sorted(hint_kinds.items()))
    result.stats["executable_rows"] = len(executable)
    result.stats["structural_rows"] = len(structural)
    missing = sorted({r.db_id for r in structural})
    if missing:
        result.skip(
            "execute + llm filter (databases absent)",
            f"BIRD dev databases not present here: {', '.join(missing)}; records are structural",
            len(structural),
        )
    council = solvers_council(council_factory) if council_factory is not None and executable else None
    if executable and council is None:
        why = (
            "LLM steps off (no council config file, or --llm off)"
            if council_factory is None
            else "the council config has no `solvers` role (and no `default` council)"
        )
        result.skip(
            "llm keep/drop filter", f"{why}; {len(executable)} executable rows kept unfiltered", len(executable)
        )
        kept = [
            r.model_copy(
                update={
                    "provenance": r.provenance.model_copy(
                        update={"filter_outcomes": {**r.provenance.filter_outcomes, "llm_filter": "not run"}}
                    )
                }
            )
            for r in executable
        ]
    elif executable:
        kept = run_filter(executable, council, golds, result, progress)
    else:
        kept = []
    result.records = kept + structural
    return result.finish()


def _convert(sid, row, schemas: _DevSchemas, result: BuildResult, seed: int, hint_kinds) -> tuple:
    db_id, question, sql = row["db_id"], row["question"], row["sql"]
    hints = split_evidence(row["evidence"])
    if not hints:
        result.reject(sid, "no_evidence", "empty evidence: no knowledge ambiguity to register", row)
        return None, None
    if not isinstance(sql, str) or not sql.strip():
        result.reject(sid, "parse", "empty or missing reference SQL", row)
        return None, None
    db_path = schemas.db_path(db_id)
    present = db_path.is_file()
    gold = None
    if present:
        try:
            schema = schema_text(db_path)
        except Exception as exc:  # noqa: BLE001
            result.reject(sid, "database", f"cannot open {db_path.name}: {exc}", row)
            return None, None
        gold = execute_sql(db_path, sql, timeout_s=EXEC_TIMEOUT_S)
        if not gold.ok:
            result.reject(sid, "execute", f"reference SQL fails: {gold.one_line()}", row)
            return None, None
    elif schemas.tables.get(db_id):
        schema = ddl_from_tables(schemas.tables[db_id])
    else:
        result.reject(sid, "database", f"no schema for database {db_id!r} (neither the file nor dev_tables)", row)
        return None, None
    idents = schemas.identifiers(db_id) or None
    ambs, terms, merged, seen = [], [], [], {}
    for hint in hints:
        term, kind, concepts = parse_hint(hint, idents)
        hint_kinds[kind] += 1
        key = " ".join(term.casefold().split())
        if key in seen:  # [I] one ambiguity per distinct term (as BIRD-Interact's normalisation): the
            j = seen[key]  # hints of a repeated term join into its resolution, concepts are unioned
            t0, k0, c0, h0 = ambs[j]
            ambs[j] = (t0, k0, list(dict.fromkeys([*c0, *concepts])), f"{h0}; {hint}")
            merged.append({"term": term, "hint": hint, "into": t0})
            continue
        seen[key] = len(ambs)
        terms.append(term)
        ambs.append((term, kind, concepts, hint))
    if merged:
        result.count("duplicate_terms_merged", len(merged))
    avt_id = make_avt_id(CORPUS, question, db_id, terms)
    interp = str(row["question_id"])
    # a column meaning that quotes a hint would show the withheld evidence: drop it from the spec
    norm_hints = [" ".join(h.lower().split()) for h in hints]
    meanings = {
        k: v
        for k, v in (schemas.meanings.get(db_id) or {}).items()
        if not any(h in " ".join(v.lower().split()) for h in norm_hints)
    } or None
    scrubbed = len(schemas.meanings.get(db_id) or {}) - len(meanings or {})
    record = TaskRecord.create(
        CORPUS,
        avt_id,
        interp,
        split="dev",
        user_query=question,
        db_id=db_id,
        db_schema=schema,
        db_path=str(db_path.resolve()) if present else None,
        column_meanings=meanings,
        ambiguities=[
            Ambiguity(
                amb_id=f"{avt_id}-h{i}",
                term=t,
                kind=AmbiguityKind.KNOWLEDGE,
                type=f"hint:{k}",
                resolution=h,
                concepts=c,
            )
            for i, (t, k, c, h) in enumerate(ambs)
        ],
        oracle_context=OracleContext(withheld_evidence=hints, sql_segments=sql_segments(sql)),
        verifier=VerifierAssets(
            reference_sql=[sql],
            executable=present,
            skip_reason=None if present else f"BIRD dev database {db_id} is not available here",
        ),
        provenance=Provenance(
            source_ids={"question_id": str(row["question_id"]), "db_id": db_id, "source": "bird_dev"},
            build_seed=seed,
            filter_outcomes={
                "executes": True if present else None,
                "rows": gold.row_count if present else None,
                "difficulty": row.get("difficulty"),
                "column_meanings_withheld": scrubbed,
                "duplicate_terms_merged": merged,
            },
        ),
    )
    return record, gold
