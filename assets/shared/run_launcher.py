"""The distributed instance's run launcher: Dagster's default one plus a worker health check
(issue 21 item 7), so that Dagster's own run monitoring fails a run whose worker died anywhere.

Dagster's run monitoring (``run_monitoring`` in the instance file, run by the daemon) asks the run
launcher whether a STARTED run's worker is alive; the ``DefaultRunLauncher`` cannot tell
(``supports_check_run_worker_health`` is False), so with it a ``kill -9``-ed run stays STARTED
forever and keeps its pool slots. This launcher launches exactly as the default one and answers
the health check from the run's heartbeat in the shared-state database (:mod:`storage.heartbeats`),
which every run writes in distributed mode — runs launched by the daemon and runs started
in-process by ``quandary run`` on any node alike. A run without a heartbeat is reported running
(nothing to judge by; ``max_runtime_seconds`` still applies). The daemon then marks a dead run
failed, and ``free_slots_after_run_end_seconds`` frees the pool slots its killed step held.

Configured in deploy/distributed/dagster.yaml::

    run_launcher:
      module: assets.shared.run_launcher
      class: HeartbeatRunLauncher
"""

from dagster import DefaultRunLauncher

# the launcher plugin interface (dagster-k8s and dagster-docker implement the same two names)
from dagster._core.launcher import CheckRunHealthResult, WorkerStatus


class HeartbeatRunLauncher(DefaultRunLauncher):
    """``DefaultRunLauncher`` whose ``check_run_worker_health`` reads the run's heartbeat."""

    @property
    def supports_check_run_worker_health(self) -> bool:
        from storage.state_db import state_engine

        return state_engine() is not None

    def check_run_worker_health(self, run) -> CheckRunHealthResult:
        from storage.heartbeats import liveness
        from storage.state_db import state_engine

        beat = liveness(state_engine(), run.run_id)
        if beat.alive is False:
            return CheckRunHealthResult(WorkerStatus.FAILED, msg=beat.describe())
        return CheckRunHealthResult(WorkerStatus.RUNNING)
