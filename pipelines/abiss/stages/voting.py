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
    """A strict-majority yes/no vote per row; ``build_messages(row)`` may be a coroutine function."""

    async def one(row):
        messages = build_messages(row)
        if asyncio.iscoroutine(messages):
            messages = await messages
        ok, votes, outcome = await ctx.vote(messages, YesNoVerdict, lambda p: p.verdict, tag(stage, row))
        return decision(row, stage, ok, f"{label}: {count_text(votes)}", votes, calls_saved=outcome.calls_saved)

    return list(await asyncio.gather(*(one(r) for r in rows)))


async def equivalent(ctx: StageContext, gold_sql: str, pred_sql: str) -> bool | None:
    """True/False by relaxed equivalence; None when the prediction does not execute."""
    gold, pred = await ctx.aexecute(gold_sql), await ctx.aexecute(pred_sql)
    if not gold.ok or not pred.ok:
        return None if not pred.ok else False
    ordered = ctx.order_sensitive and has_top_level_order_by(gold_sql)
    return results_equivalent(gold, pred, order_sensitive=ordered).equivalent


async def members_write_sql(ctx, stage, row, messages, golds: dict[str, str]):
    """Ask members (in short-circuit waves) for SQL; vote per gold = equivalent to it."""
    names = ctx.council.member_names
    n = len(names)
    per_gold: dict[str, list] = {g: [] for g in golds}
    records: list[dict] = []
    asked = 0
    while asked < n:
        pending = [g for g in golds if not is_decided(per_gold[g], n - asked, "strict_majority", abstain_as_no=True)]
        if not pending:
            break
        k = max(min_more_votes(per_gold[g], n - asked, "strict_majority", abstain_as_no=True) for g in pending)
        k = max(1, min(k, n - asked))
        wave = names[asked : asked + k]
        results = await asyncio.gather(*(ctx.ask(m, messages, SqlAttempt, tag(stage, row)) for m in wave))
        for member, res in zip(wave, results):
            pred = res.parsed.sql if res.ok else None
            for g, gold_sql in golds.items():
                eq = await equivalent(ctx, gold_sql, pred) if pred else None
                # a member that writes no runnable SQL did not reproduce the gold: count as "not equivalent"
                per_gold[g].append(bool(eq))
                label = (
                    "equivalent"
                    if eq
                    else "not_equivalent"
                    if eq is False
                    else "not_equivalent (fails to run)"
                    if pred
                    else "abstain"
                )
                records.append(vote_record(member, g, label, res.ok, res.call_id))
        asked += k
    majority = {g: decide(v + [False] * (n - len(v)), "strict_majority").decision for g, v in per_gold.items()}
    ctx.stats["calls_saved"] += n - asked
    return majority, records, n - asked
