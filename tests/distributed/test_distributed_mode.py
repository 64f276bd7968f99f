"""Distributed mode end to end on this machine (issue 21 proof): a PostgreSQL server and an S3
server started here, the Dagster instance made from deploy/distributed/dagster.yaml, and two
"nodes" — processes with their own QUANDARY_HOME and DAGSTER_HOME folder — sharing them.

Asserts: the instance file loads as PostgreSQL storage + run queue + pools; runs on both nodes
succeed and both see every run; each node sees the other's artifacts through the bucket (the audit
catalog included); identical content written by both nodes is one hash and one version; a run put
on the queue by `quandary submit` on node A is launched by the daemon on node B and succeeds.

And the LLM side (issue 21 items 3-4): two nodes with their own host names run ABISS partitions at
once against one loopback OpenAI stub, through the call log in PostgreSQL and one Dagster pool for
the stub's endpoint: every distinct request reaches the stub once across the nodes, the stub never
has more requests in flight than the pool's limit, and a run killed with `kill -9` is finished by
`quandary rerun` without repeating a completed call.
"""

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import warnings
from collections import Counter

import pytest

from storage.llm_log_pg import PostgresCallLog
from tests.cli.conftest import QUANDARY, SMALL_GRID, GatedStub, council_file
from tests.distributed.servers import postgres_server, require_pg_bindir, s3_server
from tests.sql.hostile_sql import REPO_ROOT
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

TEMPLATE = REPO_ROOT / "deploy" / "distributed" / "dagster.yaml"
JOB = "seed_databases_job"
CLI = "import sys; from cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.fixture(scope="module")
def servers():
    require_pg_bindir()  # skips with the reason when PostgreSQL's server binaries are absent
    with postgres_server() as pg, s3_server() as s3:
        yield pg, s3


@pytest.fixture
def deployment(servers, tmp_path, demo_db_path):
    pg, s3 = servers
    name = f"q{os.getpid()}_{tmp_path.name}".lower().replace("-", "_")[:60]
    env = {
        **os.environ,
        **s3.env(),
        "QUANDARY_DAGSTER_PG_URL": pg.create_database(name),
        "QUANDARY_ARTIFACTS_URL": s3.create_bucket(name.replace("_", "-")) + "/artifacts",
        "DAGSTER_CLI_API_GRPC_STARTUP_TIMEOUT": "300",
    }
    seed = tmp_path / "shared" / "university.sqlite"  # one path on both nodes (seed shipping is not built)
    seed.parent.mkdir()
    shutil.copyfile(demo_db_path, seed)
    nodes = []
    for i in range(2):
        home, dagster_home = tmp_path / f"node{i}" / "quandary", tmp_path / f"node{i}" / "dagster_home"
        dagster_home.mkdir(parents=True)
        shutil.copyfile(TEMPLATE, dagster_home / "dagster.yaml")
        nodes.append({**env, "QUANDARY_HOME": str(home), "DAGSTER_HOME": str(dagster_home)})
    # create the instance's tables once, as a deployment does (`dagster instance migrate`), before the nodes
    _run(nodes[0], "-c", "from dagster import DagsterInstance; DagsterInstance.get().dispose()")
    for node in nodes:  # one process per node (each start imports Dagster: seconds on a loaded machine)
        _run(
            node,
            "-c",
            "import sys; from resources.catalog import Catalog; c = Catalog(); "
            "[c.register(sys.argv[1], d) for d in ('uni', 'uni2', 'uni3')]",
            str(seed),
        )
    return nodes


def _run(env, *args, timeout=600):
    done = subprocess.run(
        [sys.executable, *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{args}: {done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _cli(env, *args, timeout=600):
    return _run(env, "-c", CLI, *args, timeout=timeout)


INSPECT = """
import json, sys
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter
from storage.stores import artifact_store
from storage.audit import open_audit
instance = DagsterInstance.get()
store = artifact_store()
runs = [{"id": r.run_id, "status": r.status.name, "partition": r.tags.get("dagster/partition")}
        for r in instance.get_runs(RunsFilter(job_name=sys.argv[1]))]
con = open_audit()
rows = con.execute("SELECT db_id FROM seed_databases ORDER BY 1").fetchall()
print(json.dumps({
    "storage": type(instance.run_storage).__name__,
    "coordinator": type(instance.run_coordinator).__name__,
    "pool_default": instance.event_log_storage.get_pool_config().default_pool_limit,
    "runs": runs,
    "audit_db_ids": [r[0] for r in rows],
    "versions": {p: [v["hash"] for v in store.versions("seed_databases", p)] for p in ("uni", "uni2", "uni3")},
    "store": store.url,
}))
"""


def _inspect(env) -> dict:
    return json.loads(_run(env, "-c", INSPECT, JOB).strip().splitlines()[-1])


def _status_of(b, monkeypatch, partition: str):
    """The run's status as this process reads it from the shared instance (node B's instance file)."""
    # lazy: dagster is slow to import (~1 s); only the tests that need it pay
    from dagster import DagsterInstance, RunsFilter

    monkeypatch.setenv("QUANDARY_DAGSTER_PG_URL", b["QUANDARY_DAGSTER_PG_URL"])
    instance = DagsterInstance.from_config(b["DAGSTER_HOME"])

    def status():
        runs = instance.get_runs(RunsFilter(job_name=JOB, tags={"dagster/partition": partition}))
        assert len(runs) == 1
        assert runs[0].status.name not in ("FAILURE", "CANCELED"), runs[0].status
        return runs[0].status.name

    return instance, status


def test_two_nodes_share_runs_and_artifacts_and_the_queue(deployment, monkeypatch):
    a, b = deployment
    # in-process runs on both nodes; both compute identical content for "uni"
    _cli(a, "run", "--db", "uni", "--job", JOB)
    _cli(b, "run", "--db", "uni", "--job", JOB)
    _cli(b, "run", "--db", "uni2", "--job", JOB)

    seen_a, seen_b = _inspect(a), _inspect(b)
    assert seen_a["storage"] == "PostgresRunStorage" and seen_a["coordinator"] == "QueuedRunCoordinator"
    assert seen_a["pool_default"] == 4
    assert seen_a["store"].startswith("s3://")
    assert sorted(r["status"] for r in seen_a["runs"]) == ["SUCCESS"] * 3
    assert {r["id"] for r in seen_a["runs"]} == {r["id"] for r in seen_b["runs"]}  # one run history
    # node A sees B's artifact (uni2) through the bucket, in the audit catalog too
    assert seen_a["audit_db_ids"] == ["uni", "uni2"] == seen_b["audit_db_ids"]
    # identical content from both nodes: one hash, one version
    assert len(seen_a["versions"]["uni"]) == 1

    # the queue: submitted on A, launched by the daemon on B
    out = _cli(a, "submit", "--job", JOB, "--db", "uni3")
    assert "queued" in out
    instance, status = _status_of(b, monkeypatch, "uni3")
    assert status() in ("QUEUED", "NOT_STARTED")  # nothing launches it until a daemon runs
    daemon = subprocess.Popen(
        [
            os.path.join(os.path.dirname(sys.executable), "dagster-daemon"),
            "run",
            "-w",
            str(REPO_ROOT / "workspace.yaml"),
        ],
        cwd=REPO_ROOT,
        env=b,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        wait_until(
            lambda: status() == "SUCCESS",
            480,
            "the daemon on node B launched node A's queued run",
            alive=lambda: daemon.poll() is None,
            interval_s=3,
        )
    finally:
        instance.dispose()
        os.killpg(daemon.pid, signal.SIGTERM)
        try:
            daemon.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(daemon.pid, signal.SIGKILL)
            daemon.wait(30)
    final = _inspect(a)
    assert len(final["versions"]["uni3"]) == 1
    assert final["audit_db_ids"] == ["uni", "uni2", "uni3"]


# --- the LLM side: one call log, one bound per endpoint, across nodes ----------------------------

POOL_LIMIT = 1  # LLM steps at once on the stub's endpoint; members have max_in_flight 1 (council_file)
LEASE_S = "6"  # a dead owner's claim lapses this fast here (default 30 s)


@functools.cache
def _host_renaming() -> list[str]:
    """A command prefix that runs a program under its own host name (a UTS namespace), or []."""
    unshare = shutil.which("unshare")
    for prefix in ([unshare, "--uts"], [unshare, "--user", "--map-root-user", "--uts"]) if unshare else ():
        probe = subprocess.run(
            [*prefix, "--", "sh", "-c", "hostname quandary-probe && hostname"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if probe.returncode == 0 and probe.stdout.strip() == "quandary-probe":
            return prefix
    warnings.warn(
        "cannot give the test nodes their own host names (unshare --uts refused): they share this "
        "machine's, which the PostgreSQL call log does not use anyway",
        stacklevel=2,
    )
    return []


def _on_host(host: str, *argv) -> list[str]:
    prefix = _host_renaming()
    return [*prefix, "--", "sh", "-c", 'hostname "$0" && exec "$@"', host, *argv] if prefix else list(argv)


def _node(env, host: str, *args) -> subprocess.Popen:
    """`quandary ARGS` on node ``env`` under host name ``host`` (its own process group); its output
    goes to a file beside the node's folders (read by :func:`_finish`, kept for a failed test)."""
    log = open(os.path.join(os.path.dirname(env["QUANDARY_HOME"]), f"{host}-{args[0]}-{args[2]}.log"), "w+")
    proc = subprocess.Popen(
        _on_host(host, QUANDARY, *map(str, args)),
        cwd=REPO_ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    proc.output = log
    return proc


def _finish(proc, what: str, timeout=420) -> None:
    """Wait for a node's command; fail with the end of its output unless it succeeded."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    if proc.returncode != 0:
        proc.output.seek(0)
        ended = "hung" if proc.returncode is None else f"exited {proc.returncode}"
        pytest.fail(f"{what} ({proc.output.name}) {ended}: {proc.output.read()[-4000:]}")


def _set_pool_limit(env, monkeypatch, pool: str, limit: int) -> None:
    from dagster import DagsterInstance  # lazy: dagster is slow to import (~1 s); only the tests that need it pay

    monkeypatch.setenv("QUANDARY_DAGSTER_PG_URL", env["QUANDARY_DAGSTER_PG_URL"])
    with DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        instance.event_log_storage.set_concurrency_slots(pool, limit)


def _runs(env, monkeypatch, partition: str) -> list[str]:
    # lazy: dagster is slow to import (~1 s); only the tests that need it pay
    from dagster import DagsterInstance, RunsFilter

    monkeypatch.setenv("QUANDARY_DAGSTER_PG_URL", env["QUANDARY_DAGSTER_PG_URL"])
    with DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        runs = instance.get_runs(RunsFilter(job_name="abiss_dataset_job", tags={"dagster/partition": partition}))
        return sorted(r.status.name for r in runs)


def _claim_owners(log) -> set[tuple[str, int]]:
    """(host name, pid) of the owners of claims (in-flight rows) in the shared call log."""
    rows = log._fetch(f"SELECT owner FROM {log.table} WHERE status = 'in_flight'", {})
    return {(host, int(pid)) for host, pid, _ in (r["owner"].rsplit(":", 2) for r in rows)}


@pytest.mark.timeout(1200)  # 2-4 min here: three ABISS runs over PostgreSQL and S3 on 2 busy cores
def test_two_nodes_send_each_llm_request_once_within_the_pool(deployment, tmp_path, monkeypatch):
    """Node A runs `uni`, node B `uni2`, at once. The stub holds the 7th request; the node sending
    it (the owner of the call's claim) is killed with `kill -9` and resumed by `quandary rerun`,
    while the other node goes on. Pool limit 1 and members with max_in_flight 1: at most one
    request in flight at the stub."""

    from assets.shared.pools import llm_pool  # lazy: imports dagster (~1 s); only the tests that need it pay

    a, b = deployment
    grid = tmp_path / "grid.yaml"
    grid.write_text(SMALL_GRID)
    with GatedStub(answer_first=6, latency_s=0.1) as stub:
        council = council_file(tmp_path / "council.json", stub.url)
        llm = {"QUANDARY_COUNCIL_CONFIG": str(council), "QUANDARY_KEY_STUB": "none", "QUANDARY_CALL_LEASE_S": LEASE_S}
        nodes = {"node-a": ({**a, **llm}, "uni"), "node-b": ({**b, **llm}, "uni2")}
        monkeypatch.setenv("QUANDARY_COUNCIL_CONFIG", str(council))
        _set_pool_limit(a, monkeypatch, llm_pool(), POOL_LIMIT)
        log = PostgresCallLog(a["QUANDARY_DAGSTER_PG_URL"])

        runs = {host: _node(env, host, "run", "--db", db, "--grid", grid) for host, (env, db) in nodes.items()}
        started = list(runs.values())
        try:
            wait_until(
                stub.held.is_set,
                420,
                "a node's 7th LLM request at the stub",
                alive=lambda: all(p.poll() is None for p in runs.values()),
                interval_s=1,
            )
            [(host, pid)] = _claim_owners(log)  # the node whose run sends the held request
            [victim] = [h for h, p in runs.items() if p.pid == pid]
            assert host == victim or not _host_renaming()
            os.killpg(pid, signal.SIGKILL)
            runs[victim].wait(60)
            held = set(stub.requests) - set(stub.answered)
            assert len(held) == 1 and _claim_owners(log) == {(host, pid)}  # its claim outlives it (lease)
            stub.release()
            (other,) = set(nodes) - {victim}
            env, db = nodes[victim]
            # the other node waits for the pool slot the dead step holds; the rerun frees it and resumes
            started.append(rerun := _node(env, victim, "rerun", "--db", db))
            _finish(rerun, f"{victim}'s rerun of {db}")
            _finish(runs[other], f"{other}'s run of {nodes[other][1]}")
        finally:
            for p in started:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait(60)
                p.output.close()
        assert _runs(env, monkeypatch, db) == ["FAILURE", "SUCCESS"]
        assert _runs(env, monkeypatch, nodes[other][1]) == ["SUCCESS"]

    sent = Counter(stub.requests)
    print(
        "llm counts:",
        json.dumps(
            {
                "requests_at_stub": len(stub.requests),
                "distinct_requests": len(sent),
                "sent_twice": len(held),
                "answered": len(stub.answered),
                "peak_in_flight": stub.peak,
                "pool_limit": POOL_LIMIT,
                "repeated_completed_calls": len(stub.answered) - len(set(stub.answered)),
                "victim": victim,
            }
        ),
    )
    # every distinct request reached the stub once across the nodes, but the one the dead run never got
    assert {k for k, n in sent.items() if n > 1} == held and max(sent.values()) == 2
    assert len(stub.answered) == len(set(stub.answered)) == len(sent)  # no completed call asked again
    assert stub.peak <= POOL_LIMIT  # the pool bounds the endpoint's load across nodes
    assert not _claim_owners(log) and log.count() == len(sent)  # both nodes' calls in one log, no claim left
