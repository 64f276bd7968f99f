"""Balanced evaluation subsets (ABISS §6): every subcategory (or group) down-sampled to the smallest.

Reference procedure (``utils/balancing.py``): group the questions by key, take the smallest group
size, then for each key in sorted order draw that many with one ``random.Random(seed)`` used
sequentially (a group already at the minimum is kept whole). Items are sorted by id first, so the
subset depends only on the data and the seed, not on the row order of the input. Ambiguous
readings are separate items, as in the reference.

The paper balances over **all databases of a dataset** (82 per subcategory over the 11 BIRD
databases), so :func:`partition_subset` balances the pooled rows of every database and keeps one
database's share; a ``--max-questions`` cap is stratified (:func:`stratified_cap`) so it keeps the
balance instead of taking the first ids.
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


def stratified_cap(
    rows: list[dict], n: int, by: str = "subcategory", seed: int = 42, id_key: str = "question_id"
) -> list[dict]:
    """At most ``n`` rows, every stratum (``by``) keeping its share of the input (largest remainder:
    each stratum gets ``n * size / total`` rounded down, the leftover seats go to the largest
    fractional parts, ties drawn with ``seed``), then a seeded draw inside each stratum. A cap on a
    balanced set therefore stays balanced (strata differ by at most one). Sorted by id."""
    rows = sorted(rows, key=lambda r: r[id_key])
    if n >= len(rows):
        return rows
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        groups[r[by]].append(r)
    keys = sorted(groups)
    total = len(rows)
    rng = random.Random(seed)
    quota = {k: n * len(groups[k]) // total for k in keys}
    tie_break = {k: rng.random() for k in keys}
    left = n - sum(quota.values())
    for k in sorted(keys, key=lambda k: (-(n * len(groups[k]) % total), tie_break[k]))[:left]:
        quota[k] += 1
    out = []
    for k in keys:
        out += rng.sample(groups[k], quota[k])
    return sorted(out, key=lambda r: r[id_key])


def partition_subset(
    pooled: list[dict],
    db_id: str,
    *,
    balanced: bool = False,
    by: str = "subcategory",
    seed: int = 42,
    max_questions: int | None = None,
    subcategories=None,
) -> list[dict]:
    """One database's share of the subset built over the whole pool of databases (ABISS §6: the
    paper balances every subcategory over all databases of a dataset, 82 / 78 per subcategory).

    Filter → balance over the pool → stratified cap over the pool → this database's rows. Every
    step depends only on the pooled rows and the seed, so running each database of the pool gives
    disjoint shares whose union is the pooled subset. Without ``balanced`` the cap is taken over
    this database's own rows (stratified by ``by`` all the same)."""
    rows = [r for r in pooled if r["subcategory"] in set(subcategories)] if subcategories else list(pooled)
    if not balanced:
        rows = [r for r in rows if r["db_id"] == db_id]
    else:
        rows = balance(rows, by, seed)
    if max_questions is not None:
        rows = stratified_cap(rows, max_questions, by, seed)
    return sorted((r for r in rows if r["db_id"] == db_id), key=lambda r: r["question_id"])
