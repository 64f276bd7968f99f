"""Headless runs for the CLI and `make demo`: register partitions and execute a job.

Runs go to the project's Dagster instance: ``$DAGSTER_HOME`` when set, else ``<project>/.dagster_home``
(the folder ``make ui`` serves), created with telemetry off. So a run started from the CLI in any
folder shows up in the UI and ``quandary rerun`` finds it.

Every run is tagged with the pid (and host and process start time) of the process executing it, so
a run whose process was killed (``kill -9``, a crash) can be recognised later: it stays STARTED in
the instance although nothing runs it. :func:`fail_orphaned_runs` marks such runs failed, which
makes them re-executable from failure.
"""

import os
import socket

from dagster import DagsterInstance

from assets.shared.partitions import databases_partitions
from storage.paths import dagster_home

PID_TAG, HOST_TAG, START_TAG = "quandary/pid", "quandary/host", "quandary/pid_start"


def get_instance() -> DagsterInstance:
    home, _ = dagster_home()  # DAGSTER_HOME, else the project's .dagster_home (created, telemetry off)
    from resources.locks import file_lock

    # Processes opening a fresh DAGSTER_HOME at once would race its storage migrations (alembic).
    with file_lock(os.path.join(str(home), ".quandary-instance.lock")):
        return DagsterInstance.get()


def describe_instance() -> str:
    home, source = dagster_home()
    return f"Dagster instance: {home} ({source})"


def _process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid apart."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def process_tags() -> dict[str, str]:
    pid = os.getpid()
    return {PID_TAG: str(pid), HOST_TAG: socket.gethostname(), START_TAG: _process_start(pid) or ""}


def _process_gone(tags) -> bool:
    if tags.get(HOST_TAG) != socket.gethostname() or not tags.get(PID_TAG, "").isdigit():
        return False  # another machine's run, or not ours: we cannot tell, leave it
    pid = int(tags[PID_TAG])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # alive, another user's
    started = tags.get(START_TAG)
    return bool(started) and _process_start(pid) not in (None, started)  # pid reused by another process


def fail_orphaned_runs(instance: DagsterInstance, job_name: str | None = None, db_id: str | None = None) -> list[str]:
    """Mark failed every STARTED/STARTING run whose executing process is gone; returns their ids."""
    from dagster import DagsterRunStatus, RunsFilter

    tags = {"dagster/partition": db_id} if db_id else {}
    records = instance.get_run_records(RunsFilter(
        job_name=job_name, tags=tags,
        statuses=[DagsterRunStatus.STARTED, DagsterRunStatus.STARTING, DagsterRunStatus.NOT_STARTED]), limit=100)
    failed = []
    for record in records:
        run = record.dagster_run
        if _process_gone(run.tags):
            instance.report_run_failed(
                run, message=f"the process that ran it (pid {run.tags[PID_TAG]}) is gone: killed or crashed")
            failed.append(run.run_id)
    return failed


def ensure_partitions(instance: DagsterInstance, db_ids: list[str]) -> list[str]:
    existing = set(instance.get_dynamic_partitions(databases_partitions.name))
    new = [d for d in db_ids if d not in existing]
    if new:
        instance.add_dynamic_partitions(databases_partitions.name, new)
    return new


def uses_database_partitions(job_name: str) -> bool:
    """Whether the job is partitioned by registered database (dynamic) rather than by a fixed list
    (AI-operator scenarios, AmbiTab corpora)."""
    from assets.definitions import defs

    parts = defs.resolve_job_def(job_name).partitions_def
    return getattr(parts, "name", None) == databases_partitions.name


def run_job_for_partition(job_name: str, db_id: str, instance: DagsterInstance | None = None,
                          raise_on_error: bool = False, log_level: str = "WARNING", tags=None,
                          run_config: dict | None = None, run_id: str | None = None, asset_selection=None):
    """Execute ``job_name`` for one partition (a database id, a scenario or a corpus) in this
    process; returns the result."""
    from assets.definitions import defs

    instance = instance or get_instance()
    if uses_database_partitions(job_name):
        ensure_partitions(instance, [db_id])
    job = defs.resolve_job_def(job_name)
    return job.execute_in_process(
        instance=instance,
        partition_key=db_id,
        raise_on_error=raise_on_error,
        tags={**process_tags(), **(tags or {})},
        run_id=run_id,
        asset_selection=asset_selection,
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
                      f"in the Dagster instance {dagster_home()[0]}")


def job_named(job_name: str):
    """The job definition by name: a module-level function, so re-execution can rebuild the job in
    another process (Dagster's ``build_reconstructable_job``)."""
    from assets.definitions import defs

    return defs.resolve_job_def(job_name)


def reexecute_from_failure(run_id: str | None = None, db_id: str | None = None, job_name: str | None = None,
                           instance: DagsterInstance | None = None, log_level: str = "WARNING"):
    """Dagster's "re-execute from failure" for any job: only the failed steps and their downstream
    run again.

    Completed LLM calls are in the call cache, so the re-executed stages repeat none of them.
    """
    from dagster import ReexecutionOptions, build_reconstructable_job, execute_job

    from assets.definitions import MAIN_JOB, defs

    instance = instance or get_instance()
    job_name = job_name or MAIN_JOB
    known = [j.name for j in defs.jobs]
    if job_name not in known:
        raise LookupError(f"unknown job {job_name!r}; jobs: {', '.join(known)}")
    fail_orphaned_runs(instance, job_name, db_id)  # killed runs become re-executable
    run_id = run_id or latest_failed_run_id(instance, job_name, db_id)
    parent = instance.get_run_by_id(run_id)
    if parent is None:
        raise LookupError(f"run {run_id} not found")
    if parent.job_name != job_name:
        raise LookupError(f"run {run_id} is a run of {parent.job_name}, not {job_name} (add --job {parent.job_name})")
    if parent.status.name not in _RERUNNABLE:
        raise LookupError(f"run {run_id} is {parent.status.name.lower()}, not failed: nothing to re-execute")
    options = ReexecutionOptions.from_failure(run_id, instance)
    run_config = {**parent.run_config, "loggers": {"console": {"config": {"log_level": log_level}}}}
    return execute_job(
        build_reconstructable_job("cli.runs", "job_named", reconstructable_args=(job_name,)),
        instance=instance, run_config=run_config,
        tags={**{k: v for k, v in parent.tags.items() if k.startswith("dagster/partition")}, **process_tags()},
        reexecution_options=options,
    )


def report_external_version(asset: str, partition: str, path: str, rows: int, content_hash: str,
                            description: str) -> bool:
    """Record an artifact written outside a run (e.g. `quandary import`) in the Dagster instance,
    so the UI's asset history shows where that version came from."""
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
