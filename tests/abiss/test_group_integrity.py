"""Group integrity: orphan readings (an ambiguous group that lost a reading) are counted, and the
option drops such groups from the dataset."""

import polars as pl

from pipelines.abiss.groups import drop_incomplete_groups, group_integrity, incomplete_group_ids, integrity_text


def cands():
    rows = [
        ("g1", "g1_0", "scope_ambiguity", "ambiguous"),
        ("g1", "g1_1", "scope_ambiguity", "ambiguous"),
        ("g2", "g2_0", "scope_ambiguity", "ambiguous"),
        ("g2", "g2_1", "scope_ambiguity", "ambiguous"),
        ("g3", "g3_0", "lexical_vagueness", "ambiguous"),
        ("g3", "g3_1", "lexical_vagueness", "ambiguous"),
        ("a1", "a1", "answerable", "answerable"),
    ]
    return pl.DataFrame(rows, schema=["group_id", "candidate_id", "subcategory", "group"], orient="row")


def test_counts_orphans_complete_and_lost_groups():
    c = cands()
    kept = c.filter(pl.col("candidate_id").is_in(["g1_0", "g1_1", "g2_0", "a1"]))
    t = {r["subcategory"]: r for r in group_integrity(c, kept).iter_rows(named=True)}
    assert t["scope_ambiguity"] == {
        "subcategory": "scope_ambiguity",
        "groups": 2,
        "complete": 1,
        "incomplete": 1,
        "lost": 0,
        "orphan_readings": 1,
    }
    assert t["lexical_vagueness"]["lost"] == 1 and t["lexical_vagueness"]["orphan_readings"] == 0
    assert "answerable" not in t
    assert incomplete_group_ids(c, kept) == {"g2"}
    assert "1 orphan readings" in integrity_text(group_integrity(c, kept))


def test_drop_incomplete_groups_removes_only_orphans():
    c = cands()
    ds = c.filter(pl.col("candidate_id").is_in(["g1_0", "g1_1", "g2_0", "a1"]))
    out, dropped = drop_incomplete_groups(ds, c)
    assert dropped == 1 and sorted(out["candidate_id"].to_list()) == ["a1", "g1_0", "g1_1"]
    same, none = drop_incomplete_groups(c, c)
    assert none == 0 and same.height == c.height


def test_empty_inputs():
    empty = cands().clear()
    assert group_integrity(empty, empty).height == 0
    assert integrity_text(group_integrity(empty, empty)) == "no ambiguous groups"
