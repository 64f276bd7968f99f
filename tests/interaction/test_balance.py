"""Issue 22, item 3: balanced subsets pooled over every database of a dataset (the paper's 82/78 per
subcategory), and a --max-questions cap that keeps the balance (stratified, seeded)."""

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.interaction.balance import balance, partition_subset, stratified_cap

SUBS = ["answerable", "lexical_vagueness", "scope_ambiguity", "missing_entity"]


def rows_from(counts: dict[tuple[str, str], int]) -> list[dict]:
    out = []
    for (db, sub), n in counts.items():
        out += [{"question_id": f"{db}-{sub}-{i}", "db_id": db, "subcategory": sub, "group": "g"} for i in range(n)]
    return out


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(SUBS), st.integers(0, 12), min_size=1), st.integers(0, 60), st.integers(0, 5))
def test_stratified_cap_keeps_the_proportions(sizes, n, seed):
    rows = rows_from({("db", s): k for s, k in sizes.items()})
    out = stratified_cap(rows, n, "subcategory", seed)
    got = Counter(r["subcategory"] for r in out)
    total = len(rows)
    assert len(out) == min(n, total)
    assert len({r["question_id"] for r in out}) == len(out) and all(r in rows for r in out)
    for s, k in sizes.items():
        assert got[s] <= k
        if total:
            assert abs(got[s] - min(n, total) * k / total) < 1  # each stratum within one of its share
    assert out == stratified_cap(list(reversed(rows)), n, "subcategory", seed)  # seeded, order-free


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 10), st.integers(1, 40), st.integers(0, 5))
def test_a_cap_on_a_balanced_set_stays_balanced(per_sub, n, seed):
    rows = rows_from({("db", s): per_sub for s in SUBS})
    counts = Counter(r["subcategory"] for r in stratified_cap(rows, n, "subcategory", seed))
    full = [counts.get(s, 0) for s in SUBS]
    assert max(full) - min(full) <= 1  # was: the first n ids, i.e. whole subcategories dropped


def test_balance_is_pooled_over_every_database():
    counts = {
        ("a", "answerable"): 3,
        ("a", "lexical_vagueness"): 1,
        ("b", "lexical_vagueness"): 3,
        ("b", "answerable"): 0,
    }
    rows = rows_from(counts)
    pooled = Counter(r["subcategory"] for r in balance(rows, "subcategory", 42))
    assert pooled == {"answerable": 3, "lexical_vagueness": 3}  # per database it would be 1+0 / 1+3
    parts = {db: partition_subset(rows, db, balanced=True) for db in ("a", "b")}
    union = [r for p in parts.values() for r in p]
    assert Counter(r["subcategory"] for r in union) == pooled  # the partitions together = the pooled subset
    assert all(r["db_id"] == db for db, p in parts.items() for r in p)
    capped = [r for db in ("a", "b") for r in partition_subset(rows, db, balanced=True, max_questions=4)]
    assert Counter(r["subcategory"] for r in capped) == {"answerable": 2, "lexical_vagueness": 2}
