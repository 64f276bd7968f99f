"""Headless runs for the CLI and `make demo`: register partitions and execute a job.

Runs go to the project's Dagster instance (``$DAGSTER_HOME``) when set, so they show up in the
UI; otherwise to an ephemeral instance.
"""

import os

from dagster import DagsterInstance

from assets.partitions import databases_partitions


def get_instance() -> DagsterInstance:
    if os.environ.get("DAGSTER_HOME"):
        from resources.locks import file_lock

        # Processes opening a fresh DAGSTER_HOME at once would race its storage migrations (alembic).
        with file_lock(os.path.join(os.environ["DAGSTER_HOME"], ".quandary-instance.lock")):
            return DagsterInstance.get()
    return DagsterInstance.ephemeral()


def ensure_partitions(instance: DagsterInstance, db_ids: list[str]) -> list[str]:
    existing = set(instance.get_dynamic_partitions(databases_partitions.name))
    new = [d for d in db_ids if d not in existing]
    if new:
        instance.add_dynamic_partitions(databases_partitions.name, new)
    return new


def run_job_for_partition(job_name: str, db_id: str, instance: DagsterInstance | None = None,
                          raise_on_error: bool = False, log_level: str = "WARNING", tags=None,
                          run_config: dict | None = None):
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
        run_config={**(run_config or {}), "loggers": {"console": {"config": {"log_level": log_level}}}},
    )


_RERUNNABLE = ("FAILURE", "CANCELED")


def latest_failed_run_id(instance: DagsterInstance, job_name: str, db_id: str | None) -> str:
    """The newest failed (or canceled) run of the job for the partition that no successful
    re-execution has fixed yet."""
    from dagster import DagsterRunStatus, RunsFilter

    tags = {"dagster/partition": db_id} if db_id else {}
    statuses = [DagsterRunStatus[s] for s in _RERUNNABLE]
    succeeded = instance.get_run_records(
        RunsFilter(job_name=job_name, statuses=[DagsterRunStatus.SUCCESS], tags=tags), limit=200)
    fixed = {r.dagster_run.parent_run_id for r in succeeded} | {r.dagster_run.root_run_id for r in succeeded}
    last_success = max((r.create_timestamp for r in succeeded), default=None)
    for record in instance.get_run_records(RunsFilter(job_name=job_name, statuses=statuses, tags=tags), limit=20):
        run = record.dagster_run
        if last_success is not None and record.create_timestamp < last_success:
            break  # a later run of the partition succeeded: older failures are moot
        if run.run_id not in fixed and (run.root_run_id is None or run.root_run_id not in fixed):
            return run.run_id
    where = f" for partition {db_id!r}" if db_id else ""
    raise LookupError(f"no failed run of {job_name}{where} left to re-execute "
                      f"in {os.environ.get('DAGSTER_HOME') or 'this instance'}")


def _main_job():
    from pipelines.definitions import MAIN_JOB, defs

    return defs.resolve_job_def(MAIN_JOB)


def reexecute_from_failure(run_id: str | None = None, db_id: str | None = None, job_name: str | None = None,
                           instance: DagsterInstance | None = None):
    """Dagster's "re-execute from failure": only the failed steps and their downstream run again.

    Completed LLM calls are in the call cache, so the re-executed stages repeat none of them.
    """
    from dagster import ReexecutionOptions, execute_job, reconstructable

    from pipelines.definitions import MAIN_JOB

    instance = instance or get_instance()
    job_name = job_name or MAIN_JOB
    if job_name != MAIN_JOB:
        raise LookupError(f"rerun supports the main job ({MAIN_JOB}) only")
    run_id = run_id or latest_failed_run_id(instance, job_name, db_id)
    parent = instance.get_run_by_id(run_id)
    if parent is None:
        raise LookupError(f"run {run_id} not found")
    if parent.job_name != job_name:
        raise LookupError(f"run {run_id} is a run of {parent.job_name}, not {job_name}")
    if parent.status.name not in _RERUNNABLE:
        raise LookupError(f"run {run_id} is {parent.status.name.lower()}, not failed: nothing to re-execute")
    options = ReexecutionOptions.from_failure(run_id, instance)
    return execute_job(
        reconstructable(_main_job), instance=instance, run_config=parent.run_config,
        tags={k: v for k, v in parent.tags.items() if k.startswith("dagster/partition")},
        reexecution_options=options,
    )


def report_external_version(asset: str, partition: str, path: str, rows: int, content_hash: str,
                            description: str) -> bool:
    """Record an artifact written outside a run (e.g. `quandary import`) in the Dagster instance,
    so the UI's asset history shows where that version came from. Needs $DAGSTER_HOME."""
    if not os.environ.get("DAGSTER_HOME"):
        return False
    from dagster import AssetKey, AssetMaterialization, MetadataValue

    instance = get_instance()
    ensure_partitions(instance, [partition])
    instance.report_runless_asset_event(
        AssetMaterialization(
            asset_key=AssetKey(asset), partition=partition, description=description,
            metadata={"path": MetadataValue.path(path), "dagster/row_count": MetadataValue.int(rows),
                      "content_hash": MetadataValue.text(content_hash)},
            tags={"dagster/data_version": content_hash},
        )
    )
    return True
