"""A new user's runs through the real `quandary` command (subprocesses): the instance they land in,
failures and interrupts in a few lines, and resuming after a failure, an interrupt or `kill -9`."""

import json
import os
import signal
import socket
import subprocess
import sys

import pytest

from cli.runs import HOST_TAG, PID_TAG, fail_orphaned_runs
from tests.cli.conftest import (
    QUANDARY,
    REPO,
    UNIVERSAL_ANSWER,
    GatedStub,
    council_file,
    quandary,
    quandary_here,
    runs_in,
)
from tests.conftest import SHARED_DATA
from tests.llm_fakes import LoopbackStub, StubHandler, chat_completion

pytestmark = pytest.mark.integration


def _closed_port_url() -> str:
    with socket.socket() as s:  # bound then closed: nothing listens there, connections are refused
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def _no_traceback(text: str) -> None:
    assert "Traceback" not in text and "dagster._core" not in text, text[-3000:]


def test_failed_run_prints_summary_and_rerun_finds_it(cli_env, tmp_path):
    """The run lands in the named instance; its failure is the step, the step's message and the
    resume command; `quandary rerun` (another process, another folder) finds that failed run."""
    env = {**cli_env, "QUANDARY_COUNCIL_CONFIG": str(council_file(tmp_path / "c.json", _closed_port_url(), 5))}
    run = quandary("run", "--db", "university", "--grid", str(tmp_path / "grid.yaml"), env=env)
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]
    assert f"Dagster instance: {tmp_path / 'dagster_home'}" in run.stdout
    _no_traceback(run.stdout + run.stderr)
    err = [line for line in run.stderr.splitlines() if line.strip()]
    assert any(line.startswith("  step s03_category_conformance failed:") for line in err), run.stderr
    assert "quandary rerun --db university" in run.stderr
    assert len(err) <= 6, run.stderr
    runs = runs_in(tmp_path / "dagster_home")
    assert [r.status.name for r in runs] == ["FAILURE"]

    rerun = quandary("rerun", "--db", "university", env=env, cwd=tmp_path)  # a different working directory
    assert rerun.returncode == 1
    assert "no failed run" not in rerun.stderr
    assert "re-executed run" in rerun.stdout and "step s03_category_conformance failed:" in rerun.stderr
    _no_traceback(rerun.stdout + rerun.stderr)
    assert len(runs_in(tmp_path / "dagster_home")) == 2

    verbose = quandary("rerun", "--db", "university", "--verbose", env=env)
    assert "Traceback" in verbose.stderr or "Stack Trace" in verbose.stderr or 'File "' in verbose.stderr


def _start(*args, env) -> subprocess.Popen:
    return subprocess.Popen(
        [QUANDARY, *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _start_run(env, tmp_path) -> subprocess.Popen:
    return _start("run", "--db", "university", "--grid", str(tmp_path / "grid.yaml"), env=env)


def _interrupt_when_held(stub: GatedStub, proc: subprocess.Popen, sig, what: str):
    """Send ``sig`` once the stub holds a request (an LLM call in flight); (returncode, out, err)."""
    try:
        assert stub.held.wait(300), f"{what} never sent the LLM call the stub holds"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)  # hangs when in-flight calls are waited out
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, out, err


def test_ctrl_c_prints_one_line_and_the_run_resumes(cli_env, tmp_path):
    with GatedStub(answer_first=2) as stub:
        env = {**cli_env, "QUANDARY_COUNCIL_CONFIG": str(council_file(tmp_path / "c.json", stub.url))}
        code, out, err = _interrupt_when_held(stub, _start_run(env, tmp_path), signal.SIGINT, "the run")
        assert code == 130, err[-2000:]
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1, err
        assert lines[0].startswith("interrupted:") and "quandary rerun --db university" in lines[0]
        assert "No user initiated termination" not in out + err
        stub.release()
        assert [r.status.name for r in runs_in(tmp_path / "dagster_home")] == ["CANCELED"]  # a termination (#42 item 4)
        answered_before = set(stub.answered)
        n_before = len(stub.answered)
        rerun = quandary("rerun", "--db", "university", env=env)
        assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-2000:]
        assert not set(stub.answered[n_before:]) & answered_before, "a completed call was repeated"


def test_kill_9_leaves_no_stuck_run(cli_env, tmp_path):
    """After `kill -9` the run would stay STARTED forever; rerun sees its process is gone, marks it
    failed and resumes it without repeating a completed call."""
    with GatedStub(answer_first=3) as stub:
        env = {**cli_env, "QUANDARY_COUNCIL_CONFIG": str(council_file(tmp_path / "c.json", stub.url))}
        proc = _start_run(env, tmp_path)
        try:
            assert stub.held.wait(300), "the run never reached its fourth LLM call"
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        [killed] = runs_in(tmp_path / "dagster_home")
        assert killed.status.name == "STARTED"
        stub.release()
        answered_before = set(stub.answered)
        assert len(answered_before) == 3
        n_before = len(stub.answered)
        rerun = quandary("rerun", "--db", "university", env=env)
        assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-2000:]
        assert not set(stub.answered[n_before:]) & answered_before, "a completed call was repeated"
        statuses = {r.run_id: r.status.name for r in runs_in(tmp_path / "dagster_home")}
        assert statuses[killed.run_id] == "FAILURE" and "SUCCESS" in statuses.values()


def _answerable(question: str, sql: str) -> dict:
    return {
        "db_id": "university",
        "question": question,
        "evidence": None,
        "sql": sql,
        "category": {"name": "Answerable", "subname": "Without Evidence", "answerable": True, "solvable": True},
        "question_style": "formal",
        "question_difficulty": "simple",
    }


def test_sigterm_stops_an_interaction_run_with_calls_in_flight(cli_env, tmp_path):
    """Every job's command stops like the ABISS job: SIGTERM while the dialogue threads wait on LLM
    calls (one in flight, the others queued; 600 s timeouts) ends the process at once with one line
    naming the job's resume command, and that command finishes the run."""
    records = tmp_path / "questions.json"
    records.write_text(
        json.dumps(
            [
                _answerable("How many departments are there?", "SELECT COUNT(*) FROM departments"),
                _answerable("How many students are there?", "SELECT COUNT(*) FROM students"),
            ]
        )
    )
    with GatedStub(answer_first=0) as stub:
        env = {**cli_env, "QUANDARY_COUNCIL_CONFIG": str(council_file(tmp_path / "c.json", stub.url, 600))}
        imported = quandary("import", str(records), env=env)
        assert imported.returncode == 0, imported.stderr
        # without the stop the dialogue threads wait out the 600 s calls
        code, out, err = _interrupt_when_held(
            stub,
            _start("interact", "--db", "university", "--max-steps", "1", env=env),
            signal.SIGTERM,
            "the interaction run",
        )
        assert code == 130, out[-2000:] + err[-2000:]
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1, err
        assert lines[0].startswith("interrupted:"), err
        assert "quandary rerun --job abiss_interaction_job --db university" in lines[0]
        _no_traceback(out + err)
        # the shared progress lines: conversations are the items (1 agent × 2 questions × 4 modes)
        assert "interaction_conversations: 0/8 items" in out, out[-2000:]
        stub.release()
        rerun = quandary("rerun", "--job", "abiss_interaction_job", "--db", "university", env=env)
        assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-2000:]
        assert "re-executed run" in rerun.stdout
        assert "interaction_conversations: 8/8 items" in rerun.stdout, rerun.stdout[-2000:]


def test_sigterm_stops_an_aisql_run_inside_a_duckdb_udf(cli_env, tmp_path):
    """AI operators run as DuckDB UDFs on the calling thread, and DuckDB turns an interrupt raised in
    a UDF into an ordinary query error; the run must still stop as interrupted, not record a failed
    query and go on to the next one's calls."""

    if not (SHARED_DATA / "sembench" / "files").is_dir():
        pytest.skip(f"SemBench data not found at {SHARED_DATA / 'sembench'} (only in the workplace checkout)")
    with GatedStub(answer_first=0) as stub:
        env = {**cli_env, "QUANDARY_COUNCIL_CONFIG": str(council_file(tmp_path / "c.json", stub.url, 600))}
        proc = _start(
            "aisql",
            "judge",
            "--scenario",
            "movie",
            "--backend",
            "council",
            "--questions",
            "Q1",
            "--methods",
            "ex",
            "--data",
            str(SHARED_DATA),
            env=env,
        )
        code, out, err = _interrupt_when_held(stub, proc, signal.SIGTERM, "the aisql run")
    assert code == 130, out[-2000:] + err[-2000:]
    last = [line for line in err.splitlines() if line.strip()][-1]
    assert last.startswith("interrupted:") and "quandary rerun --job aisql_job --partition movie" in last, err
    _no_traceback(out + err)


class _SwitchableStub(LoopbackStub):
    """Answers every request with the universal answer, or with HTTP 503 while ``broken``; counts
    the requests it answered."""

    def __init__(self):
        self.broken = True
        self.answered = 0
        outer = self

        class Handler(StubHandler):
            def do_POST(self):
                self.read_json()
                if outer.broken:
                    self.send_error_status(503)
                elif self.send_json(200, chat_completion(UNIVERSAL_ANSWER)):
                    outer.answered += 1

        self._serve(Handler)


def test_rerun_resumes_with_the_runs_council_and_prints_the_runs_summary(cli_env, tmp_path):
    """#24 item 2: the council file the run was started with is recorded and reused by `quandary
    rerun` from a shell without it (not the default council); the rerun prints the same summary as
    `quandary run` (funnel, dataset size)."""
    with _SwitchableStub() as stub:
        council = council_file(tmp_path / "c.json", stub.url)
        run = quandary(
            "run",
            "--db",
            "university",
            "--grid",
            str(tmp_path / "grid.yaml"),
            env={**cli_env, "QUANDARY_COUNCIL_CONFIG": str(council)},
        )
        assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]
        stub.broken = False
        rerun = quandary("rerun", "--db", "university", env=cli_env)  # no QUANDARY_COUNCIL_CONFIG here
        assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
        assert stub.answered > 0  # the run's council answered, not the embedded default
        assert f"resuming with the run's configuration: council {council.resolve()}" in rerun.stdout
        assert "validation funnel" in rerun.stdout and "validated questions in dataset:" in rerun.stdout
        _no_traceback(rerun.stdout + rerun.stderr)


def test_rerun_refuses_another_council_and_names_the_difference(cli_env, tmp_path):
    """#24 item 2: a council file edited since the run, or another file named in the environment,
    would mix two councils in one dataset: the rerun refuses and spells out what differs."""
    council = council_file(tmp_path / "c.json", _closed_port_url(), 5)
    env = {**cli_env, "QUANDARY_COUNCIL_CONFIG": str(council)}
    run = quandary("run", "--db", "university", "--grid", str(tmp_path / "grid.yaml"), env=env)
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]
    assert "plan for abiss_dataset_job on university:" in run.stdout  # the cost, before the first step

    other = council_file(tmp_path / "other.json", _closed_port_url(), 5)
    # refused before anything runs: in this process (the separate process would only add its imports)
    refused = quandary_here("rerun", "--db", "university", env={**cli_env, "QUANDARY_COUNCIL_CONFIG": str(other)})
    assert refused.returncode == 1
    assert "refusing to resume" in refused.stderr and "QUANDARY_COUNCIL_CONFIG" in refused.stderr, refused.stderr

    data = json.loads(council.read_text())
    data["members"]["stub"]["timeout_s"] = 120.0
    council.write_text(json.dumps(data))
    edited = quandary_here("rerun", "--db", "university", env=cli_env)
    assert edited.returncode == 1
    assert "member stub: timeout_s 5.0 in the run, 120.0 now" in edited.stderr, edited.stderr
    _no_traceback(refused.stderr + edited.stderr)
    assert len(runs_in(tmp_path / "dagster_home")) == 1  # nothing was re-executed


def test_failing_a_killed_run_frees_its_pool_slots(tmp_path):
    """Dagster frees a dead run's pool slots only from a daemon's run monitoring: without one, a
    step killed with `kill -9` would hold its LLM endpoint's pool for good. The rerun's orphan check
    (fail_orphaned_runs) frees them."""

    # lazy: dagster is slow to import (~1 s); only the tests that need it pay
    from dagster import DagsterInstance, DagsterRun, DagsterRunStatus

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that no longer runs
    (tmp_path / "dagster_home").mkdir()
    with DagsterInstance.local_temp(tempdir=str(tmp_path / "dagster_home")) as instance:
        storage = instance.event_log_storage
        storage.set_concurrency_slots("llm-test", 1)
        dead = DagsterRun(
            job_name="abiss_dataset_job",
            run_id="dead-run",
            status=DagsterRunStatus.STARTED,
            tags={PID_TAG: str(gone.pid), HOST_TAG: socket.gethostname()},
        )
        instance.add_run(dead)
        assert storage.claim_concurrency_slot("llm-test", "dead-run", "s03", 0).is_claimed
        assert not storage.claim_concurrency_slot("llm-test", "next-run", "s03", 0).is_claimed  # the pool is full
        assert fail_orphaned_runs(instance) == ["dead-run"]
        assert instance.get_run_by_id("dead-run").status.name == "FAILURE"
        assert storage.claim_concurrency_slot("llm-test", "next-run", "s03", 0).is_claimed
