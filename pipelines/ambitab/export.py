"""Read materialised AmbiTab records back: JSONL export and lookup of one record by id.

The records asset stores one Parquet artifact per corpus (``ambitab_records/<corpus>``); these
helpers read the latest version of each, so the CLI needs no Dagster instance.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipelines.ambitab.record import CORPORA, TaskRecord, records_from_frame, write_jsonl
from storage.paths import quandary_home
from storage.stores import artifact_store

RECORDS_ASSET = "ambitab_records"
REJECTS_ASSET = "ambitab_rejects"


def export_dir() -> Path:
    p = quandary_home() / "ambitab" / "export"
    p.mkdir(parents=True, exist_ok=True)
    return p


def export_path(corpus: str) -> Path:
    return export_dir() / f"{corpus}.jsonl"


def materialized_corpora() -> list[str]:
    store = artifact_store()
    return [c for c in CORPORA if store.latest_location(RECORDS_ASSET, c) is not None]


def load_records(corpus: str) -> list[TaskRecord]:
    return records_from_frame(artifact_store().read_latest(RECORDS_ASSET, corpus))


def load_rejects(corpus: str):
    return artifact_store().read_latest(REJECTS_ASSET, corpus)


def export_jsonl(corpora: list[str], out: Path) -> int:
    """All records of ``corpora`` (latest versions) as one JSONL file; returns the line count."""
    records = [r for c in corpora for r in load_records(c)]
    return write_jsonl(records, out)


def find_record(record_id: str, corpora: list[str] | None = None) -> TaskRecord | None:
    """The record with this id (or unique id prefix) among the materialised corpora."""

    store = artifact_store()
    hits = []
    for c in corpora or materialized_corpora():
        try:
            df = store.read_latest(RECORDS_ASSET, c)
        except FileNotFoundError:
            continue
        df = df.filter(pl.col("record_id").str.starts_with(record_id))
        exact = df.filter(pl.col("record_id") == record_id)
        hits.extend(records_from_frame(exact if exact.height else df))
    exact = [h for h in hits if h.record_id == record_id]
    if exact:
        return exact[0]
    if len(hits) > 1:
        raise LookupError(f"{record_id!r} matches {len(hits)} records; give more of the id")
    return hits[0] if hits else None
