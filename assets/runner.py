"""Headless runs for the CLI and `make demo`: register partitions and execute a job.

Runs go to the project's Dagster instance (``$DAGSTER_HOME``) when set, so they show up in the
UI; otherwise to an ephemeral instance.
"""

import os

from dagster import DagsterInstance

from assets.partitions import databases_partitions


def get_instance() -> DagsterInstance:
    if os.environ.get("DAGSTER_HOME"):
        return DagsterInstance.get()
    return DagsterInstance.ephemeral()


def ensure_partitions(instance: DagsterInstance, db_ids: list[str]) -> list[str]:
    existing = set(instance.get_dynamic_partitions(databases_partitions.name))
    new = [d for d in db_ids if d not in existing]
    if new:
        instance.add_dynamic_partitions(databases_partitions.name, new)
    return new


def run_job_for_partition(job_name: str, db_id: str, instance: DagsterInstance | None = None,
                          raise_on_error: bool = False, log_level: str = "WARNING", tags=None):
    """Execute ``job_name`` for one database partition in this process; returns the result."""
    from pipelines.definitions import defs

    instance = instance or get_instance()
    ensure_partitions(instance, [db_id])
    job = defs.resolve_job_def(job_name)
    return job.execute_in_process(
        instance=instance,
        partition_key=db_id,
        raise_on_error=raise_on_error,
        tags=tags,
        run_config={"loggers": {"console": {"config": {"log_level": log_level}}}},
    )
