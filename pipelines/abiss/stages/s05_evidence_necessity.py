"""Stage 5: members write SQL without the evidence; a strict majority equivalent to the gold
(Appendix A's relaxed equivalence) rejects the question: its evidence is not needed."""

from __future__ import annotations

import asyncio

from pipelines.abiss.prompts import write_sql_messages
from pipelines.abiss.stages.base import ANS, UNDECIDED, StageSpec, decision
from pipelines.abiss.stages.voting import members_write_sql


async def decide(rows, stage, ctx):
    async def one(row):
        majority, votes, saved = await members_write_sql(
            ctx, stage, row, write_sql_messages(ctx.schema_for(row), row["question"], None), {"gold": row["sql"]}
        )
        if majority["gold"] is None:
            return decision(row, stage, False, UNDECIDED, votes, calls_saved=saved)
        if majority["gold"]:
            return decision(
                row, stage, False, "majority wrote equivalent SQL without the evidence", votes, calls_saved=saved
            )
        return decision(row, stage, True, "evidence needed: no majority without it", votes, calls_saved=saved)

    return list(await asyncio.gather(*(one(r) for r in rows)))


STAGE = StageSpec(
    5,
    "evidence_necessity",
    frozenset({ANS}),
    True,
    "Council writes SQL without the evidence; majority equivalent rejects.",
    subcategories=frozenset({"answerable_with_evidence"}),
    decide=decide,
)
