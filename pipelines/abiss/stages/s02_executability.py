"""Stage 2: the ground-truth SQL executes, returns rows, within the time limit."""

from __future__ import annotations

from pipelines.abiss.stages.base import AMB, ANS, StageContext, StageSpec, decision


def decide(rows: list[dict], stage: StageSpec, ctx: StageContext) -> list[dict]:
    out = []
    for row in rows:
        if not row.get("sql"):
            reason = f"no SQL ({row.get('grounding_status') or 'missing'}: {row.get('grounding_error') or ''})"
            out.append(decision(row, stage, False, reason.strip(": ")))
            continue
        result = ctx.execute(row["sql"])
        if not result.ok:
            out.append(decision(row, stage, False, result.one_line()))
        elif result.row_count == 0:
            out.append(decision(row, stage, False, "empty result"))
        else:
            # no wall-clock time in the artifact: identical runs must hash the same under any load
            out.append(decision(row, stage, True, f"{result.row_count} rows"))
    return out


STAGE = StageSpec(
    2,
    "sql_executability",
    frozenset({ANS, AMB}),
    False,
    "Ground-truth SQL executes, returns rows, within the time limit.",
    decide=decide,
)
