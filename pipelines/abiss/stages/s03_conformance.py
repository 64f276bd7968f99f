"""Stage 3: a strict council majority says the question clearly conforms to its category."""

from __future__ import annotations

from pipelines.abiss.prompts import conformance_messages
from pipelines.abiss.stages.base import ALL_GROUPS, StageSpec
from pipelines.abiss.stages.voting import yes_no_stage


async def decide(rows, stage, ctx):
    return await yes_no_stage(rows, stage, ctx, lambda r: conformance_messages(ctx.schema_for(r), r), "conforms")


STAGE = StageSpec(
    3,
    "category_conformance",
    ALL_GROUPS,
    True,
    "Council: the question clearly conforms to its category.",
    decide=decide,
)
