"""Stage 10: a strict council majority labels the question with its intended style.

The label set is the paper's three styles plus any other style of this run, so a formal
"List the ..." is not lost to a label ("imperative") the grid never asked for.
"""

from __future__ import annotations

import asyncio

from pipelines.abiss.prompts import style_label_model, style_messages
from pipelines.abiss.stages.base import ALL_GROUPS, StageSpec, count_text, decision, tag
from pipelines.abiss.taxonomy import DEFAULT_STYLES


async def decide(rows, stage, ctx):
    labels = sorted(set(DEFAULT_STYLES) | {r["style"] for r in rows})
    model = style_label_model(tuple(labels))

    async def one(row):
        ok, votes, outcome = await ctx.vote(
            style_messages(ctx.schema_for(row), row["question"], labels),
            model,
            lambda p, s=row["style"]: p.style == s,
            tag(stage, row),
            comparison=f"is {row['style']}",
        )
        return decision(
            row,
            stage,
            ok,
            f"style {row['style']}: {count_text(votes, outcome.decided)}",
            votes,
            calls_saved=outcome.calls_saved,
        )

    return list(await asyncio.gather(*(one(r) for r in rows)))


STAGE = StageSpec(
    10, "style_conformance", ALL_GROUPS, True, "Council: the question matches its intended style.", decide=decide
)
