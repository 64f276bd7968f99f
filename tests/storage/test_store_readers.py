"""Readers outside the IO manager go through the deployment's artifact store (issue 21 item 2):
with ``$QUANDARY_ARTIFACTS_URL`` set, `quandary.load`, `quandary import`, the CLI's reports and the
assets' cross-partition reads see the shared store, not the node's local folder; charts are put
through the same store, content-addressed. The store here is an object store on a local folder
(``file://``), the same code path as a bucket."""

import hashlib

import polars as pl
import pytest

import quandary
from assets.shared.io_manager import location_of
from cli import main
from pipelines.ambitab.export import materialized_corpora
from storage.backends import ARTIFACTS_URL_ENV
from storage.charts import png_chart, publish_chart
from storage.stores import ObjectArtifactStore, artifact_store, latest_frame, latest_partitions

ROWS = {
    "candidate_id": ["c1", "c2"],
    "db_id": ["university"] * 2,
    "question": ["How many?", "Which?"],
    "sql": ["SELECT 1", None],
    "subcategory": ["answerable", "missing_entity"],
    "style": ["formal"] * 2,
    "difficulty": ["simple"] * 2,
}


@pytest.fixture
def bucket(tmp_path, monkeypatch, isolated_home):
    monkeypatch.setenv(ARTIFACTS_URL_ENV, (tmp_path / "bucket").as_uri())
    for var in ("QUANDARY_STATE_URL", "QUANDARY_DAGSTER_PG_URL"):
        monkeypatch.delenv(var, raising=False)
    store = artifact_store()
    assert isinstance(store, ObjectArtifactStore)
    return store


def _local_parquet(home) -> list:
    return sorted((home / "artifacts").rglob("*.parquet")) if (home / "artifacts").exists() else []


def test_load_and_assets_read_the_shared_store(bucket, isolated_home):
    bucket.write_version(pl.DataFrame(ROWS), "dataset", "university")
    bucket.write_version(pl.DataFrame({**ROWS, "db_id": ["other"] * 2}), "dataset", "other")
    assert quandary.assets() == ["dataset"]
    assert quandary.load("dataset", db="university").equals(pl.DataFrame(ROWS))
    assert quandary.load("dataset").height == 4
    with pytest.raises(LookupError, match="stored for: other, university"):
        quandary.load("dataset", db="nope")
    assert latest_partitions(bucket, "dataset") == ["other", "university"]
    assert latest_frame("dataset", "nope") is None
    assert _local_parquet(isolated_home) == []


def test_import_writes_to_the_shared_store(bucket, isolated_home, tmp_path, capsys):
    bucket.write_version(pl.DataFrame(ROWS), "dataset", "university")
    out = tmp_path / "abiss.json"
    assert main(["export", str(out)]) == 0  # the audit catalog reads the shared store
    assert main(["import", str(out)]) == 0
    assert "imported 2 records for university → imported_dataset" in capsys.readouterr().out
    imported = artifact_store().read_latest("imported_dataset", "university")
    assert sorted(imported["question"].to_list()) == ["How many?", "Which?"]
    assert _local_parquet(isolated_home) == []


def test_cross_partition_and_report_readers_see_the_shared_store(bucket):
    # lazy: imports dagster (~1 s); only the tests that need it pay
    from assets.cards import INTERACTION
    from assets.interaction.assets import dataset_source

    assert dataset_source("university") is None
    bucket.write_version(pl.DataFrame(ROWS), "imported_dataset", "university")
    assert dataset_source("university") == "imported_dataset"
    bucket.write_version(pl.DataFrame(ROWS), "dataset", "university")
    assert dataset_source("university") == "dataset"
    plan = INTERACTION.estimate("university", INTERACTION.config(agents=["a"], modes=["m"], max_steps=0))
    assert plan.items.startswith("2 conversations")
    assert materialized_corpora() == []


def test_charts_go_through_the_store_content_addressed(bucket, tmp_path, monkeypatch):
    from assets.shared.charts import chart_metadata  # lazy: imports dagster (~1 s); only the tests that need it pay

    png = tmp_path / "local" / "funnel.png"
    with png_chart(png, figsize=(2, 2), dpi=30) as ax:
        ax.plot([0, 1], [0, 1])
    digest = hashlib.sha256(png.read_bytes()).hexdigest()
    location = location_of(chart_metadata(png, "a line")["chart_path"])
    assert location == bucket.backend.uri(f"charts/{digest[:20]}.png")
    assert bucket.backend.get(f"charts/{digest[:20]}.png").data == png.read_bytes()
    assert publish_chart(png) == location  # the same bytes again: the same object (create-only, verified)
    assert "charts" not in bucket.latest_locations_by_asset()  # no asset
    monkeypatch.delenv(ARTIFACTS_URL_ENV)
    assert publish_chart(png) == str(png)  # one machine: the file stays where it was written
