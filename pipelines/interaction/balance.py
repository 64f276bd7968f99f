"""Balanced evaluation subsets (ABISS §6): every subcategory (or group) down-sampled to the smallest.

Reference procedure (``utils/balancing.py``): group the questions by key, take the smallest group
size, then for each key in sorted order draw that many with one ``random.Random(seed)`` used
sequentially (a group already at the minimum is kept whole). Items are sorted by id first, so the
subset depends only on the data and the seed, not on the row order of the input. Ambiguous
readings are separate items, as in the reference.
"""

from __future__ import annotations

import random
from collections import defaultdict

BALANCE_BY = ("subcategory", "group")


def balance(rows: list[dict], by: str = "subcategory", seed: int = 42, id_key: str = "question_id") -> list[dict]:
    if by not in BALANCE_BY:
        raise ValueError(f"balance_by must be one of {BALANCE_BY}, got {by!r}")
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in sorted(rows, key=lambda r: r[id_key]):
        groups[r[by]].append(r)
    if not groups:
        return []
    k = min(len(g) for g in groups.values())
    rng = random.Random(seed)
    out = []
    for key in sorted(groups):
        g = groups[key]
        out += g if len(g) == k else rng.sample(g, k)
    return out
