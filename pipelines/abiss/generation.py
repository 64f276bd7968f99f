"""ABISS §4.1: two-step, category-aware generation.

Step 1 (:func:`generate_nlq_objects`) turns grid requests into NLQ objects: one for answerable
and unanswerable subcategories, two (sharing ``group_id`` and question text) for ambiguous ones.
LLM requests go to the generator council; ``programmatic`` requests to the programmatic builder,
whose objects arrive with SQL already grounded and verified.

Step 2 (:func:`ground_sql`) writes ground-truth SQL for solvable objects with a separate
chain-of-thought prompt conditioned on question, evidence and hidden knowledge, then relabels
difficulty from the SQL. Unanswerable objects skip it.

Nothing raises on bad model output: a failed call or unparseable answer becomes a row with
``status`` and ``error`` and the raw text stays in the call log (``llm_call_id``).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from types import SimpleNamespace

import polars as pl

from pipelines.abiss.grid import PROGRAMMATIC
from pipelines.abiss.ids import stable_id
from pipelines.abiss.programmatic import generate_candidates
from pipelines.abiss.prompts import SqlGrounding, question_generation_messages, sql_grounding_messages
from pipelines.abiss.taxonomy import Group, subcategory
from pipelines.sqltools.difficulty import relabel_difficulty
from resources.llm.failures import FailureTally, ProviderUnavailable
from resources.llm.runtime import run_sync
from resources.progress import item_done

# Sampling for generation as in the paper (§4.3): temperature 0.7, frequency penalty 0.2, fixed seed.
GENERATION_SAMPLING = {"temperature": 0.7, "frequency_penalty": 0.2}

NLQ_COLUMNS = (
    "object_id",
    "group_id",
    "request_id",
    "db_id",
    "generator",
    "builder",
    "subcategory",
    "group",
    "style",
    "requested_difficulty",
    "question",
    "evidence",
    "hidden_knowledge",
    "feedback",
    "interpretation_index",
    "sql",
    "status",
    "error",
    "llm_call_id",
)


def _object_rows(request: dict, parsed: dict, call_id: str | None, builder: str) -> list[dict]:
    """Split one generator output into NLQ objects (two for ambiguous subcategories)."""
    sub = subcategory(request["subcategory"])
    base = {
        "request_id": request["request_id"],
        "db_id": request["db_id"],
        "generator": request["generator"],
        "builder": builder,
        "subcategory": sub.id,
        "group": sub.group.value,
        "style": request["style"],
        "requested_difficulty": request["difficulty"],
        "question": parsed["question"].strip(),
        "evidence": (parsed.get("evidence") or None),
        "hidden_knowledge": None,
        "feedback": None,
        "interpretation_index": None,
        "sql": None,
        "status": "ok",
        "error": None,
        "llm_call_id": call_id,
    }
    group_id = stable_id("grp", request["request_id"], base["question"])
    if sub.group is Group.AMBIGUOUS:
        rows = []
        for i, interp in enumerate(parsed["interpretations"][:2]):
            hk = interp["hidden_knowledge"] if isinstance(interp, dict) else interp.hidden_knowledge
            rows.append(
                {
                    **base,
                    "group_id": group_id,
                    "hidden_knowledge": hk,
                    "interpretation_index": i,
                    "object_id": stable_id("obj", request["request_id"], i, base["question"], hk),
                }
            )
        return rows
    if sub.group is Group.UNANSWERABLE:
        base["feedback"] = parsed.get("feedback")
    return [{**base, "group_id": group_id, "object_id": stable_id("obj", request["request_id"], 0, base["question"])}]


def _failed_row(request: dict, status: str, error: str, call_id: str | None) -> dict:
    sub = subcategory(request["subcategory"])
    row = {c: None for c in NLQ_COLUMNS}
    row.update(
        {
            "object_id": stable_id("obj", request["request_id"], "failed"),
            "group_id": None,
            "request_id": request["request_id"],
            "db_id": request["db_id"],
            "generator": request["generator"],
            "builder": "llm",
            "subcategory": sub.id,
            "group": sub.group.value,
            "style": request["style"],
            "requested_difficulty": request["difficulty"],
            "status": status,
            "error": error,
            "llm_call_id": call_id,
        }
    )
    return row


async def _llm_objects(requests: list[dict], schema_context: str, council) -> list[dict]:
    async def one(req: dict) -> list[dict]:
        sub = subcategory(req["subcategory"])
        messages = question_generation_messages(schema_context, sub.id, req["style"], req["difficulty"])
        result = await council.aask(
            req["generator"],
            messages,
            sub.output_model,
            tag={"stage": "generation", "candidate_id": req["request_id"]},
            overrides={**GENERATION_SAMPLING, "seed": int(req["seed"])},
        )
        item_done(req["request_id"])
        if not result.ok:
            return [_failed_row(req, result.status, result.error or "no output", result.call_id)]
        return _object_rows(req, result.parsed.model_dump(), result.call_id, "llm")

    batches = await asyncio.gather(*(one(r) for r in requests))
    return [row for batch in batches for row in batch]


def _programmatic_objects(requests: list[dict], db_path: str, skipped: dict | None = None) -> list[dict]:
    """Serve `programmatic` grid cells from the programmatic builder (SQL already verified).

    The builder is asked for as many question groups per subcategory as the grid has cells for
    it; each group it returns fills the next cell of its subcategory (the builder picks styles
    from the grid's styles). Cells it cannot fill stay empty, and its `skipped` reasons say why.
    """

    if not requests:
        return []
    cells: dict[str, list[dict]] = defaultdict(list)
    for r in requests:
        cells[r["subcategory"]].append(r)
    report = generate_candidates(
        db_path,
        per_subcategory=max(len(v) for v in cells.values()),
        seed=int(min(r["seed"] for r in requests)),
        styles=sorted({r["style"] for r in requests}),
        subcategories=sorted(cells),
        db_id=requests[0]["db_id"],
    )
    if skipped is not None:
        skipped.update(report.skipped)
    rows: list[dict] = []
    request_of_group: dict[str, dict] = {}
    filled: dict[str, int] = defaultdict(int)
    for cand in (c.to_dict() for c in report.candidates):
        sub = cand["subcategory"]
        req = request_of_group.get(cand["group_id"])
        if req is None:
            if filled[sub] >= len(cells.get(sub, [])):
                continue
            req = request_of_group[cand["group_id"]] = cells[sub][filled[sub]]
            filled[sub] += 1
        rows.append(
            {
                "object_id": stable_id("obj", req["request_id"], cand["candidate_id"]),
                "group_id": cand["group_id"],
                "request_id": req["request_id"],
                "db_id": req["db_id"],
                "generator": PROGRAMMATIC,
                "builder": cand.get("builder") or PROGRAMMATIC,
                "subcategory": sub,
                "group": cand["group"],
                "style": cand["style"],
                "requested_difficulty": req["difficulty"],
                "question": cand["question"],
                "evidence": cand.get("evidence"),
                "hidden_knowledge": cand.get("hidden_knowledge"),
                "feedback": cand.get("feedback"),
                "interpretation_index": cand.get("interpretation_index"),
                "sql": cand.get("sql"),
                "status": "ok",
                "error": None,
                "llm_call_id": None,
            }
        )
    return rows


def generate_nlq_objects(
    requests: list[dict], schema_context: str, db_path: str, council=None
) -> tuple[list[dict], dict]:
    """Step 1 for every request. Returns (rows, stats)."""

    llm_requests = [r for r in requests if r["generator"] != PROGRAMMATIC]
    prog_requests = [r for r in requests if r["generator"] == PROGRAMMATIC]
    skipped: dict[str, str] = {}
    rows = _programmatic_objects(prog_requests, db_path, skipped)
    if llm_requests:
        if council is None:
            raise ValueError("LLM generators requested but no generator council given")
        rows += run_sync(_llm_objects(llm_requests, schema_context, council))
    stats = {
        "requests": len(requests),
        "objects": sum(1 for r in rows if r["status"] == "ok"),
        "failed_requests": sum(1 for r in rows if r["status"] != "ok"),
        "llm_requests": len(llm_requests),
        "provider_failures": sum(1 for r in rows if r["status"] == "call_failed"),
        "programmatic_objects": sum(1 for r in rows if r["generator"] == PROGRAMMATIC),
        "programmatic_skipped": skipped,  # subcategory -> why the builder emitted nothing
    }
    return rows, stats


# ----------------------------------------------------------------------- step 2


CANDIDATE_EXTRA = ("candidate_id", "difficulty", "grounding_call_id", "grounding_status", "grounding_error")


def tally_rows(rows: list[dict], status_key: str = "status", error_key: str = "error"):
    """A :class:`FailureTally` over rows that carry an LLM call's status and error."""

    tally = FailureTally()
    for r in rows:
        st = r.get(status_key)
        tally.add(SimpleNamespace(ok=st == "ok", status=st, error=r.get(error_key), failure=r.get("failure")))
    return tally


def check_provider(
    step: str,
    calls: int,
    failed: int,
    max_share: float,
    *,
    rows: list[dict] | None = None,
    status_key: str = "status",
    error_key: str = "error",
    max_unparseable_share: float = 0.5,
) -> None:
    """Fail the step (:class:`~resources.llm.failures.ProviderUnavailable`) when more than ``max_share``
    of its calls failed (classified, with a remedy) or when most of its answers were unparseable
    (``rows``: the step's LLM rows)."""
    if rows is not None:
        tally_rows(rows, status_key, error_key).check(step, max_share, max_unparseable_share)
        return
    if calls and failed / calls > max_share:
        raise ProviderUnavailable(
            f"{step}: {failed} of {calls} LLM calls failed; completed calls are cached, "
            f"rerun once the cause is fixed [{failed / calls:.0%} of calls, more than "
            f"max_failed_call_share = {max_share:g} (CascadeSettings) tolerates]"
        )


def rows_frame(rows: list[dict], columns: tuple[str, ...]):
    """A frame with a fixed schema (strings; interpretation_index int), also when there are no rows."""

    schema = {c: (pl.Int64 if c == "interpretation_index" else pl.String) for c in columns}
    return pl.DataFrame([{c: r.get(c) for c in columns} for r in rows], schema=schema)


async def _ground(objects: list[dict], schema_context: str, council, grounder: str | None) -> list[dict]:
    async def one(obj: dict) -> dict:
        row = dict(obj)
        row["grounding_call_id"] = None
        row["grounding_status"] = "not_needed"
        row["grounding_error"] = None
        if row["group"] == Group.UNANSWERABLE.value or row.get("sql"):
            return row
        member = grounder or (row["generator"] if row["generator"] in council.member_names else council.member_names[0])
        result = await council.aask(
            member,
            sql_grounding_messages(schema_context, row["question"], row.get("evidence"), row.get("hidden_knowledge")),
            SqlGrounding,
            tag={"stage": "sql_grounding", "candidate_id": row["object_id"]},
        )
        item_done(row["object_id"])
        row["grounding_call_id"] = result.call_id
        if result.ok:
            row["sql"] = result.parsed.sql.strip()
            row["grounding_status"] = "ok"
        else:
            row["grounding_status"] = result.status
            row["grounding_error"] = result.error
        return row

    return list(await asyncio.gather(*(one(o) for o in objects)))


def ground_sql(objects: list[dict], schema_context: str, council=None, grounder: str | None = None) -> list[dict]:
    """Step 2: SQL grounding for solvable objects, difficulty relabelled from the SQL."""

    ok = [o for o in objects if o["status"] == "ok"]
    needs_llm = any(o["group"] != Group.UNANSWERABLE.value and not o.get("sql") for o in ok)
    if needs_llm and council is None:
        raise ValueError("SQL grounding needs a council")
    rows = (
        run_sync(_ground(ok, schema_context, council, grounder))
        if needs_llm
        else [{**o, "grounding_call_id": None, "grounding_status": "not_needed", "grounding_error": None} for o in ok]
    )
    for row in rows:
        row["candidate_id"] = stable_id("cand", row["object_id"], row.get("sql"))
        if row.get("sql"):
            row["difficulty"] = relabel_difficulty(row["sql"], fallback=row["requested_difficulty"])
        else:
            row["difficulty"] = row["requested_difficulty"]
    return rows
