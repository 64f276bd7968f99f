"""A `quandary run` waiting for a pool slot sleeps until its next claim check instead of spinning.

`quandary run` executes with ``job.execute_in_process``, which ignores the job's executor and so the
pool-wait fix that executor installs (assets/shared/pool_wait.py): a CLI run waiting for an LLM
endpoint's slot spun a core (#44: 24 s of CPU in a 53 s wait in the two-node test; ~640,000 loops in
3 s in this test's setting before the fix)."""

import threading

from dagster import DagsterInstance, job, op
from dagster._core.execution.plan.active import ActiveExecution
from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext

from assets.shared import pool_wait
from cli.runs import execute_in_process
from tests.waiting import wait_until

POOL = "quandary-test-pool"


@op(pool=POOL)
def step_in_the_pool():
    return 1


@job
def one_pool_step():
    step_in_the_pool()


def test_a_cli_run_waiting_for_a_pool_slot_loops_once_per_claim_check(tmp_path, monkeypatch):
    # Dagster's own interval, as in a fresh `quandary run` process (an earlier run in this worker may
    # have installed the fix already)
    monkeypatch.setattr(InstanceConcurrencyContext, "interval_to_next_pending_claim_check", pool_wait.DAGSTER_INTERVAL)
    loops, real_sleep = [], ActiveExecution.sleep_til_ready

    def counting_sleep_til_ready(self):
        loops.append(1)
        return real_sleep(self)

    monkeypatch.setattr(ActiveExecution, "sleep_til_ready", counting_sleep_til_ready)
    with DagsterInstance.local_temp(tempdir=str(tmp_path)) as instance:
        storage = instance.event_log_storage
        storage.set_concurrency_slots(POOL, 1)
        assert storage.claim_concurrency_slot(POOL, "another-run", "its-step").is_claimed
        claims, real_claim = [], storage.claim_concurrency_slot

        def counting_claim(*args, **kwargs):
            claims.append(1)
            return real_claim(*args, **kwargs)

        monkeypatch.setattr(storage, "claim_concurrency_slot", counting_claim)
        result = {}
        run = threading.Thread(target=lambda: result.setdefault("run", execute_in_process(one_pool_step, instance)))
        run.start()
        try:
            wait_until(lambda: len(claims) >= 3, 120, "three claim attempts of the waiting run", alive=run.is_alive)
            waited = len(loops)
        finally:
            storage.free_concurrency_slots_for_run("another-run")
            run.join(120)
        assert result["run"].success
        # the executor's loop wakes up for each claim check (and once per step event), never in between
        assert waited <= 2 * len(claims) + 5, (waited, len(claims))
        assert (
            InstanceConcurrencyContext.interval_to_next_pending_claim_check
            is pool_wait.interval_to_next_pending_claim_check
        )
