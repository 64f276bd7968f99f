"""The council's checks of a gold item (issue 32 item 3), reusing the ABISS cascade's stages, prompts
and vote rules; always reported apart from the deterministic findings (``source = "council"``).

| check | error type | how | flagged when |
|---|---|---|---|
| ``council_gold_unsatisfying`` | E1 | cascade stage 4 (ground-truth satisfaction: the question, evidence, gold SQL and its first rows, a yes/no vote) | a strict majority of the members *answered* "no" |
| ``council_evidence_unneeded`` | E3 | cascade stage 5 (evidence necessity: members write SQL without the evidence) | a strict majority wrote SQL equivalent to the gold without it (Appendix A's relaxed equivalence) |
| ``council_rewrites_differ`` | E4 | members write SQL with the evidence (stage 5's prompt and vote loop) | a strict majority wrote SQL that runs and is *not* equivalent to the gold: the question reads differently to them (ambiguous as posed, or a wrong gold) |
| ``council_verifier`` (opt-in) | E1 | each member runs up to ``max_probes`` read-only probes in the sandbox, then votes (:mod:`.verifier`) | a strict majority of the council answered "no" |

A failed or unreadable call is never a judgement: the cascade counts it as an abstention that
does not say "yes", which for an audit would turn a silent member into a flag. So a flag needs a
strict majority of the whole council among the answers that were read; when the decision rests on
abstentions the verdict is ``undecided``, shown as such and never counted as a flag.
"""

from __future__ import annotations

import asyncio

from pipelines.abiss.prompts import write_sql_messages
from pipelines.abiss.stages import STAGE_BY_NO, StageContext, run_stage
from pipelines.abiss.stages.voting import members_write_sql
from pipelines.benchmark_audit.records import Item
from pipelines.benchmark_audit.verdicts import (
    FLAG,
    PASS,
    UNDECIDED,
    CouncilVerdict,
    candidate_row,
)
from pipelines.benchmark_audit.verifier import CHECK as VERIFIER
from pipelines.benchmark_audit.verifier import DEFAULT_MAX_PROBES, verify
from resources.llm.runtime import run_sync

GROUND_TRUTH, EVIDENCE_NECESSITY = STAGE_BY_NO[4], STAGE_BY_NO[5]


def _readable(votes: list, label) -> int:
    return sum(1 for v in votes if v["parsed_ok"] and label(v["vote"]))


def ground_truth(items: list[Item], digest: str, ctx: StageContext) -> list[CouncilVerdict]:
    """Stage 4 per item; a "no" flags only as a strict majority of the council's read answers."""
    rows = [candidate_row(i, digest) for i in items]
    n = ctx.n_members
    out = []
    for item, d in zip(items, run_stage(GROUND_TRUTH.no, rows, ctx), strict=True):
        no = _readable(d["votes"], lambda v: v == "no")
        if d["passed"]:
            verdict = PASS
        elif 2 * no > n:
            verdict = FLAG
        else:  # rejected on abstentions (failed / unreadable calls) or a tie: no judgement
            verdict = UNDECIDED
        out.append(CouncilVerdict(item.index, "council_gold_unsatisfying", verdict, d["reason"], d["votes"]))
    return out


def evidence_needed(items: list[Item], digest: str, ctx: StageContext) -> list[CouncilVerdict]:
    """Stage 5 on the items with evidence: equivalence needs SQL that ran, so a flag always rests on
    answers; a "needed" verdict with abstentions in the majority is undecided."""
    with_evidence = [i for i in items if i.evidence]
    rows = [candidate_row(i, digest) for i in with_evidence]
    n = ctx.n_members
    out = []
    for item, d in zip(with_evidence, run_stage(EVIDENCE_NECESSITY.no, rows, ctx), strict=True):
        if not d["passed"]:
            verdict = FLAG
        else:
            answered = _readable(d["votes"], lambda v: v != "abstain")
            verdict = PASS if 2 * answered > n else UNDECIDED
        out.append(CouncilVerdict(item.index, "council_evidence_unneeded", verdict, d["reason"], d["votes"]))
    return out


def rewrites(items: list[Item], digest: str, ctx: StageContext) -> list[CouncilVerdict]:
    """Members write SQL for the question with its evidence; a strict majority of runnable SQL not
    equivalent to the gold flags the item."""

    async def one(item: Item) -> CouncilVerdict:
        row = candidate_row(item, digest)
        messages = write_sql_messages(ctx.schema_for(row), item.question, item.evidence or None)
        majority, votes, _ = await members_write_sql(ctx, EVIDENCE_NECESSITY, row, messages, {"gold": item.gold_sql})
        n = ctx.n_members
        differ = _readable(votes, lambda v: v == "not_equivalent")
        same = _readable(votes, lambda v: v == "equivalent")
        if majority["gold"]:
            verdict, reason = PASS, f"a majority rewrote the gold: {same} of {n} equivalent"
        elif 2 * differ > n:
            verdict, reason = FLAG, f"{differ} of {n} members wrote runnable SQL that is not equivalent to the gold"
        else:
            verdict, reason = UNDECIDED, f"{same} equivalent, {differ} not, the rest failed to answer or run"
        return CouncilVerdict(item.index, "council_rewrites_differ", verdict, reason, votes)

    async def every():
        return list(await asyncio.gather(*(one(i) for i in items)))

    if not items:
        return []
    out = run_sync(every())
    ctx.check_available(EVIDENCE_NECESSITY)
    return out


CHECK_RUNNERS = {
    "council_gold_unsatisfying": ground_truth,
    "council_evidence_unneeded": evidence_needed,
    "council_rewrites_differ": rewrites,
}


def council_verdicts(
    items: list[Item], digest: str, ctx: StageContext, checks: list[str], max_probes: int = DEFAULT_MAX_PROBES
) -> list[CouncilVerdict]:
    """Every asked check on every item it applies to (evidence necessity: items with evidence)."""
    out: list[CouncilVerdict] = []
    for check in checks:
        if check == VERIFIER:
            out += verify(items, digest, ctx, max_probes)
            ctx.tally.check(f"check {VERIFIER}", ctx.max_failed_call_share, ctx.max_unparseable_share)
        else:
            out += CHECK_RUNNERS[check](items, digest, ctx)
    return out


def calls_bound(items: list[Item], n_members: int, checks: list[str], max_probes: int = DEFAULT_MAX_PROBES) -> int:
    """At most one call per member, item and check (short-circuiting waves ask fewer); the verifier
    one per probe and a final one."""
    with_evidence = sum(1 for i in items if i.evidence)
    per = {"council_gold_unsatisfying": len(items), "council_evidence_unneeded": with_evidence}
    per["council_rewrites_differ"] = len(items)
    per[VERIFIER] = len(items) * (max_probes + 1)
    return n_members * sum(per[c] for c in checks)
