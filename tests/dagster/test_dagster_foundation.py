"""Materialize the foundation assets with a real (temporary) Dagster instance."""

import hashlib
import sqlite3
from pathlib import Path

import pytest
from dagster import DagsterInstance

from assets.definitions import defs
from assets.shared.io_manager import location_of
from cli.runs import ensure_partitions, run_job_for_partition
from resources.catalog import Catalog
from storage.audit import open_audit

pytestmark = pytest.mark.integration


@pytest.fixture
def instance(tmp_path):
    with DagsterInstance.ephemeral() as inst:
        yield inst


def test_definitions_load():
    type(defs).validate_loadable(defs)
    job = defs.resolve_job_def("seed_databases_job")
    assert job.name == "seed_databases_job"


def test_materialize_demo_partition(instance, demo_db_path):
    before = hashlib.sha256(demo_db_path.read_bytes()).hexdigest()
    Catalog().register(demo_db_path, "university")
    result = run_job_for_partition("seed_databases_job", "university", instance=instance)
    assert result.success
    mats = {
        e.asset_key.to_user_string(): e.event_specific_data.materialization
        for e in result.get_asset_materialization_events()
    }
    assert set(mats) == {"seed_databases", "schema_context"}
    md = mats["seed_databases"].metadata
    assert md["dagster/row_count"].value == 1
    # short forms that read whole on the asset page (#42): the hash's first 16 digits, the file's name
    # as a link whose title is the whole path
    assert len(md["content_hash"].value) == 17 and md["content_hash"].value.endswith("…")
    assert location_of(md["path"]).endswith(".parquet") and Path(location_of(md["path"])).is_file()
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {"seed_databases_contract": True, "schema_context_contract": True}
    # data version = content hash, so the UI shows content lineage
    record = instance.get_latest_materialization_event(__import__("dagster").AssetKey("seed_databases"))
    version = record.asset_materialization.tags["dagster/data_version"]
    assert len(version) == 64 and version.startswith(md["content_hash"].value[:16])
    con = open_audit()
    assert con.execute("SELECT n_tables FROM seed_databases").fetchall() == [(5,)]
    assert "CREATE TABLE students" in con.execute("SELECT schema_context FROM schema_context").fetchall()[0][0]
    assert hashlib.sha256(demo_db_path.read_bytes()).hexdigest() == before


def test_rematerialize_same_content_reuses_version(instance, demo_db_path, isolated_home):
    Catalog().register(demo_db_path, "university")
    run_job_for_partition("seed_databases_job", "university", instance=instance)
    run_job_for_partition("seed_databases_job", "university", instance=instance)
    files = list((isolated_home / "artifacts" / "seed_databases" / "university").glob("*.parquet"))
    assert len(files) == 1


def test_broken_check_blocks(instance, tmp_path, isolated_home):
    """A database that disappears after registration fails the run with a clear error."""

    db = tmp_path / "gone.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t(a)")
    con.commit()
    con.close()
    Catalog().register(db, "gone")
    db.unlink()
    ensure_partitions(instance, ["gone"])
    result = run_job_for_partition("seed_databases_job", "gone", instance=instance)
    assert not result.success
    failure = result.get_step_failure_events()[0].event_specific_data.error
    assert "not a file" in failure.message or "not a file" in str(failure.cause)
