"""Concurrent writers of a growing keyed table never drop stored rows (issue 34 item 1).

Two `ambitab eval` runs of one corpus both read the stored episodes, worked, and wrote
``stored + their rows`` back: the last writer won and the first run's rows were gone. Now a growing
table is written as :class:`storage.artifacts.KeyedRows` and merged at write time, under the
partition's lock (local folder) or by compare-and-swap on LATEST with a retried merge (object store,
with its history in the bucket or in the shared-state database). Here N writer *processes*, released
at once, each upsert their own rows several times into one partition, and every row is counted.
"""

import os
import subprocess
import sys
import textwrap

import polars as pl
import pytest

from storage.artifacts import KeyedRows, upsert_version
from storage.backends import ARTIFACTS_URL_ENV, LocalBackend, S3Backend
from storage.state_db import STATE_URL_ENV
from storage.stores import LocalArtifactStore, ObjectArtifactStore, artifact_store
from tests.distributed.servers import postgres_server, require_pg_bindir, s3_server
from tests.sql.hostile_sql import REPO_ROOT

WRITERS, ROUNDS, ROWS = 4, 3, 5

WRITER = """
import sys
import polars as pl
from storage.artifacts import KeyedRows
from storage.stores import artifact_store
i, rounds, rows = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
print("ready", flush=True)
sys.stdin.readline()  # the parent releases every writer at once
store = artifact_store()
for r in range(rounds):
    new = pl.DataFrame({"writer": [i] * rows, "n": [r * rows + j for j in range(rows)], "v": [f"{i}-{r}"] * rows})
    store.upsert(KeyedRows(new, ("writer", "n")), "episodes", "corpus")
# one shared key every writer replaces: exactly one row of it survives
store.upsert(KeyedRows(pl.DataFrame({"writer": [-1], "n": [0], "v": [str(i)]}), ("writer", "n")), "episodes", "corpus")
print("done", flush=True)
"""


def race(env: dict, tmp_path) -> None:
    procs = []
    for i in range(WRITERS):
        env_i = {**os.environ, **env, "QUANDARY_HOME": str(env.get("QUANDARY_HOME") or tmp_path / f"node{i}")}
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", textwrap.dedent(WRITER), str(i), str(ROUNDS), str(ROWS)],
                cwd=REPO_ROOT,
                env=env_i,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        for p in procs:
            assert p.stdout.readline().strip() == "done"
            assert p.wait(300) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


def assert_every_row_kept(df: pl.DataFrame) -> None:
    expected = {(i, n) for i in range(WRITERS) for n in range(ROUNDS * ROWS)} | {(-1, 0)}
    got = list(zip(df["writer"].to_list(), df["n"].to_list()))
    assert len(got) == len(set(got)), "a key is stored twice"
    assert set(got) == expected, f"lost rows: {sorted(expected - set(got))[:5]}"
    assert df.height == WRITERS * ROUNDS * ROWS + 1


def test_writer_processes_on_the_local_folder_keep_every_row(tmp_path):
    home = tmp_path / "home"
    env = {"QUANDARY_HOME": str(home)}
    for var in (ARTIFACTS_URL_ENV, STATE_URL_ENV, "QUANDARY_DAGSTER_PG_URL"):
        env[var] = ""
    race(env, tmp_path)
    assert_every_row_kept(LocalArtifactStore(home / "artifacts").read_latest("episodes", "corpus"))


def test_writer_processes_on_a_file_object_store_keep_every_row(tmp_path):
    url = (tmp_path / "objects").as_uri()
    race({ARTIFACTS_URL_ENV: url, STATE_URL_ENV: "", "QUANDARY_DAGSTER_PG_URL": ""}, tmp_path)
    store = ObjectArtifactStore(LocalBackend(tmp_path / "objects"))
    assert_every_row_kept(store.read_latest("episodes", "corpus"))
    seqs = [v["seq"] for v in store.versions("episodes", "corpus")]
    assert seqs == list(range(1, len(seqs) + 1))  # one version per successful merge, none lost


def test_writer_processes_with_the_history_in_a_database_keep_every_row(tmp_path):
    url = (tmp_path / "objects").as_uri()
    state = f"sqlite:///{tmp_path / 'state.sqlite'}"
    from storage.state_db import state_engine
    from storage.state_tables import ensure_tables
    from storage.versions_db import VERSIONS

    ensure_tables(state_engine(state), VERSIONS)  # as a deployment migrates once, before its nodes
    race({ARTIFACTS_URL_ENV: url, STATE_URL_ENV: state}, tmp_path)

    store = ObjectArtifactStore(LocalBackend(tmp_path / "objects"), history_engine=state_engine(state))
    assert_every_row_kept(store.read_latest("episodes", "corpus"))


@pytest.mark.integration  # real S3 and PostgreSQL server processes
def test_writer_processes_on_a_bucket_keep_every_row(tmp_path):
    with s3_server() as s3:
        url = s3.create_bucket("upserts") + "/arts"
        race({**s3.env(), ARTIFACTS_URL_ENV: url, STATE_URL_ENV: "", "QUANDARY_DAGSTER_PG_URL": ""}, tmp_path)
        env = s3.env()
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            assert_every_row_kept(ObjectArtifactStore(S3Backend(url)).read_latest("episodes", "corpus"))
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


@pytest.mark.integration
def test_writer_processes_on_a_bucket_with_postgres_history_keep_every_row(tmp_path):
    require_pg_bindir()
    with postgres_server() as pg, s3_server() as s3:
        url = s3.create_bucket("pgupserts") + "/arts"
        state = pg.create_database("upserts")
        race({**s3.env(), ARTIFACTS_URL_ENV: url, STATE_URL_ENV: state}, tmp_path)
        from storage.state_db import state_engine, state_url

        os.environ.update(s3.env())
        os.environ[STATE_URL_ENV] = state
        try:
            store = ObjectArtifactStore(S3Backend(url), history_engine=state_engine(state_url()))
            assert_every_row_kept(store.read_latest("episodes", "corpus"))
        finally:
            os.environ.pop(STATE_URL_ENV, None)


def test_a_stale_merge_never_drops_rows_stored_meanwhile(tmp_path):
    """The lost-update itself, in one process: a writer whose snapshot predates another's write."""
    root = tmp_path / "arts"
    key = ("k",)
    upsert_version(KeyedRows(pl.DataFrame({"k": [1], "v": ["a"]}), key), "t", "p", root)
    upsert_version(KeyedRows(pl.DataFrame({"k": [2], "v": ["b"]}), key), "t", "p", root)  # the "other run"
    _, merged = upsert_version(KeyedRows(pl.DataFrame({"k": [3], "v": ["c"]}), key), "t", "p", root)
    assert sorted(merged.frame["k"].to_list()) == [1, 2, 3] and merged.added == 1 and merged.kept == 2
    # a table stored before a key column existed: its rows are filled, kept, never a KeyError
    legacy = KeyedRows(pl.DataFrame({"k": [4], "model": ["m"], "v": ["d"]}), ("k", "model"), (("model", "old"),))
    _, merged = upsert_version(legacy, "t", "p", root)
    assert merged.frame.height == 4 and set(merged.frame["model"].to_list()) == {"old", "m"}


def test_the_default_store_upserts(isolated_home, monkeypatch):
    monkeypatch.delenv(ARTIFACTS_URL_ENV, raising=False)
    store = artifact_store()
    store.upsert(KeyedRows(pl.DataFrame({"k": [1]}), ("k",)), "t")
    version, merged = store.upsert(KeyedRows(pl.DataFrame({"k": [2]}), ("k",)), "t")
    assert version.row_count == 2 and merged.kept == 1
