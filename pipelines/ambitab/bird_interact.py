"""AmbiTab-BIRD-Interact (deterministic normalisation; PostgreSQL; AmbiTab §3, App. B).

Source: ``bird_interact/bird_interact_conv/data/datasets/bird_interact_data.jsonl`` plus, per
database, ``DBs/<db>/<db>_kb.jsonl``, ``<db>_schema.txt`` and ``<db>_column_meaning_base.json``.

1. Amb = ``critical_ambiguity`` ∪ ``knowledge_ambiguity``; ``non_critical_ambiguity`` (order,
   limit) is kept with kind ``non_critical`` and never counted.
2. Duplicate terms are normalised [I]: casefold + collapsed whitespace; equal terms merge and the
   first occurrence (critical before knowledge before non-critical) is kept; merges are listed in
   provenance.
3. The paper repairs "one reviewed missing fragment" without saying which: reported as a skipped
   step.
4. Responses: the paper freezes an audited catalog of LLM-authored responses, which is not public.
   The documented **stand-in** is used and labelled in every record (``provenance.notes`` and the
   ``responses`` source id): a knowledge ambiguity answers with its deleted KB entry's definition,
   a critical / non-critical one with "By '<term>' I mean <sql_snippet>". It is NOT equivalent to
   the paper's catalog.
5. Visible spec [I]: ``amb_user_query``, the schema text, the column meanings and the knowledge
   base minus the task's ``deleted_knowledge`` entries.
6. Verifier: ``sol_sql`` (statements run in order), ``preprocess_sql``, ``clean_up_sqls``,
   ``test_cases``; [I] the comparison honours ``conditions{decimal, distinct}``. The PostgreSQL
   databases are not distributed with the tasks, so verification is skipped with that reason
   (``verifier.executable=False``) and reported.
"""

from __future__ import annotations

from pathlib import Path

from pipelines.ambitab.build import BuildResult
from pipelines.ambitab.record import (
    Ambiguity,
    AmbiguityKind,
    ComparisonPolicy,
    OracleContext,
    Provenance,
    TaskRecord,
    VerifierAssets,
    make_avt_id,
)
from pipelines.ambitab.sources import MALFORMED, iter_json_rows, read_json, read_jsonl, require_file, sql_segments

CORPUS = "bird_interact"
ROOT = Path("bird_interact") / "bird_interact_conv" / "data"
TASKS = ROOT / "datasets" / "bird_interact_data.jsonl"
REQUIRED_KEYS = (
    "instance_id",
    "selected_database",
    "query",
    "amb_user_query",
    "user_query_ambiguity",
    "knowledge_ambiguity",
    "sol_sql",
)
STAND_IN = "stand-in (KB definition / sql_snippet), not the paper's audited LLM catalog"
NO_DB_REASON = (
    "the PostgreSQL database of {db} is not available here (BIRD-Interact distributes its "
    "dumps separately); verification skipped"
)


def _dedup_key(term: str) -> str:
    return " ".join(term.casefold().split())


class _Database:
    def __init__(self, data_root: Path, db: str):
        base = data_root / ROOT / "DBs" / db
        self.schema_path = base / f"{db}_schema.txt"
        self.kb_path = base / f"{db}_kb.jsonl"
        self.meanings_path = base / f"{db}_column_meaning_base.json"
        self.schema = self.schema_path.read_text(encoding="utf-8") if self.schema_path.is_file() else None
        self.kb: list[dict] = []
        if self.kb_path.is_file():
            self.kb = [row for _, row in read_jsonl(self.kb_path)]
        self.kb_by_id = {e["id"]: e for e in self.kb}
        self.meanings = read_json(self.meanings_path) if self.meanings_path.is_file() else None


def stand_in_response(kind: str, amb: dict, kb_by_id: dict) -> str:
    if kind == "knowledge":
        entry = kb_by_id.get(amb.get("deleted_knowledge"))
        if entry:
            return f"{entry['knowledge']}: {entry.get('definition') or entry.get('description')}"
    snippet = (amb.get("sql_snippet") or "").strip()
    return f"By '{amb['term']}' I mean {snippet}" if snippet else f"By '{amb['term']}' I mean the usual reading."


def build(data_root: Path, seed: int = 0, progress=None) -> BuildResult:
    result = BuildResult(CORPUS, stats={"seed": seed})
    src = require_file(data_root / TASKS, "BIRD-Interact task file bird_interact_data.jsonl")
    dbs: dict[str, _Database] = {}
    merged_total = 0
    for sid, row in iter_json_rows(src, result, REQUIRED_KEYS, id_key="instance_id"):
        db_id = row["selected_database"]
        db = dbs.setdefault(db_id, _Database(data_root, db_id))
        if db.schema is None:
            result.reject(sid, "database", f"schema text {db.schema_path} not found", row)
            continue
        try:
            rec, merged = _convert(sid, row, db, seed)
        except (KeyError, TypeError, ValueError) as exc:
            result.reject(sid, MALFORMED, f"{src} task {sid}: malformed ({exc!r})", row)
            continue
        merged_total += merged
        result.records.append(rec)
    n = len(result.records)
    result.stats["duplicate_terms_merged"] = merged_total
    if n:
        dbs_here = sorted({r.db_id for r in result.records})
        result.skip("verification (PostgreSQL)", NO_DB_REASON.format(db=", ".join(dbs_here)), n)
        result.skip("frozen response catalog", f"the audited catalog is not public; responses are the {STAND_IN}", n)
        result.skip("repair reviewed missing fragment", "the paper does not say which fragment it repaired", 0)
    return result.finish()


def _convert(sid: str, row: dict, db: _Database, seed: int) -> tuple[TaskRecord, int]:
    uqa = row["user_query_ambiguity"] or {}
    raw = (
        [("critical", a) for a in uqa.get("critical_ambiguity") or []]
        + [("knowledge", a) for a in row.get("knowledge_ambiguity") or []]
        + [("non_critical", a) for a in uqa.get("non_critical_ambiguity") or []]
    )
    seen: dict[str, int] = {}
    ambs: list[Ambiguity] = []
    merges = []
    deleted = set()
    for kind, a in raw:
        if kind == "knowledge" and a.get("deleted_knowledge") is not None:
            deleted.add(a["deleted_knowledge"])
        key = _dedup_key(a["term"])
        if key in seen:
            merges.append({"term": a["term"], "kind": kind, "kept": ambs[seen[key]].amb_id})
            continue
        seen[key] = len(ambs)
        ambs.append(
            Ambiguity(
                amb_id=f"{sid}-{kind[0]}{len(ambs)}",
                term=a["term"],
                kind=AmbiguityKind(kind),
                type=a.get("type") or kind,
                resolution=stand_in_response(kind, a, db.kb_by_id),
                sql_snippet=a.get("sql_snippet") or None,
            )
        )
    visible_kb = [
        {k: e.get(k) for k in ("id", "knowledge", "description", "definition", "type", "children_knowledge")}
        for e in db.kb
        if e["id"] not in deleted
    ]
    withheld = [
        f"{db.kb_by_id[d]['knowledge']}: {db.kb_by_id[d].get('definition')}"
        for d in sorted(deleted)
        if d in db.kb_by_id
    ]
    cond = row.get("conditions") or {}
    decimals = cond.get("decimal")
    sol = row["sol_sql"] if isinstance(row["sol_sql"], list) else [row["sol_sql"]]
    db_id = row["selected_database"]
    question = row["amb_user_query"]
    avt_id = make_avt_id(CORPUS, question, db_id, [a.term for a in ambs if a.counted])
    record = TaskRecord.create(
        CORPUS,
        avt_id,
        sid,
        engine="postgresql",
        user_query=question,
        db_id=db_id,
        db_schema=db.schema,
        column_meanings=db.meanings,
        external_knowledge=visible_kb or None,
        ambiguities=ambs,
        oracle_context=OracleContext(
            clear_query=row["query"],
            withheld_evidence=withheld,
            sql_segments=[s for q in sol for s in sql_segments(q, dialect="postgres")],
        ),
        verifier=VerifierAssets(
            reference_sql=sol,
            preprocess_sql=list(row.get("preprocess_sql") or []),
            clean_up_sql=list(row.get("clean_up_sqls") or []),
            test_cases=list(row.get("test_cases") or []),
            comparison=ComparisonPolicy(
                distinct=bool(cond.get("distinct")),
                float_decimals=decimals if isinstance(decimals, int) and decimals >= 0 else None,
            ),
            executable=False,
            skip_reason=NO_DB_REASON.format(db=db_id),
        ),
        provenance=Provenance(
            source_ids={
                "instance_id": sid,
                "db_id": db_id,
                "responses": STAND_IN,
                "category": str(row.get("category")),
                "difficulty_tier": str(row.get("difficulty_tier")),
            },
            build_seed=seed,
            filter_outcomes={
                "duplicate_terms_merged": merges,
                "deleted_knowledge": sorted(deleted),
                "external_knowledge_ids": row.get("external_knowledge") or [],
            },
            notes=[f"responses: {STAND_IN}", "verification skipped: PostgreSQL database not present"],
        ),
    )
    return record, len(merges)
