"""A run waiting for a pool slot sleeps until its next claim check (assets/shared/pool_wait.py)
instead of Dagster 1.13's spin, which returned a non-positive interval whatever the timeouts."""

import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]


def _context(pending, timeouts):
    return SimpleNamespace(_pending_claims=set(pending), _pending_timeouts=dict(timeouts))


RUN_ONE_JOB = """
import sys
from dagster import DagsterInstance, execute_job, job, op, reconstructable
from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext

import assets.definitions  # noqa: F401 - importing the Definitions must patch nothing
from assets.shared.pool_wait import interval_to_next_pending_claim_check, pool_aware_in_process_executor

patched = lambda: InstanceConcurrencyContext.interval_to_next_pending_claim_check is interval_to_next_pending_claim_check
print("after import:", patched())


@op
def noop():
    return 1


@job(executor_def=pool_aware_in_process_executor)
def one_step():
    noop()


if __name__ == "__main__":
    with DagsterInstance.ephemeral() as instance:
        result = execute_job(reconstructable(one_step), instance=instance)
    print("run ok:", result.success)
    print("after a run:", patched())
"""


def test_importing_the_definitions_patches_nothing_and_a_run_installs_the_fix(tmp_path):
    """No side effect on import (issue 28 item 3): the executor installs the fix when a run starts."""
    script = tmp_path / "one_run.py"
    script.write_text(RUN_ONE_JOB)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    out = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "after import: False" in out.stdout
    assert "run ok: True" in out.stdout
    assert "after a run: True" in out.stdout


def test_the_jobs_run_on_the_pool_aware_executor():
    from assets.definitions import defs
    from assets.shared.pool_wait import pool_aware_in_process_executor

    for job in defs.jobs:
        assert defs.resolve_job_def(job.name).executor_def is pool_aware_in_process_executor, job.name


def test_it_sleeps_until_the_earliest_pending_claim_and_never_past_a_due_one():
    # lazy: imports dagster (~1 s); only the tests that need it pay
    from assets.shared.pool_wait import interval_to_next_pending_claim_check as interval

    now = time.time()
    assert 4.0 < interval(_context({"a", "b"}, {"a": now + 5, "b": now + 9})) <= 5.0
    assert interval(_context({"a", "b"}, {"a": now - 1, "b": now + 9})) == 0.0  # one is due: claim it now
    assert interval(_context({"a", "b"}, {"a": now + 5})) == 0.0  # "b" not tried yet
    assert interval(_context(set(), {})) == 0.0
