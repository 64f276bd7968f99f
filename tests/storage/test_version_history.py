"""The artifact version history in the shared-state database (issue 21 item 2).

With a state database the object store records each version as a row of
``quandary_artifact_versions`` — the insert claims the seq (unique constraint + retry) — and moves
LATEST forward to it by compare-and-swap; without one it keeps the bucket's ``versions/`` objects.
Unit tests use a SQLite state database on a local-folder backend; the integration tests use the real
PostgreSQL and S3 servers of tests/distributed/servers.py, with threads and with two processes.
"""

import hashlib
import json
import os

import polars as pl
import pytest
from sqlalchemy import create_engine, select

from cli import main
from storage.artifacts import parquet_bytes
from storage.backends import ARTIFACTS_URL_ENV, LocalBackend, S3Backend
from storage.state_db import STATE_URL_ENV, state_engine
from storage.stores import ObjectArtifactStore, artifact_store
from storage.versions_db import VERSIONS, claim_version
from tests.distributed.servers import postgres_server, s3_server
from tests.storage.test_object_store import race_threads, race_writer_processes


@pytest.fixture
def sqlite_engine(tmp_path):
    return create_engine(f"sqlite:///{tmp_path / 'state.sqlite'}")


@pytest.fixture
def table_store(tmp_path, sqlite_engine):
    return ObjectArtifactStore(LocalBackend(tmp_path / "bucket"), history_engine=sqlite_engine)


def _rows(engine) -> list[dict]:
    with engine.connect() as con:
        return [dict(r) for r in con.execute(select(VERSIONS).order_by(VERSIONS.c.seq)).mappings()]


def _latest(store, folder="thing/p") -> dict:
    return json.loads(store.backend.get(f"{folder}/LATEST").data)


def test_history_is_rows_of_the_state_table_not_bucket_objects(table_store, sqlite_engine):
    a, b = pl.DataFrame({"a": [1]}), pl.DataFrame({"a": [2]})
    v1 = table_store.write_version(a, "thing", "p", run_id="run-1")
    assert table_store.write_version(a, "thing", "p", run_id="run-2").seq == v1.seq == 1  # one hash, one version
    v2 = table_store.write_version(b, "thing", "p")
    v3 = table_store.write_version(a, "thing", "p", run_id="run-3")  # back to a: a new version
    assert (v2.seq, v3.seq) == (2, 3)
    rows = _rows(sqlite_engine)
    assert [(r["seq"], r["hash"], r["run_id"], r["rows"]) for r in rows] == [
        (1, v1.content_hash, "run-1", 1),
        (2, v2.content_hash, None, 1),
        (3, v1.content_hash, "run-3", 1),
    ]
    assert {r["store"] for r in rows} == {table_store.url} and {r["partition"] for r in rows} == {"p"}
    assert table_store.versions("thing", "p") == [
        {k: r[k] for k in ("seq", "hash", "file", "size", "rows", "at", "run_id")} for r in rows
    ]
    assert not table_store.backend.list("thing/p/versions")  # the bucket holds no history objects
    assert _latest(table_store)["seq"] == 3 and table_store.read_latest("thing", "p")["a"].to_list() == [1]


def test_latest_never_moves_back_and_a_writer_dead_before_latest_is_repaired(table_store, sqlite_engine):
    table_store.write_version(pl.DataFrame({"a": [1]}), "thing", "p")
    new = pl.DataFrame({"a": [2]})

    data = parquet_bytes(new)
    digest = hashlib.sha256(data).hexdigest()
    entry = {"file": f"{digest[:20]}.parquet", "hash": digest, "size": len(data), "rows": 1}
    table_store.backend.put(f"thing/p/{entry['file']}", data, if_none_match=True)
    claim_version(sqlite_engine, table_store.url, "thing", "p", entry)  # seq 2 claimed, then the writer died
    assert _latest(table_store)["seq"] == 1
    assert table_store.write_version(new, "thing", "p").seq == 2  # the same content: no third version …
    assert _latest(table_store)["seq"] == 2  # … and LATEST is moved forward to it
    # a writer that claimed an older seq does not move LATEST back
    table_store._advance_latest("thing/p", {**entry, "seq": 1, "at": 0.0})
    assert _latest(table_store)["seq"] == 2 and table_store.read_latest("thing", "p")["a"].to_list() == [2]


def test_numbering_continues_from_a_bucket_written_before_the_table(tmp_path, sqlite_engine):
    backend = LocalBackend(tmp_path / "bucket")
    old = ObjectArtifactStore(backend)  # bucket history (versions/ objects)
    old.write_version(pl.DataFrame({"a": [1]}), "thing", "p")
    old.write_version(pl.DataFrame({"a": [2]}), "thing", "p")
    new = ObjectArtifactStore(backend, history_engine=sqlite_engine)
    assert new.write_version(pl.DataFrame({"a": [2]}), "thing", "p").seq == 2  # the current latest: no-op
    assert new.write_version(pl.DataFrame({"a": [3]}), "thing", "p").seq == 3
    assert [r["seq"] for r in _rows(sqlite_engine)] == [3]
    # a node without the table moves LATEST ahead of it: the table's writers go on above it
    assert old.write_version(pl.DataFrame({"a": [4]}), "thing", "p").seq == 4
    assert new.write_version(pl.DataFrame({"a": [5]}), "thing", "p").seq == 5
    assert new.read_latest("thing", "p")["a"].to_list() == [5]


def test_a_lost_latest_is_recovered_from_the_table(table_store):
    table_store.write_version(pl.DataFrame({"a": [1]}), "thing", None)
    table_store.write_version(pl.DataFrame({"a": [2]}), "thing", None)
    blob = table_store.backend.get("thing/__all__/LATEST")
    table_store.backend.put("thing/__all__/LATEST", b"garbage", if_match=blob.etag)
    with pytest.warns(UserWarning, match="LATEST is unreadable"):
        assert table_store.read_latest("thing")["a"].to_list() == [2]
    assert table_store.write_version(pl.DataFrame({"a": [3]}), "thing").seq == 3


def test_the_deployment_switch(monkeypatch, tmp_path, isolated_home):
    monkeypatch.setenv(ARTIFACTS_URL_ENV, (tmp_path / "bucket").as_uri())
    monkeypatch.delenv("QUANDARY_DAGSTER_PG_URL", raising=False)
    monkeypatch.delenv(STATE_URL_ENV, raising=False)
    assert artifact_store().history_engine is None  # bucket only: versions/ objects
    monkeypatch.setenv(STATE_URL_ENV, f"sqlite:///{tmp_path / 'state.sqlite'}")
    store = artifact_store()
    assert store.history_engine is state_engine()
    store.write_version(pl.DataFrame({"a": [1]}), "thing", "p")
    assert [v["seq"] for v in artifact_store().versions("thing", "p")] == [1]
    assert not (tmp_path / "bucket" / "thing" / "p" / "versions").exists()


def test_the_local_store_lists_versions_jsonl(isolated_home):
    store = artifact_store()
    store.write_version(pl.DataFrame({"a": [1]}), "thing", "p", run_id="ignored")
    store.write_version(pl.DataFrame({"a": [2]}), "thing", "p")
    assert [v["seq"] for v in store.versions("thing", "p")] == [1, 2]
    lines = (isolated_home / "artifacts" / "thing" / "p" / "versions.jsonl").read_text().splitlines()
    assert sorted(json.loads(lines[0])) == ["at", "file", "hash", "rows", "size"]  # the one-machine format


# -- PostgreSQL + S3 (real servers) ----------------------------------------------------------------


@pytest.fixture(scope="module")
def servers():
    with postgres_server() as pg, s3_server() as s3:
        yield pg, s3


_names = iter(range(10**6))


@pytest.fixture
def deployment(servers, monkeypatch):
    pg, s3 = servers
    name = f"h{next(_names)}x{os.getpid()}"
    env = {
        **s3.env(),
        "QUANDARY_DAGSTER_PG_URL": pg.create_database(name),
        ARTIFACTS_URL_ENV: s3.create_bucket(name) + "/arts",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv(STATE_URL_ENV, raising=False)
    return env


@pytest.mark.integration
def test_threads_on_postgres_claim_distinct_seqs(deployment):
    store = artifact_store()
    assert store.history_engine is not None and store.history_engine.dialect.name == "postgresql"
    n = 8

    def write(i):
        store.write_version(pl.DataFrame({"writer": [i]}), "race", "p", run_id=f"r{i}")
        store.write_version(pl.DataFrame({"same": [1]}), "same", "p")

    race_threads(n, write)
    versions = store.versions("race", "p")
    assert [v["seq"] for v in versions] == list(range(1, n + 1))
    assert sorted(v["run_id"] for v in versions) == sorted(f"r{i}" for i in range(n))
    assert json.loads(store.backend.get("race/p/LATEST").data)["seq"] == n  # LATEST ended at the newest
    assert store.read_latest("race", "p")["writer"].to_list() == [int(versions[-1]["run_id"][1:])]
    assert len(store.versions("same", "p")) == 1
    assert not store.backend.list("race/p/versions")


@pytest.mark.integration
def test_two_node_processes_on_postgres_lose_no_version(deployment, tmp_path):
    race_writer_processes(deployment, tmp_path)  # one bucket, one database
    store = artifact_store()
    assert [v["seq"] for v in store.versions("race", "p")] == list(range(1, 11))
    assert len(store.versions("same", "p")) == 1
    bucket_only = ObjectArtifactStore(S3Backend(deployment[ARTIFACTS_URL_ENV]))
    assert bucket_only.versions("race", "p") == []  # the history lives in PostgreSQL only
    assert bucket_only.read_latest("race", "p").equals(store.read_latest("race", "p"))


def test_the_cli_lists_versions_through_the_store(isolated_home, capsys, monkeypatch, tmp_path):
    store = artifact_store()
    v1 = store.write_version(pl.DataFrame({"a": [1]}), "thing", "p")
    store.write_version(pl.DataFrame({"a": [1, 2]}), "thing", "q")
    assert main(["audit", "versions", "thing", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("partition,seq,hash,rows") and len(lines) == 3
    assert lines[1].startswith(f"p,1,{v1.content_hash[:16]},1,")
    # distributed: the same command reads the shared-state table (with the run that wrote each version)
    monkeypatch.setenv(ARTIFACTS_URL_ENV, (tmp_path / "bucket").as_uri())
    monkeypatch.setenv(STATE_URL_ENV, f"sqlite:///{tmp_path / 'state.sqlite'}")
    artifact_store().write_version(pl.DataFrame({"a": [3]}), "thing", "p", run_id="run-42")
    assert main(["audit", "versions", "thing", "--partition", "p", "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[1].endswith(",run-42")
    assert main(["audit", "versions", "nothing"]) == 1
    assert "no versions of nothing" in capsys.readouterr().err
