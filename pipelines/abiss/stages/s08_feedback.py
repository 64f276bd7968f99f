"""Stage 8: a strict council majority says the feedback is accurate, specific and actionable."""

from __future__ import annotations

from pipelines.abiss.prompts import feedback_messages
from pipelines.abiss.stages.base import UNA, StageSpec
from pipelines.abiss.stages.voting import yes_no_stage


async def decide(rows, stage, ctx):
    return await yes_no_stage(rows, stage, ctx, lambda r: feedback_messages(ctx.schema_for(r), r), "good feedback")


STAGE = StageSpec(
    8,
    "feedback_quality",
    frozenset({UNA}),
    True,
    "Council: the feedback is accurate, specific and actionable.",
    decide=decide,
)
