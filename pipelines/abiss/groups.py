"""Group integrity of ambiguous questions after the cascade.

The paper judges each reading of an ambiguous question on its own (stage 6 removes a reading the
council writes without hidden knowledge; other stages decide per candidate), so a group can come
out of the cascade with one reading: an *orphan reading*, an ambiguous question whose other
interpretation is gone. The paper keeps such readings; a benchmark that scores "did the system
notice both readings" cannot use them. :func:`group_integrity` counts them (the rejection report
shows the counts), and :func:`drop_incomplete_groups` removes them from the dataset when
``CascadeSettings.drop_incomplete_groups`` is set.
"""

from __future__ import annotations

import polars as pl

INTEGRITY_SCHEMA = {
    "subcategory": pl.String,
    "groups": pl.Int64,
    "complete": pl.Int64,
    "incomplete": pl.Int64,
    "lost": pl.Int64,
    "orphan_readings": pl.Int64,
}


def _ambiguous_groups(candidates: pl.DataFrame) -> pl.DataFrame:
    if candidates.height == 0 or "group" not in candidates.columns:
        return pl.DataFrame(schema={"group_id": pl.String, "subcategory": pl.String, "readings": pl.UInt32})
    return (
        candidates.filter(pl.col("group") == "ambiguous")
        .group_by("group_id", "subcategory")
        .agg(pl.len().alias("readings"))
    )


def group_integrity(candidates: pl.DataFrame, survivors: pl.DataFrame) -> pl.DataFrame:
    """Per ambiguous subcategory: groups generated, complete (every reading survived), incomplete
    (some but not all survived), lost (none survived) and orphan readings (survivors of incomplete
    groups). ``survivors`` holds at least ``group_id`` and ``candidate_id`` of the kept rows."""
    groups = _ambiguous_groups(candidates)
    if groups.height == 0:
        return pl.DataFrame(schema=INTEGRITY_SCHEMA)
    kept = (
        survivors.filter(pl.col("group_id").is_in(groups["group_id"].implode()))
        .group_by("group_id")
        .agg(pl.col("candidate_id").n_unique().alias("kept"))
        if survivors.height
        else pl.DataFrame(schema={"group_id": pl.String, "kept": pl.UInt32})
    )
    joined = groups.join(kept, on="group_id", how="left").with_columns(pl.col("kept").fill_null(0))
    return (
        joined.group_by("subcategory")
        .agg(
            pl.len().alias("groups"),
            (pl.col("kept") >= pl.col("readings")).sum().alias("complete"),
            ((pl.col("kept") > 0) & (pl.col("kept") < pl.col("readings"))).sum().alias("incomplete"),
            (pl.col("kept") == 0).sum().alias("lost"),
            pl.when((pl.col("kept") > 0) & (pl.col("kept") < pl.col("readings")))
            .then(pl.col("kept"))
            .otherwise(0)
            .sum()
            .alias("orphan_readings"),
        )
        .with_columns(pl.exclude("subcategory").cast(pl.Int64))
        .sort("subcategory")
        .select(list(INTEGRITY_SCHEMA))
    )


def incomplete_group_ids(candidates: pl.DataFrame, survivors: pl.DataFrame) -> set[str]:
    groups = _ambiguous_groups(candidates)
    if groups.height == 0 or survivors.height == 0:
        return set()
    kept = survivors.group_by("group_id").agg(pl.col("candidate_id").n_unique().alias("kept"))
    j = groups.join(kept, on="group_id", how="inner").filter(pl.col("kept") < pl.col("readings"))
    return set(j["group_id"].to_list())


def drop_incomplete_groups(dataset: pl.DataFrame, candidates: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """The dataset without orphan readings, and how many rows were dropped."""
    bad = incomplete_group_ids(candidates, dataset)
    if not bad:
        return dataset, 0
    kept = dataset.filter(~pl.col("group_id").is_in(sorted(bad)))
    return kept, dataset.height - kept.height


def integrity_text(table: pl.DataFrame) -> str:
    if table.height == 0:
        return "no ambiguous groups"
    t = table.select(pl.exclude("subcategory").sum()).row(0, named=True)
    return (
        f"ambiguous groups: {t['groups']} generated, {t['complete']} complete, {t['incomplete']} lost a reading "
        f"({t['orphan_readings']} orphan readings), {t['lost']} lost entirely"
    )
