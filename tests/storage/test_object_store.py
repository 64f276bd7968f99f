"""The storage backend interface and the object artifact store (issue 21 part 2), on a local folder
and on a real S3-compatible server (moto's, started here on loopback):

- content files are create-only: a second writer of the same hash verifies size + hash and succeeds;
  a damaged one is replaced;
- LATEST moves only by compare-and-swap: concurrent writers (threads and processes) lose no version;
- identical content written twice is one hash and one version;
- the audit catalog reads the bucket through DuckDB's registered fsspec filesystem and stays locked.
"""

import hashlib
import os
import subprocess
import sys
import textwrap
import threading

import polars as pl
import pytest

from storage.artifacts import DamagedArtifactError
from storage.audit import audit_query, list_views, open_audit
from storage.backends import ARTIFACTS_URL_ENV, LocalBackend, PreconditionFailed, S3Backend
from storage.stores import LocalArtifactStore, ObjectArtifactStore, artifact_store, put_verified
from tests.distributed.servers import s3_server
from tests.sql.hostile_sql import REPO_ROOT

pytestmark = pytest.mark.integration  # a real S3 server process


@pytest.fixture(scope="module")
def s3():
    with s3_server() as server:
        yield server


@pytest.fixture
def s3_env(s3, monkeypatch):
    for k, v in s3.env().items():
        monkeypatch.setenv(k, v)
    return s3


_buckets = iter(range(10**6))


@pytest.fixture(params=["local", "s3"])
def backend(request, tmp_path):
    if request.param == "local":
        return LocalBackend(tmp_path / "objects")
    s3 = request.getfixturevalue("s3_env")
    return S3Backend(s3.create_bucket(f"b{next(_buckets)}-{os.getpid()}") + "/prefix")


def test_create_only_and_compare_and_swap(backend):
    backend.put("a/x", b"one", if_none_match=True)
    with pytest.raises(PreconditionFailed):
        backend.put("a/x", b"two", if_none_match=True)
    blob = backend.get("a/x")
    assert blob.data == b"one"
    backend.put("a/x", b"three", if_match=blob.etag)
    with pytest.raises(PreconditionFailed):  # the etag read before is stale now
        backend.put("a/x", b"four", if_match=blob.etag)
    assert backend.get("a/x").data == b"three"
    assert backend.get("a/missing") is None
    assert backend.list("a") == ["a/x"]


def test_identical_content_is_one_hash_and_one_version(backend):
    store = ObjectArtifactStore(backend)
    df = pl.DataFrame({"a": [1, 2, 3]})
    v1 = store.write_version(df, "thing", "p")
    v2 = store.write_version(df, "thing", "p")
    assert v1.content_hash == v2.content_hash and v1.seq == v2.seq == 1
    assert [v["hash"] for v in store.versions("thing", "p")] == [v1.content_hash]
    assert store.read_latest("thing", "p").equals(df)
    other = store.write_version(pl.DataFrame({"a": [9]}), "thing", "p")
    assert other.seq == 2 and store.read_latest("thing", "p")["a"].to_list() == [9]
    assert [v["seq"] for v in store.versions("thing", "p")] == [1, 2]


def test_second_writer_of_a_hash_verifies_and_a_damaged_file_is_replaced(backend):
    store = ObjectArtifactStore(backend)
    df = pl.DataFrame({"a": list(range(50))})
    v = store.write_version(df, "thing", "p")
    key = f"thing/p/{v.content_hash[:20]}.parquet"
    # another writer already stored the same bytes: create-only fails, verification succeeds
    put_verified(backend, key, backend.get(key).data, v.content_hash)
    blob = backend.get(key)
    backend.put(key, blob.data[:40], if_match=blob.etag)  # damage it (truncated)
    with pytest.raises(DamagedArtifactError):
        store.read_latest("thing", "p")
    store.write_version(df, "thing", "p")  # rematerializing heals the file
    assert store.read_latest("thing", "p").equals(df)
    assert hashlib.sha256(backend.get(key).data).hexdigest() == v.content_hash


def test_a_lost_latest_is_recovered_from_the_history(backend):
    store = ObjectArtifactStore(backend)
    store.write_version(pl.DataFrame({"a": [1]}), "thing", None)
    store.write_version(pl.DataFrame({"a": [2]}), "thing", None)
    blob = backend.get("thing/__all__/LATEST")
    backend.put("thing/__all__/LATEST", b"garbage", if_match=blob.etag)
    with pytest.warns(UserWarning, match="LATEST is unreadable"):
        assert store.read_latest("thing")["a"].to_list() == [2]
    assert store.write_version(pl.DataFrame({"a": [3]}), "thing").seq == 3  # numbering goes on


def race_threads(n: int, write) -> None:
    """``write(i)`` in ``n`` threads released at once; fails the test with any error raised."""
    barrier = threading.Barrier(n)
    errors = []

    def run(i):
        try:
            barrier.wait(60)
            write(i)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors


def test_concurrent_writers_in_threads_lose_no_version(backend):
    store = ObjectArtifactStore(backend)
    n = 8
    race_threads(n, lambda i: store.write_version(pl.DataFrame({"writer": [i]}), "race", "p"))
    versions = store.versions("race", "p")
    assert [v["seq"] for v in versions] == list(range(1, n + 1))  # every update kept, in one order
    assert len({v["hash"] for v in versions}) == n
    latest = store.read_latest("race", "p")
    assert latest["writer"].to_list()[0] in range(n)


WRITER = """
import sys
import polars as pl
from storage.stores import artifact_store
i, n = int(sys.argv[1]), int(sys.argv[2])
print("ready", flush=True)
sys.stdin.readline()  # the parent releases every writer at once
store = artifact_store()
for k in range(n):
    store.write_version(pl.DataFrame({"writer": [i], "k": [k]}), "race", "p")
store.write_version(pl.DataFrame({"same": [1, 2, 3]}), "same", "p")
print("done", flush=True)
"""


def race_writer_processes(env: dict, tmp_path) -> None:
    """Two "nodes" (different homes, the store of ``env``) run :data:`WRITER` at once: 5 versions of
    race[p] each, then the same table same[p]."""
    procs = []
    for i in range(2):
        env_i = {**os.environ, **env, "QUANDARY_HOME": str(tmp_path / f"node{i}")}
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", textwrap.dedent(WRITER), str(i), "5"],
                cwd=REPO_ROOT,
                env=env_i,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        assert p.stdout.readline().strip() == "done"
        assert p.wait(120) == 0


def test_concurrent_writer_processes_on_the_bucket_lose_no_version(s3_env, tmp_path):
    url = s3_env.create_bucket("procs") + "/arts"
    race_writer_processes({ARTIFACTS_URL_ENV: url}, tmp_path)
    store = ObjectArtifactStore(S3Backend(url))
    assert [v["seq"] for v in store.versions("race", "p")] == list(range(1, 11))
    assert len(store.versions("same", "p")) == 1  # both wrote it: one hash, one version
    assert len([k for k in store.backend.list("same/p") if k.endswith(".parquet")]) == 1


def test_default_store_is_the_local_folder(monkeypatch, isolated_home):
    monkeypatch.delenv(ARTIFACTS_URL_ENV, raising=False)
    store = artifact_store()
    assert isinstance(store, LocalArtifactStore) and store.root == isolated_home / "artifacts"
    v = store.write_version(pl.DataFrame({"a": [1]}), "thing", "p")
    assert (isolated_home / "artifacts" / "thing" / "p" / "LATEST").read_text() == os.path.basename(v.path)


def test_audit_reads_the_bucket_and_stays_locked(s3_env, monkeypatch, tmp_path):
    url = s3_env.create_bucket("audit") + "/arts"
    monkeypatch.setenv(ARTIFACTS_URL_ENV, url)
    store = artifact_store()
    store.write_version(pl.DataFrame({"q": ["a", "b"]}), "dataset", "db1")
    store.write_version(pl.DataFrame({"q": ["c"]}), "dataset", "db2")
    from storage.artifacts import parquet_bytes  # lazy: after the setup above it (environment, monkeypatch or sys.path)

    # a readable Parquet object in the same bucket that is no artifact's latest version
    store.backend.put("secret/x/data.parquet", parquet_bytes(pl.DataFrame({"s": ["hidden"]})), if_none_match=True)
    outside = tmp_path / "outside.csv"
    outside.write_text("a\n1\n")
    con = open_audit()
    assert "dataset" in list_views(con)
    assert sorted(r[0] for r in audit_query(con, "SELECT q FROM dataset").fetchall()) == ["a", "b", "c"]
    import duckdb  # lazy: after the setup above it (environment, monkeypatch or sys.path)

    secret = store.backend.uri("secret/x/data.parquet")
    probe = duckdb.connect()
    store.register_duckdb(probe)  # the same read works on a connection without the lockdown
    assert probe.execute(f"SELECT s FROM read_parquet('{secret}')").fetchall() == [("hidden",)]
    for sql in (
        f"SELECT * FROM read_parquet('{store.backend.uri('secret/x/data.parquet')}')",
        f"SELECT * FROM read_csv('{outside}')",
    ):
        with pytest.raises(duckdb.Error):
            audit_query(con, sql).fetchall()
    with pytest.raises(duckdb.Error):
        con.execute("SET enable_external_access = true")
