"""Stage 4: a strict council majority says the SQL and its result answer the question (the prompt
shows the first result rows and the hidden knowledge)."""

from __future__ import annotations

from pipelines.abiss.prompts import ground_truth_messages
from pipelines.abiss.stages.base import AMB, ANS, StageSpec, preview
from pipelines.abiss.stages.voting import yes_no_stage


async def decide(rows, stage, ctx):
    async def build(row):
        result = await ctx.aexecute(row["sql"])
        shown = preview(result, ctx.result_preview_rows) if result.ok else result.one_line()
        return ground_truth_messages(ctx.schema_for(row), row, shown)

    return await yes_no_stage(rows, stage, ctx, build, "answers the question")


STAGE = StageSpec(
    4,
    "ground_truth_satisfaction",
    frozenset({ANS, AMB}),
    True,
    "Council: the SQL and its result answer the question (with hidden knowledge).",
    decide=decide,
)
