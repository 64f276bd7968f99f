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

import pytest

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
    env = {**os.environ, **s3.env(),
           "QUANDARY_DAGSTER_PG_URL": pg.create_database(name),
           "QUANDARY_ARTIFACTS_URL": s3.create_bucket(name.replace("_", "-")) + "/artifacts",
           "DAGSTER_CLI_API_GRPC_STARTUP_TIMEOUT": "300"}
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
        _run(node, "-c", "import sys; from resources.catalog import Catalog; c = Catalog(); "
                         "[c.register(sys.argv[1], d) for d in ('uni', 'uni2', 'uni3')]", str(seed))
    return nodes


def _run(env, *args, timeout=600):
    done = subprocess.run([sys.executable, *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)
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
    import json

    return json.loads(_run(env, "-c", INSPECT, JOB).strip().splitlines()[-1])


def _status_of(b, monkeypatch, partition: str):
    """The run's status as this process reads it from the shared instance (node B's instance file)."""
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
    daemon = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "dagster-daemon"), "run",
                               "-w", str(REPO_ROOT / "workspace.yaml")], cwd=REPO_ROOT, env=b,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        wait_until(lambda: status() == "SUCCESS", 480, "the daemon on node B launched node A's queued run",
                   alive=lambda: daemon.poll() is None, interval_s=3)
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
        probe = subprocess.run([*prefix, "--", "sh", "-c", "hostname quandary-probe && hostname"],
                               capture_output=True, text=True, timeout=60)
        if probe.returncode == 0 and probe.stdout.strip() == "quandary-probe":
            return prefix
    warnings.warn("cannot give the test nodes their own host names (unshare --uts refused): they share this "
                  "machine's, which the PostgreSQL call log does not use anyway")
    return []


def _on_host(host: str, *argv) -> list[str]:
    prefix = _host_renaming()
    return [*prefix, "--", "sh", "-c", 'hostname "$0" && exec "$@"', host, *argv] if prefix else list(argv)


def _node(env, host: str, *args) -> subprocess.Popen:
    """`quandary ARGS` on node ``env`` under host name ``host`` (its own process group)."""
    return subprocess.Popen(_on_host(host, QUANDARY, *map(str, args)), cwd=REPO_ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _finish(proc, what: str, timeout=600) -> str:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, f"{what}: {out[-2500:]}\n{err[-2500:]}"
    return out


def _set_pool_limit(env, monkeypatch, pool: str, limit: int) -> None:
    from dagster import DagsterInstance

    monkeypatch.setenv("QUANDARY_DAGSTER_PG_URL", env["QUANDARY_DAGSTER_PG_URL"])
    with DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        instance.event_log_storage.set_concurrency_slots(pool, limit)


def _runs(env, monkeypatch, partition: str) -> list[str]:
    from dagster import DagsterInstance, RunsFilter

    monkeypatch.setenv("QUANDARY_DAGSTER_PG_URL", env["QUANDARY_DAGSTER_PG_URL"])
    with DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        runs = instance.get_runs(RunsFilter(job_name="abiss_dataset_job", tags={"dagster/partition": partition}))
        return sorted(r.status.name for r in runs)


def test_two_nodes_send_each_llm_request_once_within_the_pool(deployment, tmp_path, monkeypatch):
    from assets.shared.pools import llm_pool
    from storage.llm_log_pg import PostgresCallLog

    a, b = deployment
    grid = tmp_path / "grid.yaml"
    grid.write_text(SMALL_GRID)
    with GatedStub(latency_s=0.3) as stub:
        council = council_file(tmp_path / "council.json", stub.url)
        llm = {"QUANDARY_COUNCIL_CONFIG": str(council), "QUANDARY_KEY_STUB": "none", "QUANDARY_CALL_LEASE_S": LEASE_S}
        a, b = {**a, **llm}, {**b, **llm}
        monkeypatch.setenv("QUANDARY_COUNCIL_CONFIG", str(council))
        _set_pool_limit(a, monkeypatch, llm_pool(), POOL_LIMIT)

        # two nodes at once, one partition each (same schema: some requests are the same)
        node_a = _node(a, "node-a", "run", "--db", "uni", "--grid", grid)
        node_b = _node(b, "node-b", "run", "--db", "uni2", "--grid", grid)
        _finish(node_a, "node A's run of uni")
        _finish(node_b, "node B's run of uni2")
        sent = list(stub.requests)
        assert len(sent) == len(set(sent)) > 0  # every distinct request once across the nodes
        assert stub.peak <= POOL_LIMIT  # the pool bounds the endpoint's load across nodes
        log = PostgresCallLog(a["QUANDARY_DAGSTER_PG_URL"])
        assert log.count("status = 'ok'") == len(set(sent))  # both nodes' calls in one log

        # kill -9 of node A's run while a call is in flight; `quandary rerun` there finishes it
        stub.answer_first = len(stub.answered) + 3
        victim = _node(a, "node-a", "run", "--db", "uni3", "--grid", grid)
        try:
            assert stub.held.wait(600), "the run never reached its held LLM call"
        finally:
            os.killpg(victim.pid, signal.SIGKILL)
            victim.communicate(timeout=60)
        held = set(stub.requests) - set(stub.answered)
        assert held and _claims(log) >= 1  # the dead run's claim stays until its lease lapses
        stub.release()
        answered_before = len(stub.answered)
        _finish(_node(a, "node-a", "rerun", "--db", "uni3"), "node A's rerun of uni3")
        assert _runs(a, monkeypatch, "uni3") == ["FAILURE", "SUCCESS"]
        print("llm counts:", json.dumps({
            "phase1_requests_at_stub": len(sent), "phase1_distinct": len(set(sent)),
            "requests_at_stub": len(stub.requests), "distinct": len(set(stub.requests)),
            "held_at_kill": len(held), "answered": len(stub.answered), "peak_in_flight": stub.peak,
            "repeated_completed_calls": len(stub.answered) - len(set(stub.answered))}))
    assert len(stub.answered) == len(set(stub.answered))  # no completed call was ever asked again
    assert set(stub.answered[answered_before:]) >= held  # the killed run's unanswered calls were sent again
    assert stub.peak <= POOL_LIMIT
    assert _claims(log) == 0 and log.count() == len(set(stub.answered))


def _claims(log) -> int:
    """Claims (in-flight rows) in the shared call log."""
    return log._fetch(f"SELECT count(*) AS n FROM {log.table} WHERE status = 'in_flight'", {})[0]["n"]
