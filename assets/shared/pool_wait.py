"""Waiting for a pool slot without spinning: a fix to Dagster 1.13's in-process executor.

While every ready step waits for a concurrency-pool slot, the executor's loop sleeps
``InstanceConcurrencyContext.interval_to_next_pending_claim_check()`` seconds between rounds. In
Dagster 1.13 that is ``min([0, *(ready_at - now)])``: never positive, so the loop never sleeps and
a run waiting for an LLM endpoint's slot burns a core (measured: a waiting `quandary run` used 75 %
of one; upstream's fix, dagster-io/dagster#20367, was closed unmerged). A pending claim is only
re-tried at its own ``ready_at`` anyway, so sleeping until the earliest one changes no claim time:
this is the same schedule without the spin.

Installed explicitly, never on import: the job's executor (:data:`pool_aware_in_process_executor`,
set in :mod:`assets.definitions`) installs it when a run's execution starts, in the process that
runs the steps (daemon-launched runs and `quandary rerun`). ``job.execute_in_process`` — `quandary
run` — ignores the job's executor, so :func:`cli.runs.execute_in_process` installs it before such a
run (it had not: a CLI run waiting for a slot still spun, #44).

Remove when: Dagster's ``interval_to_next_pending_claim_check`` returns a positive interval while
every pending claim waits (check on each Dagster upgrade; ``tests/dagster/test_pool_wait.py`` pins
the behaviour we rely on), then use ``in_process_executor`` again."""

import time

from dagster import executor, in_process_executor
from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext

# Dagster's own method, kept before any install (the tests put it back to see a fresh process's behaviour)
DAGSTER_INTERVAL = InstanceConcurrencyContext.interval_to_next_pending_claim_check


def interval_to_next_pending_claim_check(self) -> float:
    """Seconds until the earliest pending claim may be re-tried (0 when one may be tried now)."""
    pending, timeouts = self._pending_claims, self._pending_timeouts
    if not pending or any(step not in timeouts for step in pending):
        return 0.0  # nothing pending, or a claim not yet tried: go on at once
    return max(0.0, min(timeouts[step] for step in pending) - time.time())


def install() -> None:
    InstanceConcurrencyContext.interval_to_next_pending_claim_check = interval_to_next_pending_claim_check


@executor(name="in_process", config_schema=in_process_executor.config_schema.as_field())
def pool_aware_in_process_executor(init_context):
    """Dagster's in-process executor (same name and config) with the sleeping interval installed
    when a run starts executing."""
    install()
    return in_process_executor.executor_creation_fn(init_context)
