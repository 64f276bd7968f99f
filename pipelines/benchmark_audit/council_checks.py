"""The council's checks of a gold item (issue 32 item 3), reusing the ABISS cascade's stages, prompts
and vote rules; always reported apart from the deterministic findings (``source = "council"``).

| check | error type | how | flagged when |
|---|---|---|---|
| ``council_gold_unsatisfying`` | E1 | cascade stage 4 (ground-truth satisfaction: the question, evidence, gold SQL and its first rows, a yes/no vote) | a strict majority of the members *answered* "no" |
| ``council_evidence_unneeded`` | E3 | cascade stage 5 (evidence necessity: members write SQL without the evidence) | a strict majority wrote SQL equivalent to the gold without it (Appendix A's relaxed equivalence) |
| ``council_rewrites_differ`` | E4 | members write SQL with the evidence (stage 5's prompt and vote loop) | a strict majority wrote SQL that runs and is *not* equivalent to the gold: the question reads differently to them (ambiguous as posed, or a wrong gold) |

A failed or unreadable call is never a judgement: the cascade counts it as an abstention that
does not say "yes", which for an audit would turn a silent member into a flag. So a flag needs a
strict majority of the whole council among the answers that were read; when the decision rests on
abstentions the verdict is ``undecided``, shown as such and never counted as a flag.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from pipelines.abiss.prompts import write_sql_messages
from pipelines.abiss.stages import ANS, STAGE_BY_NO, StageContext, run_stage
from pipelines.abiss.stages.voting import members_write_sql
from pipelines.benchmark_audit.records import Item
from resources.llm.runtime import run_sync

COUNCIL_CHECKS = {
    "council_gold_unsatisfying": "E1",
    "council_evidence_unneeded": "E3",
    "council_rewrites_differ": "E4",
}
GROUND_TRUTH, EVIDENCE_NECESSITY = STAGE_BY_NO[4], STAGE_BY_NO[5]
FLAG, PASS, UNDECIDED = "flag", "pass", "undecided"


@dataclass(frozen=True)
class CouncilVerdict:
    item_index: int
    check: str
    verdict: str  # flag | pass | undecided
    reason: str
    votes: list  # {member, comparison, vote, parsed_ok, llm_call_id}

    @property
    def error_type(self) -> str:
        return COUNCIL_CHECKS[self.check]

    def to_row(self) -> dict:
        return {
            "item_index": self.item_index,
            "check": self.check,
            "error_type": self.error_type,
            "verdict": self.verdict,
            "reason": self.reason,
            "votes": json.dumps(self.votes),
        }


def candidate_row(item: Item, digest: str) -> dict:
    """An item as the cascade's stages read a candidate (an answerable question, with evidence or not)."""
    return {
        "candidate_id": f"audit-{digest[:12]}-{item.index}",
        "group": ANS,
        "subcategory": "answerable_with_evidence" if item.evidence else "answerable",
        "question": item.question,
        "evidence": item.evidence or None,
        "hidden_knowledge": item.hidden_knowledge or None,
        "sql": item.gold_sql,
    }


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


def council_verdicts(items: list[Item], digest: str, ctx: StageContext, checks: list[str]) -> list[CouncilVerdict]:
    """Every asked check on every item it applies to (evidence necessity: items with evidence)."""
    out: list[CouncilVerdict] = []
    for check in checks:
        out += CHECK_RUNNERS[check](items, digest, ctx)
    return out


def calls_bound(items: list[Item], n_members: int, checks: list[str]) -> int:
    """At most one call per member, item and check (short-circuiting waves ask fewer)."""
    with_evidence = sum(1 for i in items if i.evidence)
    per = {"council_gold_unsatisfying": len(items), "council_evidence_unneeded": with_evidence}
    per["council_rewrites_differ"] = len(items)
    return n_members * sum(per[c] for c in checks)
