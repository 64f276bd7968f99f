"""A verifier in the spirit of SAR-Agent (Jin et al. 2026): each validator may run a bounded number
of read-only probe queries in the sandbox before it votes on whether the gold answers the question.

Every probe and its result is kept as evidence beside the vote (and every turn's call id). One
member's turns: the prompt shows the question, evidence, gold, the gold's first rows and the probes
so far; the member answers ``continue`` with a probe, or ``yes`` / ``no``. A member that fails to
answer, answers unreadably, or still wants to probe when its budget is spent has no vote (an
abstention, never a judgement). ``flag`` needs a strict majority of the council answering "no",
``pass`` a strict majority answering "yes"; anything else is ``undecided``.

The prompt reuses ABISS's schema system message; the task text is this module's own (no cascade
stage verifies with probes).
"""

from __future__ import annotations

import asyncio
from typing import Literal

from pydantic import BaseModel, Field

from pipelines.abiss.prompts import schema_messages
from pipelines.abiss.stages import StageContext
from pipelines.abiss.stages.base import preview
from pipelines.benchmark_audit.checks import shown
from pipelines.benchmark_audit.records import Item
from pipelines.benchmark_audit.verdicts import FLAG, PASS, UNDECIDED, CouncilVerdict, candidate_row
from pipelines.core.prompting import prompt_version
from resources.llm.runtime import run_sync
from resources.sql import execute_sql

CHECK = "council_verifier"
DEFAULT_MAX_PROBES = 3

VERIFY = """Is the gold SQL a correct answer to the question on this database? Before you decide you may
run read-only SQLite probe queries to look at the data ({left} left).

Question: {question}
Evidence: {evidence}
Intended interpretation (hidden knowledge): {hidden_knowledge}
Gold SQL: {sql}
Gold result (first rows): {result}
Probes so far:
{probes}

Return JSON: {{"verdict": "continue", "probe_sql": "SELECT ..."}} to run one probe, or
{{"verdict": "yes" or "no", "reason": "..."}} to decide."""
VERIFY_VERSION = prompt_version(VERIFY)


class VerifierStep(BaseModel):
    verdict: Literal["continue", "yes", "no"]
    probe_sql: str = Field("", max_length=1200)
    reason: str = Field("", max_length=160)


def _probes_text(probes: list[dict]) -> str:
    if not probes:
        return "none"
    return "\n".join(f"{n}. {p['sql']}\n   -> {p['result']}" for n, p in enumerate(probes, 1))


async def _member_vote(ctx: StageContext, member: str, item: Item, row: dict, result_text: str, max_probes: int):
    probes: list[dict] = []
    call_ids: list[str] = []
    while True:
        text = VERIFY.format(
            left=max_probes - len(probes),
            question=item.question,
            evidence=item.evidence or "none",
            hidden_knowledge=item.hidden_knowledge or "none",
            sql=item.gold_sql,
            result=result_text,
            probes=_probes_text(probes),
        )
        tag = {"stage": CHECK, "candidate_id": row["candidate_id"], "comparison": f"turn{len(probes)}"}
        res = await ctx.ask(member, schema_messages(ctx.schema_for(row), text), VerifierStep, tag)
        call_ids.append(res.call_id)
        if not res.ok:
            return _vote(member, "abstain", False, call_ids, probes, f"call {res.status}")
        step = res.parsed
        if step.verdict in ("yes", "no"):
            return _vote(member, step.verdict, True, call_ids, probes, step.reason)
        if len(probes) >= max_probes or not step.probe_sql.strip():
            return _vote(member, "abstain", True, call_ids, probes, "no verdict within the probe budget")
        out = await asyncio.to_thread(execute_sql, ctx.db_path, step.probe_sql, timeout_s=ctx.timeout_s)
        probes.append({"sql": step.probe_sql, "result": shown(out)})


def _vote(member, vote, parsed_ok, call_ids, probes, reason) -> dict:
    return {
        "member": member,
        "comparison": CHECK,
        "vote": vote,
        "parsed_ok": parsed_ok,
        "llm_call_id": call_ids[-1] if call_ids else None,
        "call_ids": call_ids,
        "probes": probes,
        "reason": reason,
    }


def verify(items: list[Item], digest: str, ctx: StageContext, max_probes: int = DEFAULT_MAX_PROBES):
    """One verdict per item, every member asked."""

    async def one(item: Item):
        row = candidate_row(item, digest)
        gold = await ctx.aexecute(item.gold_sql)
        result_text = preview(gold, ctx.result_preview_rows) if gold.ok else gold.one_line()
        votes = list(
            await asyncio.gather(
                *(_member_vote(ctx, m, item, row, result_text, max_probes) for m in ctx.council.member_names)
            )
        )
        n = len(votes)
        no = sum(v["vote"] == "no" for v in votes)
        yes = sum(v["vote"] == "yes" for v in votes)
        verdict = FLAG if 2 * no > n else PASS if 2 * yes > n else UNDECIDED
        probes = sum(len(v["probes"]) for v in votes)
        reason = f"{yes} yes / {no} no / {n - yes - no} abstain after {probes} probe(s)"
        return CouncilVerdict(item.index, CHECK, verdict, reason, votes)

    async def every():
        return list(await asyncio.gather(*(one(i) for i in items)))

    return run_sync(every()) if items else []
