"""AmbiTab-Bird (LLM-built; AmbiTab §3, App. B) — a pluggable LLM stage, runnable where databases are.

Source: BIRD dev (``bird/dev/dev.jar.json``); only rows whose database is present here run (the
superhero database); the rest are reported as a skipped step. [I] The reference SQL is the
original BIRD SQL; the evidence is withheld from the agent and given to the oracle.

The paper's steps, each an LLM call through the council (cached and logged there), with the
prompts, decoding and reading builder unspecified by the paper [I: chosen here, versioned in
``PROMPT_VERSION``]:

1. **Alternative readings** (role ``generators``, first member): other plausible readings of the
   question, each with SQL. Only readings whose SQL executes and whose result differs from the
   reference's are kept; a row with none is rejected (stage ``readings``).
2. **Rewrite** (role ``generators``): an under-specified rewrite of the request plus the fixed
   resolutions (term, kind critical|knowledge, resolution) that pin the reference reading. A rewrite
   with no ambiguities makes the row a **control** (|Amb| = 0, the original question, no probes).
3. **SQL probes** (role ``solvers``, first member): without clarification the solver must **miss**
   the reference result; given all resolutions it must **match** it (else reject ``probe``).
4. **Necessity judgment** (role ``judges``, strict majority): blind to the resolutions, the judge
   must say clarification is necessary (else reject ``necessity``).

A role missing from the council config falls back to the ``default`` council; with neither, or
with LLM steps off, the build reports the step as skipped and emits nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field

from pipelines.ambitab.build import BuildResult, item_progress
from pipelines.ambitab.comparison import results_match
from pipelines.ambitab.ewbird import DB_ROOT, DEV, REQUIRED_KEYS, parse_hint, split_evidence
from pipelines.ambitab.record import (
    Ambiguity,
    AmbiguityKind,
    OracleContext,
    Provenance,
    TaskRecord,
    VerifierAssets,
    make_avt_id,
)
from pipelines.ambitab.sources import iter_json_rows, require_file, schema_text, sql_segments
from pipelines.core.prompting import messages
from resources.sql import execute_sql

CORPUS = "bird"
PROMPT_VERSION = "ambitab-bird-1"
EXEC_TIMEOUT_S = 30.0
ROLES = {"readings": "generators", "rewrite": "generators", "probe": "solvers", "necessity": "judges"}


# ------------------------------------------------------------------------------ output models


class Reading(BaseModel):
    description: str = Field(description="the alternative interpretation, one sentence")
    sql: str = Field(description="one SQLite SELECT implementing it")


class Readings(BaseModel):
    readings: list[Reading] = Field(default_factory=list)


class AuthoredAmbiguity(BaseModel):
    term: str = Field(description="the under-specified phrase as it appears in the rewritten request")
    kind: str = Field(description="critical or knowledge")
    resolution: str = Field(description="the user's answer that fixes the intended reading")


class Rewrite(BaseModel):
    user_query: str = Field(description="the rewritten, under-specified request")
    ambiguities: list[AuthoredAmbiguity] = Field(default_factory=list)


class ProbeSQL(BaseModel):
    reasoning: str = ""
    output: str = Field(description="one SQLite statement")


class Necessity(BaseModel):
    necessary: bool = Field(description="true when a clarifying question is needed to write the intended SQL")
    reason: str = ""


# ----------------------------------------------------------------------------------- prompts


def _header(db_id: str, schema: str) -> str:
    return (
        f'You are a good data scientist with great SQLite writing ability. You have a DB called "{db_id}".\n\n'
        f"## DB Schema Information:\n{schema}"
    )


def readings_messages(db_id, schema, question, evidence, sql) -> list[dict]:
    return messages(
        None,
        f"{_header(db_id, schema)}\n\n## Question:\n{question}\n\n## Evidence:\n{evidence}\n\n## Intended SQL:\n{sql}\n\n"
        "List up to 3 OTHER plausible readings of the question a user could have meant, each with one SQLite "
        'SELECT. Answer JSON {"readings": [{"description": "...", "sql": "..."}]}.',
    )


def rewrite_messages(db_id, schema, question, evidence, sql, readings: list[dict]) -> list[dict]:
    alts = "\n".join(f"- {r['description']}: {r['sql']}" for r in readings)
    return messages(
        None,
        f"{_header(db_id, schema)}\n\n## Question:\n{question}\n\n## Evidence:\n{evidence}\n\n## Intended SQL:\n{sql}\n\n"
        f"## Alternative readings:\n{alts}\n\nRewrite the question so that it no longer says which reading is meant "
        "(remove the details the evidence supplies), and list each ambiguity you introduced with the answer that "
        'fixes the intended SQL. Answer JSON {"user_query": "...", "ambiguities": [{"term": "...", '
        '"kind": "critical|knowledge", "resolution": "..."}]}.',
    )


def probe_messages(db_id, schema, user_query, resolutions: list[str] | None) -> list[dict]:
    summary = ""
    if resolutions:
        summary = "\n\n## Clarification summary:\n" + "\n".join(f"- {r}" for r in resolutions)
    return messages(
        None,
        f"{_header(db_id, schema)}\n\n## Text-to-SQL Question:\n{user_query}{summary}\n\n"
        'Generate the final SQLite statement. Answer JSON {"reasoning": "...", "output": "<SQL>"}.',
    )


def necessity_messages(db_id, schema, user_query, terms: list[str]) -> list[dict]:
    return messages(
        None,
        f"{_header(db_id, schema)}\n\n## Request:\n{user_query}\n\n## Possibly unclear phrases:\n"
        + "\n".join(f"- {t}" for t in terms)
        + "\n\nCan the intended SQL be written without asking the user anything? Answer JSON "
        '{"necessary": true|false, "reason": "..."} where necessary=true means a clarifying question is needed.',
    )


# ------------------------------------------------------------------------------------- build


def _council(factory, role):
    for r in (role, "default"):
        try:
            return factory(r)
        except KeyError:
            continue
    return None


def _tags(stage, ids):
    return [{"stage": f"ambitab_bird_{stage}", "candidate_id": i, "prompt_version": PROMPT_VERSION} for i in ids]


def _matches(db_path, sql, gold) -> bool:
    if not sql:
        return False
    res = execute_sql(db_path, sql, timeout_s=EXEC_TIMEOUT_S)
    return bool(res.ok and results_match(gold, res))


def build(
    data_root: Path, seed: int = 0, council_factory=None, max_rows: int | None = None, progress=None
) -> BuildResult:
    result = BuildResult(CORPUS, stats={"seed": seed, "prompt_version": PROMPT_VERSION})
    src = require_file(data_root / DEV, "BIRD dev file dev.jar.json")
    rows = list(iter_json_rows(src, result, REQUIRED_KEYS, id_key="question_id"))
    present, absent = [], {}
    for sid, row in rows:
        p = data_root / DB_ROOT / row["db_id"] / f"{row['db_id']}.sqlite"
        if p.is_file():
            present.append((sid, row, p))
        else:
            absent[row["db_id"]] = absent.get(row["db_id"], 0) + 1
    if absent:
        result.skip(
            "llm authoring (databases absent)",
            "BIRD databases not present here: " + ", ".join(sorted(absent)),
            sum(absent.values()),
        )
    if max_rows is not None:
        present = present[:max_rows]
    councils = {stage: _council(council_factory, role) for stage, role in ROLES.items()} if council_factory else {}
    missing = sorted({ROLES[s] for s, c in councils.items() if c is None})
    if council_factory is None or missing:
        why = (
            "LLM steps off (no council config file, or --llm off)"
            if council_factory is None
            else f"no council for role(s) {missing} (nor `default`)"
        )
        result.skip("llm authoring (readings, rewrite, probes, necessity)", why, len(present))
        return result.finish()
    result.stats["source_rows"] = len(present)

    cands = []
    for sid, row, p in present:
        try:
            schema = schema_text(p)
        except Exception as exc:  # noqa: BLE001
            result.reject(sid, "database", f"cannot open {p.name}: {exc}", row)
            continue
        gold = execute_sql(p, row["sql"], timeout_s=EXEC_TIMEOUT_S)
        if not gold.ok:
            result.reject(sid, "execute", f"reference SQL fails: {gold.one_line()}", row)
            continue
        cands.append({"sid": sid, "row": row, "path": p, "schema": schema, "gold": gold})
    tick = item_progress("bird authoring", len(cands), progress)
    gen, solver, judges = councils["readings"], councils["probe"], councils["necessity"]
    g0, s0 = gen.member_names[0], solver.member_names[0]

    # 1. alternative readings
    ans = gen.ask_many(
        g0,
        [
            readings_messages(
                c["row"]["db_id"], c["schema"], c["row"]["question"], c["row"]["evidence"], c["row"]["sql"]
            )
            for c in cands
        ],
        Readings,
        tags=_tags("readings", [c["sid"] for c in cands]),
    )
    stage2 = []
    for c, a in zip(cands, ans):
        if not a.ok:
            result.reject(c["sid"], "readings", f"readings call {a.status}: {a.error or ''}", a.raw_text or "")
            continue
        kept = []
        for r in a.parsed.readings:
            res = execute_sql(c["path"], r.sql, timeout_s=EXEC_TIMEOUT_S)
            kept.append(
                {
                    "description": r.description,
                    "sql": r.sql,
                    "executes": res.ok,
                    "differs": bool(res.ok and not results_match(c["gold"], res)),
                }
            )
        c["readings"] = kept
        c["calls"] = {"readings": a.call_id}
        if not any(k["differs"] for k in kept):
            result.reject(c["sid"], "readings", "no alternative reading with executable, result-distinct SQL", kept)
            continue
        stage2.append(c)

    # 2. rewrite + fixed resolutions
    ans = gen.ask_many(
        g0,
        [
            rewrite_messages(
                c["row"]["db_id"],
                c["schema"],
                c["row"]["question"],
                c["row"]["evidence"],
                c["row"]["sql"],
                [r for r in c["readings"] if r["differs"]],
            )
            for c in stage2
        ],
        Rewrite,
        tags=_tags("rewrite", [c["sid"] for c in stage2]),
    )
    stage3, controls = [], []
    for c, a in zip(stage2, ans):
        if not a.ok:
            result.reject(c["sid"], "rewrite", f"rewrite call {a.status}: {a.error or ''}", a.raw_text or "")
            continue
        c["calls"]["rewrite"] = a.call_id
        ambs = [x for x in a.parsed.ambiguities if x.term.strip() and x.resolution.strip()]
        bad = [x.kind for x in ambs if x.kind not in ("critical", "knowledge")]
        if bad:
            result.reject(c["sid"], "rewrite", f"ambiguity kinds {bad} are not critical/knowledge", a.raw_text or "")
            continue
        c["rewrite"] = a.parsed.model_copy(update={"ambiguities": ambs})
        (stage3 if ambs else controls).append(c)

    # 3. probes: miss without clarification, match with every resolution
    if stage3:
        without = solver.ask_many(
            s0,
            [probe_messages(c["row"]["db_id"], c["schema"], c["rewrite"].user_query, None) for c in stage3],
            ProbeSQL,
            tags=_tags("probe_without", [c["sid"] for c in stage3]),
        )
        with_all = solver.ask_many(
            s0,
            [
                probe_messages(
                    c["row"]["db_id"],
                    c["schema"],
                    c["rewrite"].user_query,
                    [x.resolution for x in c["rewrite"].ambiguities],
                )
                for c in stage3
            ],
            ProbeSQL,
            tags=_tags("probe_with", [c["sid"] for c in stage3]),
        )
    else:
        without = with_all = []
    stage4 = []
    for c, a, b in zip(stage3, without, with_all):
        miss = not _matches(c["path"], a.parsed.output if a.ok else None, c["gold"])
        match = _matches(c["path"], b.parsed.output if b.ok else None, c["gold"])
        c["probes"] = {"miss_without_clarification": miss, "match_with_resolutions": match}
        c["calls"].update(probe_without=a.call_id, probe_with=b.call_id)
        if not (miss and match):
            result.reject(
                c["sid"],
                "probe",
                f"probes: miss without clarification={miss}, match with resolutions={match}",
                c["probes"],
            )
            continue
        stage4.append(c)

    # 4. blind necessity judgment (strict majority of the judges)
    votes = (
        judges.vote_many(
            [
                necessity_messages(
                    c["row"]["db_id"], c["schema"], c["rewrite"].user_query, [x.term for x in c["rewrite"].ambiguities]
                )
                for c in stage4
            ],
            Necessity,
            extract=lambda n: n.necessary,
            tags=_tags("necessity", [c["sid"] for c in stage4]),
        )
        if stage4
        else []
    )
    for c, v in zip(stage4, votes):
        tick.advance()
        c["necessity"] = {"decision": v.decision, "votes": [m.vote for m in v.votes]}
        c["calls"]["necessity"] = [m.call_id for m in v.votes]
        if v.decision is not True:
            result.reject(
                c["sid"], "necessity", f"judges did not find clarification necessary ({v.counts})", c["necessity"]
            )
            continue
        result.records.append(_record(c, seed))
    tick.close()
    for c in controls:
        c["probes"] = c["necessity"] = None
        result.records.append(_record(c, seed, control=True))
    result.stats.update(controls=len(controls), after_readings=len(stage2), after_probes=len(stage4))
    return result.finish()


def _record(c: dict, seed: int, control: bool = False) -> TaskRecord:
    row, rw = c["row"], c["rewrite"]
    hints = split_evidence(row["evidence"])
    hint_concepts = [x for h in hints for x in parse_hint(h)[2]]
    user_query = row["question"] if control else rw.user_query
    ambs = []
    avt_id = make_avt_id(CORPUS, user_query, row["db_id"], [a.term for a in rw.ambiguities])
    for i, a in enumerate(rw.ambiguities):
        concepts = [x for x in hint_concepts if x.lower() in a.resolution.lower()]
        ambs.append(
            Ambiguity(
                amb_id=f"{avt_id}-a{i}",
                term=a.term,
                kind=AmbiguityKind(a.kind),
                type="authored",
                resolution=a.resolution,
                concepts=concepts,
            )
        )
    interp = str(row["question_id"])
    return TaskRecord.create(
        CORPUS,
        avt_id,
        interp,
        split="dev",
        user_query=user_query,
        db_id=row["db_id"],
        db_schema=c["schema"],
        db_path=str(Path(c["path"]).resolve()),
        # a control is the unrewritten original: nothing to ask, so its evidence stays visible [I]
        external_knowledge=hints if control else None,
        ambiguities=ambs,
        oracle_context=OracleContext(
            clear_query=row["question"],
            withheld_evidence=[] if control else hints,
            sql_segments=sql_segments(row["sql"]),
        ),
        verifier=VerifierAssets(reference_sql=[row["sql"]]),
        provenance=Provenance(
            source_ids={
                "question_id": interp,
                "db_id": row["db_id"],
                "source": "bird_dev",
                "prompt_version": PROMPT_VERSION,
            },
            build_seed=seed,
            alternatives=c["readings"],
            filter_outcomes={
                "control": control,
                "probes": c["probes"],
                "necessity": c["necessity"],
                "llm_calls": json.loads(json.dumps(c["calls"])),
            },
        ),
    )
