"""The two council patterns several stages share: a yes/no vote per candidate (stages 3, 4, 8) and
members writing SQL that is checked for relaxed equivalence with the gold (stages 5, 6)."""

from __future__ import annotations

import asyncio

from pipelines.abiss.prompts import SqlAttempt, YesNoVerdict
from pipelines.abiss.stages.base import StageContext, count_text, decision, tag, vote_record
from pipelines.sqltools.equivalence import results_equivalent
from pipelines.sqltools.results import has_top_level_order_by
from resources.llm.votes import decide, is_decided, min_more_votes


async def yes_no_stage(rows, stage, ctx, build_messages, label) -> list[dict]:
    """A strict-majority yes/no vote per row; ``build_messages(row)`` may be a coroutine function.
    A row the lost votes could decide either way is rejected as undecided (and the stage fails
    unless failed calls are tolerated: see :class:`StageContext`)."""

    async def one(row):
        messages = build_messages(row)
        if asyncio.iscoroutine(messages):
            messages = await messages
        ok, votes, outcome = await ctx.vote(messages, YesNoVerdict, lambda p: p.verdict, tag(stage, row))
        text = count_text(votes, outcome.decided)
        return decision(row, stage, ok, f"{label}: {text}", votes, calls_saved=outcome.calls_saved)

    return list(await asyncio.gather(*(one(r) for r in rows)))


async def equivalent(ctx: StageContext, gold_sql: str, pred_sql: str) -> bool | None:
    """True/False by relaxed equivalence; None when the prediction does not execute."""
    gold, pred = await ctx.aexecute(gold_sql), await ctx.aexecute(pred_sql)
    if not gold.ok or not pred.ok:
        return None if not pred.ok else False
    ordered = ctx.order_sensitive and has_top_level_order_by(gold_sql)
    return results_equivalent(gold, pred, order_sensitive=ordered).equivalent


async def members_write_sql(ctx, stage, row, messages, golds: dict[str, str]):
    """Ask members (in short-circuit waves) for SQL; vote per gold = equivalent to it.

    Same rule as the council's vote (:meth:`resources.llm.council.Council.avote`): a member whose
    call failed or whose answer could not be read casts no vote (``failed``); a member that writes
    SQL that does not run did answer, and did not reproduce the gold. A gold's majority stands only
    when the lost votes could not change it; otherwise it is None (undecided)."""
    names = ctx.council.member_names
    n = len(names)
    per_gold: dict[str, list] = {g: [] for g in golds}
    records: list[dict] = []
    lost = 0
    asked = 0
    kw = dict(abstain_as_no=True)
    while asked < n:
        unknown = n - asked + lost
        pending = [g for g in golds if not is_decided(per_gold[g], unknown, "strict_majority", **kw)]
        if not pending:
            break
        k = max(min_more_votes(per_gold[g], unknown, "strict_majority", **kw) for g in pending)
        if k > n - asked:
            break  # only the lost members could decide: undecided now, a rerun re-asks them
        k = max(1, k)
        wave = names[asked : asked + k]
        results = await asyncio.gather(*(ctx.ask(m, messages, SqlAttempt, tag(stage, row)) for m in wave))
        for member, res in zip(wave, results):
            pred = res.parsed.sql if res.ok else None
            lost += int(not res.ok)
            for g, gold_sql in golds.items():
                eq = await equivalent(ctx, gold_sql, pred) if pred else None
                if res.ok:
                    per_gold[g].append(bool(eq))  # no SQL, or SQL that fails: did not reproduce the gold
                label = (
                    "equivalent"
                    if eq
                    else "not_equivalent"
                    if eq is False
                    else "not_equivalent (fails to run)"
                    if pred
                    else "not_equivalent (no SQL)"
                    if res.ok
                    else "failed"
                )
                records.append(vote_record(member, g, label, res.ok, res.call_id))
        asked += k
    unknown = n - asked + lost
    majority = {
        g: (
            decide(v + [False] * unknown, "strict_majority").decision
            if is_decided(v, unknown, "strict_majority", **kw)
            else None
        )
        for g, v in per_gold.items()
    }
    ctx.stats["calls_saved"] += n - asked
    ctx.stats["undecided"] += sum(m is None for m in majority.values())
    return majority, records, n - asked
