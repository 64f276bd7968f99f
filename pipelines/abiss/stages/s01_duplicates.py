"""Stage 1: exact duplicates, then value-masked SQL duplicates (answerable and ambiguous).

Literal-only differences *within* an ambiguous group are intended (missing user knowledge and
vagueness readings differ only in a value), so masked-SQL duplicates are only counted across groups.
"""

from __future__ import annotations

from pipelines.abiss.stages.base import ALL_GROUPS, AMB, ANS, StageSpec, decision
from pipelines.sqltools.masking import dedup_key


def decide(rows: list[dict], stage: StageSpec, ctx=None) -> list[dict]:
    ordered = sorted(
        rows, key=lambda r: (r["generator"], r["request_id"], r.get("interpretation_index") or 0, r["candidate_id"])
    )
    seen_exact: dict[tuple, str] = {}
    seen_masked: dict[str, tuple[str, str]] = {}  # key -> (group_id, candidate_id)
    out = []
    for row in ordered:
        exact = (
            " ".join(row["question"].lower().split()),
            row.get("evidence") or "",
            row.get("hidden_knowledge") or "",
            row["subcategory"],
        )
        if exact in seen_exact:
            out.append(decision(row, stage, False, f"exact duplicate of {seen_exact[exact]}"))
            continue
        seen_exact[exact] = row["candidate_id"]
        if row["group"] in (ANS, AMB) and row.get("sql"):
            key = dedup_key(row["sql"])
            prior = seen_masked.get(key)
            if prior and prior[0] != row["group_id"]:
                out.append(decision(row, stage, False, f"value-masked SQL duplicates {prior[1]}"))
                continue
            seen_masked.setdefault(key, (row["group_id"], row["candidate_id"]))
        out.append(decision(row, stage, True, "unique"))
    return out


STAGE = StageSpec(
    1,
    "duplicate_removal",
    ALL_GROUPS,
    False,
    "Exact duplicates, then value-masked SQL duplicates (answerable and ambiguous).",
    decide=decide,
)
