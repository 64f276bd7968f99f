"""Stage 6: members write SQL for the ambiguous question without hidden knowledge; an
interpretation a strict majority reproduces (the dominant reading) is removed."""

from __future__ import annotations

import asyncio
from collections import defaultdict

from pipelines.abiss.prompts import write_sql_messages
from pipelines.abiss.stages.base import AMB, UNDECIDED, StageSpec, decision
from pipelines.abiss.stages.voting import members_write_sql


async def decide(rows, stage, ctx):
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        groups[row["group_id"]].append(row)

    async def one_group(members: list[dict]):
        first = members[0]
        golds = {f"interpretation_{r.get('interpretation_index') or 0}": r["sql"] for r in members}
        messages = write_sql_messages(ctx.schema_for(first), first["question"], first.get("evidence"))
        majority, votes, saved = await members_write_sql(ctx, stage, first, messages, golds)
        out = []
        for r in members:
            label = f"interpretation_{r.get('interpretation_index') or 0}"
            mine = [v for v in votes if v["comparison"] == label]
            mine_saved = saved if r is members[0] else 0  # the group's savings, counted once
            if majority[label] is None:
                out.append(decision(r, stage, False, UNDECIDED, mine, calls_saved=mine_saved))
            elif majority[label]:
                out.append(
                    decision(
                        r,
                        stage,
                        False,
                        "dominant reading: majority wrote it without hidden knowledge",
                        mine,
                        calls_saved=mine_saved,
                    )
                )
            else:
                out.append(decision(r, stage, True, "not the majority reading", mine, calls_saved=mine_saved))
        return out

    results = await asyncio.gather(*(one_group(g) for g in groups.values()))
    return [d for batch in results for d in batch]


STAGE = StageSpec(
    6,
    "ambiguity_verification",
    frozenset({AMB}),
    True,
    "Council writes SQL without hidden knowledge; a majority-equivalent interpretation is removed.",
    decide=decide,
)
