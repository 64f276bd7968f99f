"""Orphans and pool slots across machines (issue 21 item 7).

A run's worker writes a heartbeat to the shared-state database while the run executes; a run whose
heartbeat stopped has lost its worker, wherever it ran. Dagster's run monitoring learns it from the
instance's run launcher (``HeartbeatRunLauncher``: the default launcher has no health check) and
fails the run; ``free_slots_after_run_end_seconds`` then frees the pool slots its killed step held;
``quandary rerun`` judges runs of other hosts by the same heartbeat and resumes them.

Unit tests use a SQLite state database and a local Dagster instance; the integration test uses the
real PostgreSQL of tests/distributed/servers.py, a Dagster daemon and two `quandary run` processes
on one pool of one slot, one of them killed with SIGKILL while its step holds the slot.
"""

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import uuid

import pytest
from sqlalchemy import update

from cli.runs import HOST_TAG, PID_TAG, fail_orphaned_runs, get_instance
from storage import heartbeats as hb
from storage.state_db import STATE_URL_ENV
from tests.cli.conftest import QUANDARY, SMALL_GRID, GatedStub, council_file
from tests.distributed.servers import postgres_server, require_pg_bindir
from tests.distributed.test_distributed_mode import TEMPLATE
from tests.sql.hostile_sql import REPO_ROOT
from tests.waiting import wait_until


@pytest.fixture
def state(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'state.sqlite'}"
    monkeypatch.setenv(STATE_URL_ENV, url)
    monkeypatch.delenv("QUANDARY_DAGSTER_PG_URL", raising=False)
    from storage.state_db import state_engine  # lazy: after the setup above it (environment, monkeypatch or sys.path)

    return state_engine()


def _age(engine, run_id: str, seconds: float) -> None:
    """Make the run's last heartbeat ``seconds`` old (as if its worker stopped then)."""
    with engine.begin() as con:
        con.execute(
            update(hb.HEARTBEATS)
            .where(hb.HEARTBEATS.c.run_id == run_id)
            .values(beat_at=hb.HEARTBEATS.c.beat_at - seconds)
        )


BEATER = """
import sys
from sqlalchemy import create_engine
from storage.heartbeats import Heartbeat
Heartbeat(create_engine(sys.argv[1]), sys.argv[2]).start()
print("beating", flush=True)
sys.stdin.read()  # until killed
"""


def test_a_killed_worker_is_dead_by_its_heartbeat_a_stopped_one_has_none(state, tmp_path, monkeypatch):
    env = {**os.environ, hb.HEARTBEAT_ENV: "0.2"}
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(BEATER), str(state.url), "run-a"],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "beating"
        beat = hb.liveness(state, "run-a", timeout=60)
        assert beat.alive is True and beat.pid == proc.pid
        proc.kill()
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    # no heartbeat arrives any more: dead once the timeout passes
    wait_until(
        lambda: hb.liveness(state, "run-a", timeout=1.0).alive is False, 60, "the killed worker's heartbeat aged"
    )
    assert "pid" in hb.liveness(state, "run-a", timeout=1.0).describe()
    # a worker that stopped normally removed its heartbeat: nothing to judge by
    monkeypatch.setenv(hb.HEARTBEAT_ENV, "30")
    beater = hb.Heartbeat(state, "run-b").start()
    assert hb.liveness(state, "run-b").alive is True
    beater.stop()
    assert hb.liveness(state, "run-b").alive is None


def _started_run(instance, tags):
    # lazy: dagster is slow to import (~1 s); only the tests that need it pay
    from dagster._core.storage.dagster_run import DagsterRun, DagsterRunStatus

    run = DagsterRun(
        job_name="abiss_dataset_job",
        run_id=str(uuid.uuid4()),
        status=DagsterRunStatus.STARTED,
        tags={"dagster/partition": "uni", **tags},
    )
    return instance.add_run(run)


def test_rerun_fails_a_run_of_another_host_by_its_heartbeat_and_frees_its_slot(state, isolated_home):
    instance = get_instance()
    elsewhere = {HOST_TAG: "another-node", PID_TAG: "4242"}
    dead, alive, unknown = (_started_run(instance, elsewhere) for _ in range(3))
    for run in (dead, alive):
        hb.beat(state, run.run_id, host="another-node", pid=4242)
    _age(state, dead.run_id, 3600)
    storage = instance.event_log_storage
    assert storage.supports_global_concurrency_limits
    storage.set_concurrency_slots("llm-test", 2)
    storage.claim_concurrency_slot("llm-test", dead.run_id, "nlq_objects")
    storage.claim_concurrency_slot("llm-test", alive.run_id, "nlq_objects")

    assert fail_orphaned_runs(instance, "abiss_dataset_job", "uni") == [dead.run_id]
    statuses = {r.run_id: r.status.name for r in instance.get_runs()}
    assert statuses == {dead.run_id: "FAILURE", alive.run_id: "STARTED", unknown.run_id: "STARTED"}
    assert {s.run_id for s in storage.get_concurrency_info("llm-test").claimed_slots} == {alive.run_id}
    message = [e for e in instance.all_logs(dead.run_id) if e.is_dagster_event and e.dagster_event.is_run_failure]
    assert "another-node" in message[0].message and "heartbeat" in message[0].message


def test_the_launchers_health_check_reads_the_heartbeat(state, monkeypatch, isolated_home):
    # lazy: dagster is slow to import (~1 s); only the tests that need it pay
    from dagster._core.launcher import WorkerStatus

    # lazy: imports dagster (~1 s); only the tests that need it pay
    from assets.shared.run_launcher import HeartbeatRunLauncher

    instance = get_instance()
    launcher = HeartbeatRunLauncher()
    run = _started_run(instance, {})
    assert launcher.supports_check_run_worker_health
    assert launcher.check_run_worker_health(run).status == WorkerStatus.RUNNING  # no heartbeat yet
    hb.beat(state, run.run_id)
    assert launcher.check_run_worker_health(run).status == WorkerStatus.RUNNING
    _age(state, run.run_id, 3600)
    result = launcher.check_run_worker_health(run)
    assert result.status == WorkerStatus.FAILED and "no heartbeat" in result.msg
    monkeypatch.delenv(STATE_URL_ENV)
    assert not launcher.supports_check_run_worker_health  # one machine: run monitoring stays as Dagster's


# -- the whole story on PostgreSQL, with the daemon ---------------------------------------------------

POOL = "llm-recovery"
INSTANCE_OVERRIDES = {  # the distributed template with a one-slot pool and short intervals
    "default_limit: 4": "default_limit: 1",
    "poll_interval_seconds: 30": "poll_interval_seconds: 1",
    "free_slots_after_run_end_seconds: 30": "free_slots_after_run_end_seconds: 1",
}


def _instance_file(dagster_home):
    text = TEMPLATE.read_text()
    for old, new in INSTANCE_OVERRIDES.items():
        assert old in text, old
        text = text.replace(old, new)
    dagster_home.mkdir(parents=True)
    (dagster_home / "dagster.yaml").write_text(text)


def _pool_info(instance):
    info = instance.event_log_storage.get_concurrency_info(POOL)
    return {s.run_id for s in info.claimed_slots}, info.pending_run_ids


@pytest.mark.integration
def test_a_killed_run_is_failed_its_slot_freed_and_rerun_resumes_it(tmp_path, demo_db_path, monkeypatch):
    # lazy: dagster is slow to import (~1 s); only the tests that need it pay
    from dagster import DagsterInstance, RunsFilter

    require_pg_bindir()
    with postgres_server() as pg, GatedStub(answer_first=0) as stub:
        url = pg.create_database("recovery")
        seed = tmp_path / "shared" / "university.sqlite"
        seed.parent.mkdir()
        shutil.copyfile(demo_db_path, seed)
        (tmp_path / "grid.yaml").write_text(SMALL_GRID)
        base = {
            **os.environ,
            "QUANDARY_DAGSTER_PG_URL": url,
            "QUANDARY_LLM_POOL": POOL,
            "QUANDARY_KEY_STUB": "none",
            "QUANDARY_COUNCIL_CONFIG": str(council_file(tmp_path / "council.json", stub.url, 600)),
            hb.HEARTBEAT_ENV: "0.5",
            hb.HEARTBEAT_TIMEOUT_ENV: "4",
            "DAGSTER_CLI_API_GRPC_STARTUP_TIMEOUT": "300",
        }
        for k in (STATE_URL_ENV, "QUANDARY_ARTIFACTS_URL"):
            base.pop(k, None)
        nodes = []
        for i in range(2):
            _instance_file(tmp_path / f"node{i}" / "dagster_home")
            nodes.append(
                {
                    **base,
                    "QUANDARY_HOME": str(tmp_path / f"node{i}" / "quandary"),
                    "DAGSTER_HOME": str(tmp_path / f"node{i}" / "dagster_home"),
                }
            )
        a, b = nodes
        setup = subprocess.run(  # the instance's tables, and the shared catalog (one table for both nodes)
            [
                sys.executable,
                "-c",
                "import sys; from dagster import DagsterInstance; DagsterInstance.get().dispose(); "
                "from resources.catalog import Catalog; [Catalog().register(sys.argv[1], d) for d in ('uni', 'uni2')]",
                str(seed),
            ],
            cwd=REPO_ROOT,
            env=a,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert setup.returncode == 0, setup.stderr[-3000:]

        monkeypatch.setenv("QUANDARY_DAGSTER_PG_URL", url)
        instance = DagsterInstance.from_config(b["DAGSTER_HOME"])
        procs = []

        def start(env, *args):  # stderr to a file: an unread pipe can fill up and stall the run
            with open(tmp_path / f"stderr{len(procs)}", "w") as err:  # the child keeps its own copy
                procs.append(
                    subprocess.Popen(
                        [QUANDARY, *args],
                        cwd=REPO_ROOT,
                        env=env,
                        stdout=subprocess.DEVNULL,
                        stderr=err,
                        start_new_session=True,
                    )
                )
            return procs[-1]

        def run_of(partition):
            runs = instance.get_runs(RunsFilter(tags={"dagster/partition": partition}))
            return runs[0] if runs else None

        try:
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
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            procs.append(daemon)
            victim = start(a, "run", "--db", "uni", "--grid", str(tmp_path / "grid.yaml"))
            assert stub.held.wait(600), "run 1 never sent an LLM request"
            run1 = run_of("uni")
            wait_until(lambda: _pool_info(instance)[0] == {run1.run_id}, 120, "run 1 holds the pool's one slot")
            waiting = start(b, "run", "--db", "uni2", "--grid", str(tmp_path / "grid.yaml"))
            wait_until(
                lambda: run_of("uni2") is not None and run_of("uni2").run_id in _pool_info(instance)[1],
                600,
                "run 2 waits for the pool slot",
                alive=lambda: waiting.poll() is None,
            )

            os.killpg(victim.pid, signal.SIGKILL)  # the worker dies holding the slot
            victim.wait(60)
            run2 = run_of("uni2")
            wait_until(
                lambda: run_of("uni").status.name == "FAILURE",
                300,
                "run monitoring failed the killed run",
                alive=lambda: daemon.poll() is None,
                interval_s=1,
            )
            wait_until(
                lambda: _pool_info(instance)[0] == {run2.run_id},
                300,
                "the killed step's slot was freed and run 2 took it",
                alive=lambda: daemon.poll() is None,
                interval_s=1,
            )
            stub.release()
            assert waiting.wait(600) == 0, (tmp_path / f"stderr{procs.index(waiting)}").read_text()[-3000:]
            failure = [
                e.message
                for e in instance.all_logs(run1.run_id)
                if e.is_dagster_event and e.dagster_event.is_run_failure
            ]
            # failed by Dagster's run monitoring (the daemon), from the launcher's heartbeat check
            assert any("run worker status FAILED" in m and "heartbeat" in m for m in failure), failure

            rerun = subprocess.run(
                [QUANDARY, "rerun", "--db", "uni"], cwd=REPO_ROOT, env=a, capture_output=True, text=True, timeout=600
            )
            assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-3000:]
            assert "re-executed run" in rerun.stdout
            runs = instance.get_runs(RunsFilter(tags={"dagster/partition": "uni"}))
            resumed = [r for r in runs if r.parent_run_id == run1.run_id]
            assert [r.status.name for r in resumed] == ["SUCCESS"]
            assert _pool_info(instance) == (set(), set())  # nothing left holding or waiting for a slot
        finally:
            instance.dispose()
            for p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGTERM if p is procs[0] else signal.SIGKILL)
            for p in procs:
                try:
                    p.wait(60)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait(30)
