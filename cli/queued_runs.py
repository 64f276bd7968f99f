"""Runs on Dagster's run queue (issue 21 part 5): ``quandary submit`` creates each run in the
instance and submits it; the instance's QueuedRunCoordinator holds it until the daemon
(``dagster-daemon run``) dequeues it within the instance's limits and hands it to the run launcher —
a process on the daemon's node by default, a Kubernetes job, a Docker container, … per the instance
file (deploy/distributed/dagster.yaml, docs/deployment.md). Nothing here schedules anything.

``quandary run`` (cli/runs.py) keeps executing in the calling process: the one-machine default.
"""

import json
import socket

from dagster import DagsterInstance

from cli.runs import ensure_partitions, get_instance, uses_database_partitions
from storage.paths import PROJECT_ROOT

WORKSPACE = PROJECT_ROOT / "workspace.yaml"
ENDPOINT_TAG = "quandary/llm_endpoint"  # run-level limit per LLM endpoint (tag_concurrency_limits)
SUBMITTED_FROM_TAG = "quandary/submitted_from"


class NoRunQueueError(RuntimeError):
    """The instance has no run queue: its runs would start at once in a process of this one."""


def has_run_queue(instance: DagsterInstance) -> bool:
    from dagster._core.run_coordinator import QueuedRunCoordinator

    return isinstance(instance.run_coordinator, QueuedRunCoordinator)


def submit_job_for_partition(
    job_name: str,
    partition: str,
    instance: DagsterInstance | None = None,
    run_config: dict | None = None,
    tags: dict | None = None,
):
    """Create a run of ``job_name`` for ``partition`` and put it on the instance's run queue;
    returns the (queued) run."""
    from dagster._cli.job import execute_launch_command
    from dagster_shared.cli import WorkspaceOpts

    from assets.shared.pools import LLM_POOL

    instance = instance or get_instance()
    if not has_run_queue(instance):
        raise NoRunQueueError(
            "this Dagster instance has no run queue (QueuedRunCoordinator): use `quandary run`, or point "
            "DAGSTER_HOME at an instance made from deploy/distributed/dagster.yaml"
        )
    if uses_database_partitions(job_name):
        ensure_partitions(instance, [partition])
    run_tags = {
        "dagster/partition": partition,
        ENDPOINT_TAG: LLM_POOL,
        SUBMITTED_FROM_TAG: socket.gethostname(),
        **(tags or {}),
    }
    return execute_launch_command(
        instance=instance,
        workspace_opts=WorkspaceOpts(workspace=[str(WORKSPACE)]),
        job_name=job_name,
        tags=json.dumps(run_tags),
        config_json=json.dumps(run_config) if run_config else None,
    )
