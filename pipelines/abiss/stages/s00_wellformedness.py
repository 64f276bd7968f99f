"""Step 0 (ours, not the paper's): the deterministic well-formedness filter before any council call.

The rules live in :mod:`pipelines.abiss.wellformed`; without a context (no database) the schema
rules are skipped. ``StageContext.wellformedness=False`` (a paper-exact run) makes the step a
pass-through: every candidate passes, marked not applied.
"""

from __future__ import annotations

from pipelines.abiss import wellformed
from pipelines.abiss.stages.base import ALL_GROUPS, StageContext, StageSpec, decision


def decide(rows: list[dict], stage: StageSpec, ctx: StageContext | None) -> list[dict]:
    if ctx is not None and not ctx.wellformedness:
        return [decision(r, stage, True, "filter off (paper-exact run)", applies=False) for r in rows]
    vocab = wellformed.Vocabulary.of_database(ctx.db_path, ctx.schema_context) if ctx is not None else None
    out = []
    for row in rows:
        defects = wellformed.check(row, vocab)
        out.append(decision(row, stage, not defects, wellformed.reason(defects)))
    return out


STAGE = StageSpec(
    0,
    "wellformedness",
    ALL_GROUPS,
    False,
    "Deterministic well-formedness filter: placeholders, prompt echoes and copies, repetition, "
    "length, SQL in the question, no schema mention, feedback naming nothing.",
    decide=decide,
)
