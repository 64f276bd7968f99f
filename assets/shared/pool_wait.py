"""Waiting for a pool slot without spinning: a fix to Dagster 1.13's in-process executor.

While every ready step waits for a concurrency-pool slot, the executor's loop sleeps
``InstanceConcurrencyContext.interval_to_next_pending_claim_check()`` seconds between rounds. In
Dagster 1.13 that is ``min([0, *(ready_at - now)])``: never positive, so the loop never sleeps and
a run waiting for an LLM endpoint's slot burns a core (measured: a waiting `quandary run` used 75 %
of one; upstream's fix, dagster-io/dagster#20367, was closed unmerged). A pending claim is only
re-tried at its own ``ready_at`` anyway, so sleeping until the earliest one changes no claim time:
this is the same schedule without the spin. Applied when the Definitions are imported
(:mod:`assets.definitions`), for CLI runs and daemon-launched runs alike."""

import time

from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext


def interval_to_next_pending_claim_check(self) -> float:
    """Seconds until the earliest pending claim may be re-tried (0 when one may be tried now)."""
    pending, timeouts = self._pending_claims, self._pending_timeouts
    if not pending or any(step not in timeouts for step in pending):
        return 0.0  # nothing pending, or a claim not yet tried: go on at once
    return max(0.0, min(timeouts[step] for step in pending) - time.time())


def install() -> None:
    InstanceConcurrencyContext.interval_to_next_pending_claim_check = interval_to_next_pending_claim_check
