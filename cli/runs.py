"""Headless runs for the CLI and `make demo`: register partitions and execute a job.

Runs go to the project's Dagster instance: ``$DAGSTER_HOME`` when set, else ``<project>/.dagster_home``
(the folder ``make ui`` serves), created with telemetry off. So a run started from the CLI in any
folder shows up in the UI and ``quandary rerun`` finds it.

Every run is tagged with the pid (and host and process start time) of the process executing it, so
a run whose process was killed (``kill -9``, a crash) can be recognised later: it stays STARTED in
the instance although nothing runs it. :func:`fail_orphaned_runs` marks such runs failed, which
makes them re-executable from failure, and frees the pool slots their killed steps held. A pid
judges runs of this host only; in distributed mode every run also has a heartbeat in the
shared-state database (:mod:`storage.heartbeats`), which judges runs of any host — including runs
the daemon launched, which carry no pid.
"""

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from dagster import DagsterInstance

from assets.shared.partitions import databases_partitions
from assets.shared.pool_wait import install as install_pool_wait
from storage.paths import dagster_home

PID_TAG, HOST_TAG, START_TAG = "quandary/pid", "quandary/host", "quandary/pid_start"
# What shaped a run besides its run config (grid, resource config): recorded as tags so a rerun
# resumes the same experiment (#24 item 2). The command tag says which CLI command started it.
COUNCIL_TAG, ENV_TAG, COMMAND_TAG = "quandary/council", "quandary/env", "quandary/command"
# QUANDARY_* variables that say where state lives or how progress is shown, not what a run computes
_ENV_NOT_RECORDED = frozenset(
    {
        "QUANDARY_HOME",
        "QUANDARY_PROGRESS",
        "QUANDARY_EMBEDDED_BASE_URL",
        "QUANDARY_BENCH_SRC",
        # distributed mode: where shared state lives (URLs may hold passwords)
        # and how often workers beat; none changes what a run computes
        "QUANDARY_DAGSTER_PG_URL",
        "QUANDARY_STATE_URL",
        "QUANDARY_ARTIFACTS_URL",
        "QUANDARY_S3_ENDPOINT_URL",
        "QUANDARY_HEARTBEAT_S",
        "QUANDARY_HEARTBEAT_TIMEOUT_S",
        "QUANDARY_CALL_LEASE_S",
    }
)


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


def mark_run_canceled(instance: DagsterInstance, run_id: str) -> bool:
    """An interrupted CLI run marked CANCELED, as Dagster's own termination ends a run: it then
    reads as a termination, not as a failure "with no user initiated termination request" (#42
    item 4). Called after the run stopped; a run that succeeded is left alone. Whether it marked."""
    from dagster import DagsterRunStatus

    run = instance.get_run_by_id(run_id)
    if run is None or run.status in (DagsterRunStatus.SUCCESS, DagsterRunStatus.CANCELED):
        return False
    instance.report_run_canceled(run, message="Ctrl-C or SIGTERM in the quandary command that ran it")
    # Dagster recorded the interrupted run as FAILURE first; a UI that read the asset statuses in
    # between cached the partitions it did not finish as failed, for good ("Latest materialization:
    # Failed"). Their cache is dropped: the next read recomputes it from the runs, this one CANCELED.
    from dagster import DagsterEventType

    planned = instance.get_records_for_run(run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION_PLANNED).records
    keys = {r.event_log_entry.dagster_event.asset_key for r in planned if r.event_log_entry.dagster_event}
    if keys:
        instance.wipe_asset_cached_status(sorted(keys, key=lambda k: k.to_user_string()))
    return True


def _orphan_reason(run) -> str | None:
    """Why ``run`` has no live worker (its process is gone here, or its heartbeat stopped), or None."""
    if _process_gone(run.tags):
        return f"the process that ran it (pid {run.tags[PID_TAG]}) is gone: killed or crashed"
    from storage.state_db import state_engine

    engine = state_engine()
    if engine is not None:
        from storage.heartbeats import liveness

        beat = liveness(engine, run.run_id)
        if beat.alive is False:
            return f"{beat.describe()}: killed, crashed or its machine is gone"
    return None


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
    """Mark failed every STARTED/STARTING run whose worker is gone (:func:`_orphan_reason`) and free
    the pool slots it still held (Dagster frees a finished run's slots only by the daemon, after
    ``free_slots_after_run_end_seconds``); returns their ids."""
    from dagster import DagsterRunStatus, RunsFilter

    tags = {"dagster/partition": db_id} if db_id else {}
    records = instance.get_run_records(
        RunsFilter(
            job_name=job_name,
            tags=tags,
            statuses=[DagsterRunStatus.STARTED, DagsterRunStatus.STARTING, DagsterRunStatus.NOT_STARTED],
        ),
        limit=100,
    )
    failed = []
    for record in records:
        run = record.dagster_run
        reason = _orphan_reason(run)
        if reason:
            instance.report_run_failed(run, message=reason)
            # the dead steps' pool slots: Dagster frees them only from a daemon's run monitoring, so
            # without one a killed LLM step would hold its endpoint's pool for good
            if instance.event_log_storage.supports_global_concurrency_limits:
                instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
            failed.append(run.run_id)
    return failed


def recorded_env() -> dict[str, str]:
    """The environment variables that change what a run computes (council file, embedded server
    mode, SQL limits, difficulty rules): every ``QUANDARY_*`` except where state lives."""
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith("QUANDARY_") and k not in _ENV_NOT_RECORDED}


def council_snapshot(council_path: str | None = None) -> dict | None:
    """The council a run would use now (``council_path``, resolved by the command; None: the
    environment's or the default): members with every parameter, roles; ``None`` when the council
    file cannot be read (preflight says why)."""
    from resources.llm.config import load_council_config

    try:
        cfg = load_council_config(council_path)
    except Exception:  # noqa: BLE001 - a bad council file is reported by preflight / the run itself
        return None
    return {
        "source": cfg.source,
        "members": {n: m.model_dump(mode="json", exclude={"name"}) for n, m in sorted(cfg.members.items())},
        "councils": {r: list(ms) for r, ms in sorted(cfg.councils.items())},
    }


def configuration_tags(command: str | None = None, council_path: str | None = None) -> dict[str, str]:
    """Tags that record the configuration a run was started with (see :func:`rerun_environment`)."""
    import json

    tags = {ENV_TAG: json.dumps(recorded_env(), sort_keys=True)}
    council = council_snapshot(council_path)
    if council is not None:
        tags[COUNCIL_TAG] = json.dumps(council, sort_keys=True, separators=(",", ":"))
    if command:
        tags[COMMAND_TAG] = command
    return tags


class ConfigurationMismatch(LookupError):
    """A rerun would resume a run with a configuration other than the one it was started with."""


def council_differences(recorded: dict, current: dict) -> list[str]:
    """What differs between two :func:`council_snapshot` s, one line per member parameter or role."""
    lines = []
    rec_m, cur_m = recorded.get("members", {}), current.get("members", {})
    for name in sorted(set(rec_m) | set(cur_m)):
        if name not in cur_m:
            lines.append(f"member {name}: in the run's council, not in the current one")
        elif name not in rec_m:
            lines.append(f"member {name}: in the current council, not in the run's")
        else:
            for key in sorted(set(rec_m[name]) | set(cur_m[name])):
                if rec_m[name].get(key) != cur_m[name].get(key):
                    lines.append(f"member {name}: {key} {rec_m[name].get(key)} in the run, {cur_m[name].get(key)} now")
    rec_c, cur_c = recorded.get("councils", {}), current.get("councils", {})
    for role in sorted(set(rec_c) | set(cur_c)):
        if rec_c.get(role) != cur_c.get(role):
            lines.append(f"role {role}: {rec_c.get(role)} in the run, {cur_c.get(role)} now")
    return lines


def rerun_environment(tags, council_path: str | None = None) -> tuple[dict[str, str], str]:
    """The environment a rerun of the run with ``tags`` needs: the recorded variables this process
    does not set (adopted), and a one-line description (``council_path``: the council file the run's
    config names, if any) of the configuration reused. Raises
    :class:`ConfigurationMismatch` naming every difference when this process sets a variable to
    another value or the council (file) changed since the run."""
    import json

    if ENV_TAG not in tags:
        return {}, "the run predates recorded configurations: the current council and environment are used"
    recorded = json.loads(tags[ENV_TAG])
    current = recorded_env()
    differences = [
        f"{name}={current[name]!r} here, {recorded.get(name)!r} in the run"
        for name in sorted(current)
        if current[name] != recorded.get(name)
    ]
    adopt = {name: value for name, value in recorded.items() if name not in current}
    council_line = ""
    if COUNCIL_TAG in tags and not differences:
        run_council = json.loads(tags[COUNCIL_TAG])
        saved = {k: os.environ.get(k) for k in adopt}
        os.environ.update(adopt)
        try:
            now = council_snapshot(council_path)
        finally:
            _restore_env(saved)
        if now is None:
            differences.append(f"the run's council ({run_council.get('source')}) cannot be loaded now")
        else:
            differences += [
                f"{line} (council {run_council.get('source')})" for line in council_differences(run_council, now)
            ]
        council_line = f"council {run_council.get('source')}"
    if differences:
        raise ConfigurationMismatch(
            "refusing to resume: this rerun would use another configuration than the run it resumes\n"
            + "\n".join(f"  - {d}" for d in differences)
            + "\n  restore the run's settings to resume it, or start a new run (`quandary run`)"
        )
    used = ", ".join(
        x
        for x in (council_line, *(f"{k}={v}" for k, v in sorted(recorded.items()) if k != "QUANDARY_COUNCIL_CONFIG"))
        if x
    )
    return adopt, f"resuming with the run's configuration: {used or 'the defaults'}"


def ensure_partitions(instance: DagsterInstance, db_ids: list[str]) -> list[str]:
    existing = set(instance.get_dynamic_partitions(databases_partitions.name))
    new = [d for d in db_ids if d not in existing]
    if new:
        instance.add_dynamic_partitions(databases_partitions.name, new)
    return new


def uses_database_partitions(job_name: str) -> bool:
    """Whether the job is partitioned by registered database (dynamic) rather than by a fixed list
    (AI-operator scenarios, AmbiTab corpora)."""
    from assets.cards import card_for

    return card_for(job_name).database_partitions


def run_job_for_partition(
    job_name: str,
    db_id: str,
    instance: DagsterInstance | None = None,
    raise_on_error: bool = False,
    log_level: str = "WARNING",
    tags=None,
    run_config: dict | None = None,
    run_id: str | None = None,
    asset_selection=None,
    council_path: str | None = None,
):
    """Execute ``job_name`` for one partition (a database id, a scenario or a corpus) in this
    process; returns the result. ``council_path``: the council file the run config names (recorded
    in the run's tags)."""
    from assets.definitions import defs

    instance = instance or get_instance()
    if uses_database_partitions(job_name):
        ensure_partitions(instance, [db_id])
    fail_orphaned_runs(instance, job_name)  # a killed earlier run is not left STARTED for ever (#45 item 5)
    return execute_in_process(
        defs.resolve_job_def(job_name),
        instance,
        partition_key=db_id,
        raise_on_error=raise_on_error,
        tags={**process_tags(), **configuration_tags(council_path=council_path), **(tags or {})},
        run_id=run_id,
        asset_selection=asset_selection,
        run_config={**(run_config or {}), "loggers": {"console": {"config": {"log_level": log_level}}}},
    )


def execute_in_process(job, instance: DagsterInstance, **kwargs):
    """``job.execute_in_process`` as the CLI runs it. That method runs the steps on Dagster's own
    in-process executor, not the job's, so the pool-wait fix the job's executor installs
    (:mod:`assets.shared.pool_wait`) is installed here too: without it a CLI run waiting for an LLM
    pool slot spun a core (measured: 24 s of CPU in a 53 s wait, #44)."""
    install_pool_wait()
    with partition_checks_cached(instance):
        return job.execute_in_process(instance=instance, **kwargs)


# The partitions known to exist in the runs executing on this thread (a nested run shares them).
_KNOWN_PARTITIONS: ContextVar[set[tuple[str, str]] | None] = ContextVar("known_partitions", default=None)
_CACHED_INSTANCES: dict[int, int] = {}  # id(instance) -> runs executing on it with the cache installed
_CACHED_LOCK = threading.Lock()


@contextmanager
def partition_checks_cached(instance: DagsterInstance) -> Iterator[None]:
    """While a run executes in this process, a partition the instance has said exists is taken to
    exist. Dagster asks the instance about the run's partition for every input and output of every
    step (~500 times in a small ABISS run), each question a new SQLite engine and connection: 12 % of
    a CLI run's CPU (#44). Only "yes" is remembered: a partition added during the run is still seen,
    and a run's own partition cannot be removed from under it (`quandary db remove` keeps its
    artifacts; a later run asks again). What is known belongs to the runs on this thread (the
    in-process executor runs every step on the caller's thread); the instance's method is shadowed
    while any run uses the cache and restored when the last one ends, in whatever order runs on
    other threads end."""
    with _CACHED_LOCK:
        if _CACHED_INSTANCES.get(id(instance), 0) == 0:
            asked = type(instance).has_dynamic_partition.__get__(instance)

            def has_dynamic_partition(partitions_def_name: str, partition_key: str) -> bool:
                known = _KNOWN_PARTITIONS.get()
                if known is not None and (partitions_def_name, partition_key) in known:
                    return True
                found = asked(partitions_def_name, partition_key)
                if found and known is not None:
                    known.add((partitions_def_name, partition_key))
                return found

            instance.has_dynamic_partition = has_dynamic_partition
        _CACHED_INSTANCES[id(instance)] = _CACHED_INSTANCES.get(id(instance), 0) + 1
    outer = _KNOWN_PARTITIONS.get()
    token = _KNOWN_PARTITIONS.set(outer if outer is not None else set())
    try:
        yield
    finally:
        _KNOWN_PARTITIONS.reset(token)
        with _CACHED_LOCK:
            _CACHED_INSTANCES[id(instance)] -= 1
            if _CACHED_INSTANCES[id(instance)] == 0:
                del _CACHED_INSTANCES[id(instance)]
                del instance.has_dynamic_partition


_RERUNNABLE = ("FAILURE", "CANCELED")


def latest_failed_run_id(instance: DagsterInstance, job_name: str, db_id: str | None) -> str:
    """The newest failed (or canceled) run of the job for the partition that no successful
    re-execution has fixed yet."""
    from dagster import DagsterRunStatus, RunsFilter

    tags = {"dagster/partition": db_id} if db_id else {}
    statuses = [DagsterRunStatus[s] for s in _RERUNNABLE]
    succeeded = instance.get_run_records(
        RunsFilter(job_name=job_name, statuses=[DagsterRunStatus.SUCCESS], tags=tags), limit=200
    )
    fixed = {r.dagster_run.parent_run_id for r in succeeded} | {r.dagster_run.root_run_id for r in succeeded}
    last_success = max((r.create_timestamp for r in succeeded), default=None)
    for record in instance.get_run_records(RunsFilter(job_name=job_name, statuses=statuses, tags=tags), limit=20):
        run = record.dagster_run
        if last_success is not None and record.create_timestamp < last_success:
            break  # a later run of the partition succeeded: older failures are moot
        if run.run_id not in fixed and (run.root_run_id is None or run.root_run_id not in fixed):
            return run.run_id
    where = f" for partition {db_id!r}" if db_id else ""
    raise LookupError(
        f"no failed run of {job_name}{where} left to re-execute in the Dagster instance {dagster_home()[0]}"
    )


def job_named(job_name: str):
    """The job definition by name: a module-level function, so re-execution can rebuild the job in
    another process (Dagster's ``build_reconstructable_job``)."""
    from assets.definitions import defs

    return defs.resolve_job_def(job_name)


def reexecute_from_failure(
    run_id: str | None = None,
    db_id: str | None = None,
    job_name: str | None = None,
    instance: DagsterInstance | None = None,
    log_level: str = "WARNING",
    announce=None,
    keep_env: bool = False,
):
    """Dagster's "re-execute from failure" for any job: only the failed steps and their downstream
    run again, with the configuration the run was started with: its run config (grid, resources)
    and the council and environment recorded in its tags (:func:`rerun_environment`; a difference
    raises :class:`ConfigurationMismatch`). ``announce(line)`` is told which configuration is reused;
    ``keep_env`` leaves the run's environment set in this process afterwards (the CLI, whose
    follow-up steps, e.g. the demo's interaction run, need the same council).

    Completed LLM calls are in the call cache, so the re-executed stages repeat none of them.
    """
    from dagster import ReexecutionOptions, build_reconstructable_job, execute_job

    from assets.cards import card_for
    from assets.shared.cards import council_path_of

    instance = instance or get_instance()
    job_name = card_for(job_name).name  # None: the main job; an unknown name: UnknownJob (a LookupError)
    fail_orphaned_runs(instance, job_name, db_id)  # killed runs become re-executable
    run_id = run_id or latest_failed_run_id(instance, job_name, db_id)
    parent = instance.get_run_by_id(run_id)
    if parent is None:
        raise LookupError(f"run {run_id} not found")
    if parent.job_name != job_name:
        raise LookupError(f"run {run_id} is a run of {parent.job_name}, not {job_name} (add --job {parent.job_name})")
    if parent.status.name not in _RERUNNABLE:
        raise LookupError(f"run {run_id} is {parent.status.name.lower()}, not failed: nothing to re-execute")
    adopt, line = rerun_environment(parent.tags, council_path_of(parent.run_config))
    if announce is not None:
        announce(line)
    options = ReexecutionOptions.from_failure(run_id, instance)
    run_config = {**parent.run_config, "loggers": {"console": {"config": {"log_level": log_level}}}}
    kept = {
        k: v
        for k, v in parent.tags.items()
        if k.startswith("dagster/partition") or k in (COUNCIL_TAG, ENV_TAG, COMMAND_TAG)
    }
    saved = {k: os.environ.get(k) for k in adopt}
    os.environ.update(adopt)  # the step processes inherit the run's environment
    try:
        with partition_checks_cached(instance):
            return execute_job(
                build_reconstructable_job("cli.runs", "job_named", reconstructable_args=(job_name,)),
                instance=instance,
                run_config=run_config,
                tags={**kept, **process_tags()},
                reexecution_options=options,
            )
    finally:
        if not keep_env:
            _restore_env(saved)


def _restore_env(saved: dict) -> None:
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def report_external_version(
    asset: str,
    partition: str,
    path: str,
    rows: int,
    content_hash: str,
    description: str,
    instance: DagsterInstance | None = None,
) -> bool:
    """Record an artifact written outside a run (e.g. `quandary import`) in the Dagster instance,
    so the UI's asset history shows where that version came from."""
    from dagster import AssetKey, AssetMaterialization, MetadataValue

    from assets.shared.io_manager import path_markdown, short_hash

    instance = instance or get_instance()
    ensure_partitions(instance, [partition])
    instance.report_runless_asset_event(
        AssetMaterialization(
            asset_key=AssetKey(asset),
            partition=partition,
            description=description,
            metadata={
                "path": path_markdown(path),
                "dagster/row_count": MetadataValue.int(rows),
                "content_hash": MetadataValue.text(short_hash(content_hash)),
            },
            tags={"dagster/data_version": content_hash},
        )
    )
    return True
