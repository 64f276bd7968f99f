"""Seeds addressed by content hash and one catalog for every node (issue 21 item 5).

With a shared store (``$QUANDARY_ARTIFACTS_URL``) `db register` uploads the seed to
``seeds/<sha256>.<ext>`` (create-only, verified); a node whose registered path is missing, or holds
other bytes, fetches the registered bytes by hash into its own ``$QUANDARY_HOME/seeds`` and verifies
them before any step reads them. With a shared-state database the catalog is a table every node
sees. Unit tests: a ``file://`` store and a SQLite state database; integration: real PostgreSQL.
"""

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest

from cli import main
from resources.catalog import Catalog, SeedChangedError, local_seed
from storage.backends import ARTIFACTS_URL_ENV, backend_for
from storage.state_db import STATE_URL_ENV
from storage.stores import artifact_store
from tests.distributed.servers import postgres_server
from tests.sql.hostile_sql import REPO_ROOT


@pytest.fixture
def shared(tmp_path, monkeypatch):
    """A distributed deployment on this machine: a shared store and a shared-state database."""
    monkeypatch.setenv(ARTIFACTS_URL_ENV, (tmp_path / "bucket").as_uri())
    monkeypatch.setenv(STATE_URL_ENV, f"sqlite:///{tmp_path / 'state.sqlite'}")
    monkeypatch.delenv("QUANDARY_DAGSTER_PG_URL", raising=False)
    return backend_for((tmp_path / "bucket").as_uri())


def _seed(demo_db_path, folder):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "uni.sqlite"
    shutil.copyfile(demo_db_path, path)
    return path


def _node(monkeypatch, tmp_path, name):
    home = tmp_path / name
    monkeypatch.setenv("QUANDARY_HOME", str(home))
    return home


def test_register_uploads_the_seed_and_every_node_sees_the_entry(shared, demo_db_path, tmp_path, monkeypatch):
    home_a = _node(monkeypatch, tmp_path, "node_a")
    path = _seed(demo_db_path, tmp_path / "a_files")
    info = Catalog().register(path, "uni")
    key = f"seeds/{info.sha256}.sqlite"
    assert hashlib.sha256(shared.get(key).data).hexdigest() == info.sha256
    assert Catalog().register(path, "uni").sha256 == info.sha256  # again: the stored object verifies
    assert not (home_a / "catalog.json").exists()  # the catalog is the shared table, not a node's file
    _node(monkeypatch, tmp_path, "node_b")
    entry = Catalog().get("uni")
    assert (entry.path, entry.sha256) == (str(path.resolve()), info.sha256)


def test_a_node_without_the_file_fetches_it_by_hash(shared, demo_db_path, tmp_path, monkeypatch):
    _node(monkeypatch, tmp_path, "node_a")
    path = _seed(demo_db_path, tmp_path / "a_files")
    info = Catalog().register(path, "uni")
    home_b = _node(monkeypatch, tmp_path, "node_b")
    assert local_seed(path, info.sha256, "uni") == str(path)  # present and intact: read in place
    path.unlink()
    fetched = local_seed(path, info.sha256, "uni")
    assert fetched == str(home_b / "seeds" / f"{info.sha256}.sqlite")
    assert hashlib.sha256(open(fetched, "rb").read()).hexdigest() == info.sha256
    assert not os.access(fetched, os.W_OK) or os.geteuid() == 0  # read-only copy
    # other bytes at the registered path: the registered bytes are used, fetched by hash
    path.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    assert local_seed(path, info.sha256, "uni") == fetched


def test_damaged_or_missing_shared_seed_is_refused_before_a_step_reads_it(shared, demo_db_path, tmp_path, monkeypatch):
    _node(monkeypatch, tmp_path, "node_a")
    path = _seed(demo_db_path, tmp_path / "a_files")
    info = Catalog().register(path, "uni")
    key = f"seeds/{info.sha256}.sqlite"
    blob = shared.get(key)
    shared.put(key, blob.data[:1000], if_match=blob.etag)  # damaged in the store
    _node(monkeypatch, tmp_path, "node_b")
    path.unlink()
    with pytest.raises(SeedChangedError) as exc:
        local_seed(path, info.sha256, "uni")
    assert "damaged" in str(exc.value) and "db register" in str(exc.value)
    # registering the file again (from a node that has it) heals the object
    _seed(demo_db_path, tmp_path / "a_files")
    Catalog().register(path, "uni")
    path.unlink()
    assert local_seed(path, info.sha256, "uni").endswith(f"{info.sha256}.sqlite")


def test_one_machine_keeps_the_local_catalog_and_refuses_a_changed_seed(demo_db_path, tmp_path, isolated_home):
    path = _seed(demo_db_path, tmp_path / "files")
    info = Catalog().register(path, "uni")
    assert (isolated_home / "catalog.json").exists() and not (isolated_home / "seeds").exists()
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE extra(x INTEGER)")
    con.commit()
    con.close()
    with pytest.raises(SeedChangedError, match="--replace"):
        local_seed(path, info.sha256, "uni")


def test_steps_on_another_node_read_the_fetched_seed(shared, demo_db_path, tmp_path, monkeypatch):
    """The seed job on node B, whose registered path does not exist: the seed is fetched by hash, the
    stored row keeps the registered path (one table for every node), schema_context reads the copy;
    preflight accepts the missing file because the store has it."""
    from assets.shared.preflight import check_database  # lazy: imports dagster (~1 s); only the tests that need it pay

    _node(monkeypatch, tmp_path, "node_a")
    path = _seed(demo_db_path, tmp_path / "a_files")
    info = Catalog().register(path, "uni")
    path.unlink()
    home_b = _node(monkeypatch, tmp_path, "node_b")
    check_database("uni")
    assert main(["run", "--job", "seed_databases_job", "--db", "uni"]) == 0
    row = artifact_store().read_latest("seed_databases", "uni").row(0, named=True)
    assert (row["path"], row["sha256"]) == (str(path.resolve()), info.sha256)
    assert "CREATE TABLE" in artifact_store().read_latest("schema_context", "uni")["schema_context"][0]
    assert (home_b / "seeds" / f"{info.sha256}.sqlite").is_file()


# -- PostgreSQL ------------------------------------------------------------------------------------

REGISTER = (
    "import sys; sys.stdin.read(1); from resources.catalog import Catalog; Catalog().register(sys.argv[1], sys.argv[2])"
)


@pytest.mark.integration
def test_concurrent_registrations_on_two_nodes_share_one_postgres_catalog(tmp_path, isolated_home, monkeypatch):
    paths = []
    for i in range(4):
        paths.append(tmp_path / f"db{i}.sqlite")
        con = sqlite3.connect(paths[-1])
        con.execute("CREATE TABLE t(a INTEGER)")
        con.execute("INSERT INTO t VALUES (?)", (i,))
        con.commit()
        con.close()
    with postgres_server() as pg:
        url = pg.create_database("catalog")
        procs = []
        for i, p in enumerate(paths):  # two "nodes", two registrations each, released at once
            env = {**os.environ, "QUANDARY_DAGSTER_PG_URL": url, "QUANDARY_HOME": str(tmp_path / f"node{i % 2}")}
            env.pop(STATE_URL_ENV, None)
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", REGISTER, str(p), f"db{i}"],
                    cwd=REPO_ROOT,
                    env=env,
                    stdin=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )
            )
        for p in procs:
            p.stdin.write(b"g")
            p.stdin.flush()
            p.stdin.close()
        results = [(p.wait(timeout=300), p.stderr.read().decode()) for p in procs]
        assert all(rc == 0 for rc, _ in results), results
        monkeypatch.setenv(STATE_URL_ENV, url)
        assert sorted(Catalog().ids()) == [f"db{i}" for i in range(4)]
        assert Catalog().get("db3").path == str(paths[3].resolve())
        assert not (tmp_path / "node0" / "catalog.json").exists()
