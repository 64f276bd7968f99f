"""Stage 9: the assigned subcategory must win a strict majority against every other subcategory of
its group, one A/B comparison at a time; the first lost comparison stops. A/B positions alternate
by a hash of the candidate and the competitor, so position bias cannot favour the assigned one."""

from __future__ import annotations

import asyncio
import hashlib

from pipelines.abiss.prompts import CategoryChoice, consistency_messages
from pipelines.abiss.stages.base import AMB, UNA, UNDECIDED, StageSpec, decision, tag
from pipelines.abiss.taxonomy import subcategories_in, subcategory


def max_comparisons(group: str) -> int:
    """The comparisons a candidate of ``group`` can need: one against every other subcategory."""
    return len(subcategories_in(group)) - 1


async def decide(rows, stage, ctx):
    async def one(row):
        assigned = subcategory(row["subcategory"])
        competitors = [s for s in subcategories_in(assigned.group) if s.id != assigned.id]  # max_comparisons
        votes, saved, lost = [], 0, None
        for i, other in enumerate(competitors):
            flip = hashlib.sha256(f"{row['candidate_id']}|{other.id}".encode()).digest()[0] % 2 == 1
            a, b = (other, assigned) if flip else (assigned, other)
            letter = "B" if flip else "A"

            ok, v, outcome = await ctx.vote(
                consistency_messages(ctx.schema_for(row), row, a, b),
                CategoryChoice,
                lambda p, letter=letter: p.choice == letter,
                tag(stage, row, f"vs:{other.id}"),
                comparison=f"vs:{other.id}",
            )
            votes.extend(v)
            saved += outcome.calls_saved
            if not ok and lost is None:
                lost = f"lost against {other.id}" if outcome.decided else f"{UNDECIDED} (against {other.id})"
                if ctx.stop_at_first_loss:
                    never_asked = (len(competitors) - i - 1) * ctx.n_members  # comparisons never asked
                    saved += never_asked
                    ctx.stats["calls_saved"] += never_asked
                    break
        if lost is not None:
            return decision(row, stage, False, lost, votes, calls_saved=saved)
        return decision(row, stage, True, f"won all {len(competitors)} comparisons", votes, calls_saved=saved)

    return list(await asyncio.gather(*(one(r) for r in rows)))


STAGE = StageSpec(
    9,
    "category_consistency",
    frozenset({AMB, UNA}),
    True,
    "Assigned subcategory wins a strict majority against every other of its group.",
    decide=decide,
)
