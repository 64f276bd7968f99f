"""Stage 7: members try to solve the unanswerable question, one after the other; the first SQL that
executes with a non-empty result *and* passes the council's ground-truth check rejects it (the
paper's "any model")."""

from __future__ import annotations

import asyncio

from pipelines.abiss.prompts import SolveAttempt, YesNoVerdict, ground_truth_messages, solve_messages
from pipelines.abiss.stages.base import UNA, UNDECIDED, StageSpec, decision, preview, tag, vote_record


async def decide(rows, stage, ctx):
    async def one(row):
        messages = solve_messages(ctx.schema_for(row), row["question"], row.get("evidence"))
        votes, gt_saved, lost = [], 0, []
        for member in ctx.council.member_names:  # sequential: stop at the first solution
            res = await ctx.ask(member, messages, SolveAttempt, tag(stage, row))
            if not res.ok:  # no attempt: this member might have solved it
                lost.append(member)
                votes.append(vote_record(member, "solve", "failed", False, res.call_id))
                continue
            if not res.parsed.answerable or not res.parsed.sql.strip():
                votes.append(vote_record(member, "solve", "unsolved", True, res.call_id))
                continue
            result = await ctx.aexecute(res.parsed.sql)
            if not result.ok or result.row_count == 0:
                why = result.one_line() if not result.ok else "empty result"
                votes.append(vote_record(member, "solve", f"unsolved ({why})", True, res.call_id))
                continue
            judged = {**row, "sql": res.parsed.sql}
            ok, gt_votes, gt_outcome = await ctx.vote(
                ground_truth_messages(ctx.schema_for(row), judged, preview(result, ctx.result_preview_rows)),
                YesNoVerdict,
                lambda p: p.verdict,
                tag(stage, row, f"gt_check:{member}"),
                comparison=f"gt_check:{member}",
            )
            if not gt_outcome.decided:  # the judges' lost votes could make it a solution
                lost.append(member)
            verdict = (
                "solved" if ok else "unsolved (judged wrong)" if gt_outcome.decided else "undecided (judges failed)"
            )
            votes.append(vote_record(member, "solve", verdict, True, res.call_id))
            votes.extend(gt_votes)
            gt_saved += gt_outcome.calls_saved
            if ok:
                saved = len(ctx.council.member_names) - sum(v["comparison"] == "solve" for v in votes)
                ctx.stats["calls_saved"] += saved
                return decision(
                    row, stage, False, f"solved by {member}: {res.parsed.sql}", votes, calls_saved=saved + gt_saved
                )
        if lost:
            return decision(
                row, stage, False, f"{UNDECIDED} (no attempt from {', '.join(lost)})", votes, calls_saved=gt_saved
            )
        return decision(row, stage, True, "no council member found a correct SQL", votes, calls_saved=gt_saved)

    return list(await asyncio.gather(*(one(r) for r in rows)))


STAGE = StageSpec(
    7,
    "unsolvability_verification",
    frozenset({UNA}),
    True,
    "Council tries to solve; any executable SQL judged correct rejects.",
    decide=decide,
)
