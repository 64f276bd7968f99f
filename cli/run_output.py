"""How a finished CLI run is reported, shared by every job command: check results, the failing
step in one line, the resume command, interrupts (Ctrl-C / SIGTERM), and the run summary."""

import os
import sys


def check_lines(result) -> list[str]:
    """Checks as results: a failed WARN check is a warning with its summary (which stage left which
    bound, by how much); a failed ERROR check is a failure."""
    lines = []
    for event in result.get_asset_check_evaluations():
        name = f"{event.asset_key.to_user_string()}.{event.check_name}"
        if event.passed:
            lines.append(f"  check {name:<44} passed")
            continue
        summary = event.metadata.get("summary")
        detail = f": {summary.value}" if summary is not None else ""
        if event.severity.name == "WARN":
            lines.append(f"  warning {name}{detail}")
        else:
            lines.append(f"  check {name:<44} FAILED{detail}")
    return lines


def print_run_summary(result, db_id: str, verbose: bool = False) -> None:
    """What `quandary run` prints after a run of the main job (and `quandary rerun` after resuming
    one): materializations, checks, then the job card's summary (funnel, dataset size), or the
    failure and resume line."""
    from assets.cards import MAIN

    status = "succeeded" if result.success else "FAILED"
    print(f"run {result.run_id[:8]} for partition '{db_id}': {status}")
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization
        rows = mat.metadata.get("dagster/row_count")
        n = rows.value if rows is not None else "?"
        print(f"  materialized {mat.asset_key.to_user_string():<28} rows={n}")
    for line in check_lines(result):
        print(line)
    if not result.success:
        print_failure(result, resume_command(MAIN.name, db_id), verbose)
        return
    for line in MAIN.summary(result, db_id):
        print(line)


def _error_message(error) -> str:
    """The message the failing step's exception carried, without Dagster's wrapper and class path."""
    # Dagster wraps the step's own exception (and an IO manager's: "Error occurred while handling
    # output ..."): show the cause, e.g. the StorageError naming EROFS / ENOSPC and the file
    wrappers = (
        "DagsterExecutionStepExecutionError",
        "DagsterExecutionHandleOutputError",
        "DagsterExecutionLoadInputError",
    )
    while error is not None and error.cause is not None and any(w in (error.cls_name or "") for w in wrappers):
        error = error.cause
    if error is None:
        return "unknown error"
    message = error.message.strip()
    prefix = f"{error.cls_name}: " if error.cls_name else ""
    for p in (prefix, f"dagster._core.definitions.events.{prefix}"):
        if p and message.startswith(p) and error.cls_name in ("Failure", "DagsterExecutionInterruptedError"):
            message = message[len(p) :]
    return " ".join(message.split()) if len(message) < 400 else " ".join(message[:400].split()) + " …"


def resume_command(job_name: str, partition: str) -> str:
    """What a user types to resume a failed or interrupted run of ``job_name`` for ``partition``."""
    from assets.cards import MAIN, card_for

    if job_name == MAIN.name:
        return f"quandary rerun --db {partition}"
    if not partition:  # an unpartitioned job (aisql evaluate): no empty --partition to type
        return f"quandary rerun --job {job_name}"
    flag = "--db" if card_for(job_name).database_partitions else "--partition"
    return f"quandary rerun --job {job_name} {flag} {partition}"


def main_job_name() -> str:
    from assets.cards import MAIN

    return MAIN.name


def first_failure(result) -> str:
    """The first failing step and its message, in one line (for tables of several runs)."""
    for event in result.all_events:
        if event.is_step_failure:
            return f"{event.step_key}: {_error_message(event.event_specific_data.error)}"
    return "the run failed before any step ran"


def print_failure(result, resume: str, verbose: bool = False) -> None:
    """A failed run in three lines: the failing step(s) with their message, what is kept, how to
    resume (``resume``: the command, from :func:`resume_command`).
    Dagster's stack traces stay in the run log (UI) and are printed with ``--verbose``."""
    failures = [e for e in result.all_events if e.is_step_failure]
    for event in failures:
        error = event.event_specific_data.error
        print(f"  step {event.step_key} failed: {_error_message(error)}", file=sys.stderr)
        if verbose and error is not None:
            print(error.to_string(), file=sys.stderr)
    if not failures:
        print("  the run failed before any step ran (see the run log in the UI, or --verbose)", file=sys.stderr)
    print(f"  completed steps and LLM calls are kept; resume with: {resume}", file=sys.stderr)
    if not verbose:
        print("  (stack traces: add --verbose, or open the run in the UI)", file=sys.stderr)


def interrupted_line(run_id: str, resume: str) -> str:
    return f"interrupted: run {run_id[:8]} stopped; completed steps and LLM calls are kept. Resume with: {resume}"


def use_terminal_for_progress() -> None:
    """Progress goes to a duplicate of this process's stdout: Dagster points fd 1 at its compute-log
    files while a step runs, which would hide the live bar from the terminal."""
    from resources import progress

    try:
        stream = open(os.dup(sys.stdout.fileno()), "w", buffering=1, closefd=True)
    except (OSError, ValueError, AttributeError):  # stdout replaced (tests) or closed
        return
    progress.set_default_stream(stream)


class TerminateAsInterrupt:
    """SIGTERM while a command works is handled like Ctrl-C: it stops cleanly and says so. Ctrl-C
    gets the same Python handler (unless SIGINT is ignored, e.g. a background job): Python's
    built-in ``default_int_handler`` was seen not to wake a main thread waiting on a council call's
    future (`council check` hung on Ctrl-C while SIGTERM ended it), a Python function does."""

    def __enter__(self):
        import signal

        def handler(signum, frame):
            raise KeyboardInterrupt

        self._old = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            if sig == signal.SIGINT and signal.getsignal(sig) is not signal.default_int_handler:
                continue  # ignored (or already handled by the caller): leave it
            try:
                self._old[sig] = signal.signal(sig, handler)
            except ValueError:  # not the main thread
                pass
        return self

    def __exit__(self, *exc):
        import signal

        for sig, old in self._old.items():
            signal.signal(sig, old)


class _OwnGroupSubprocess:
    """``subprocess`` for Dagster's compute-log mirror, whose children start in their own process
    group (Popen ``process_group=0``)."""

    def __getattr__(self, name):
        import subprocess

        return getattr(subprocess, name)

    @staticmethod
    def Popen(*args, **kwargs):  # noqa: N802 - subprocess's name
        import subprocess

        kwargs.setdefault("process_group", 0)
        return subprocess.Popen(*args, **kwargs)


def quiet_interrupts(verbose: bool = False) -> None:
    """One line on Ctrl-C, nothing else (#31 item 6). A terminal's Ctrl-C reaches the whole
    foreground process group: Dagster's compute-log mirror (a ``tail`` and a Python watcher it
    starts per step) got it too and the watcher printed a KeyboardInterrupt traceback. Started in
    their own process group they do not; this process stops them as every step ends (and the
    watcher ends the tail if this process dies). SQLAlchemy's pool logs a traceback when an
    interrupt lands while it resets a connection: not the user's concern, shown with --verbose."""
    import logging

    try:
        from dagster._core.execution import compute_logs  # lazy: dagster is slow to import
    except ImportError:
        compute_logs = None
    if compute_logs is not None and hasattr(compute_logs, "subprocess"):
        compute_logs.subprocess = _OwnGroupSubprocess()
    if not verbose:
        logging.getLogger("sqlalchemy.pool").setLevel(logging.CRITICAL)


def _mark_canceled(run_id: str) -> None:
    """The interrupted run reads CANCELED, as a termination from the UI does (#42 item 4): marked
    once the run has stopped, never from the signal handler — database work inside a handler that
    interrupted the run's own database or HTTP calls left the process hanging at exit with the
    embedded model (a test caught it 1 time in 2)."""
    from cli.runs import get_instance, mark_run_canceled

    try:
        mark_run_canceled(get_instance(), run_id)
    except Exception:  # noqa: BLE001 - the interrupt line still prints; the run then reads as failed
        pass


def execute_cli_run(start, resume: str, verbose: bool = False, name_instance: bool = True):
    """Run ``start(run_id, log_level)`` (a run or a re-execution) the way every CLI run looks: the
    instance named first, progress while it works, one line on Ctrl-C or SIGTERM naming ``resume``
    (the command that resumes). Returns the result, or 130 when interrupted. ``name_instance=False``
    for the second and later runs of one command."""
    import uuid

    from cli.runs import describe_instance

    if name_instance:
        print(describe_instance())
    use_terminal_for_progress()
    quiet_interrupts(verbose)
    run_id = str(uuid.uuid4())
    with TerminateAsInterrupt():
        try:
            # Dagster's console log shows step failures as stack traces: only with --verbose
            result = start(run_id, "ERROR" if verbose else "CRITICAL")
        except KeyboardInterrupt:
            _mark_canceled(run_id)
            print(f"\n{interrupted_line(run_id, resume)}", file=sys.stderr)
            return 130
    if result is not None and was_interrupted(result):
        _mark_canceled(result.run_id)
        print(f"\n{interrupted_line(result.run_id, resume)}", file=sys.stderr)
        return 130
    return result


def check_job_request(job_name: str, partition: str, run_config: dict | None, council_path: str | None) -> None:
    """What every job command checks before its run exists: the job card's own option checks and
    that every council member has its API key (environment only, no network). PreflightError."""
    from assets.cards import card_for
    from assets.shared.preflight import check_council, check_keys

    card_for(job_name).preflight(partition, run_config, council_path)
    check_keys(check_council(council_path))


def refused(job_name: str, partitions: list[str], run_config: dict | None, council_path: str | None = None) -> int:
    """:func:`check_job_request` for every partition a command will run, before the first run
    exists: 0 when all pass, else the one-line reason on stderr and exit code 2 (#42 item 1)."""
    from assets.shared.preflight import PreflightError

    try:
        for partition in partitions:
            check_job_request(job_name, partition, run_config, council_path)
    except PreflightError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    return 0


def run_cli_job(
    job_name: str,
    partition: str,
    run_config: dict | None = None,
    verbose: bool = False,
    asset_selection=None,
    name_instance: bool = True,
    tags: dict | None = None,
    council_path: str | None = None,
):
    """Run ``job_name`` for one partition from a CLI command (see :func:`execute_cli_run`); every job's
    command goes through here. ``council_path``: the council file resolved at the command's edge,
    handed to the run as its council resource's config (None: the run config's, else the default).
    Returns the result, or 130 when interrupted."""
    from assets.shared.cards import council_config, merge_configs
    from assets.shared.preflight import PreflightError
    from cli.run_plan import print_plan
    from cli.runs import run_job_for_partition
    from resources.llm.config import CouncilFileNotFound, resolve_council_path

    try:  # a missing council file, a bad option or a missing key is one line before a run exists
        resolved = resolve_council_path(council_path)
        check_job_request(job_name, partition, run_config, str(resolved) if resolved else None)
    except (CouncilFileNotFound, PreflightError) as exc:
        print(str(exc), file=sys.stderr)
        return 2
    if council_path is not None:
        # a council the command chose (the demo's) goes to the run as a value, in its run config;
        # one from $QUANDARY_COUNCIL_CONFIG is the run's default (the resource resolves it the same
        # way), and the launch check keeps config_path values under the project
        council_path = str(resolved)
        run_config = merge_configs(run_config or {}, council_config(council_path))

    def start(run_id, level):
        # what it will cost, before the first step (#24 item 4)
        print_plan(job_name, partition, run_config, council_path)
        return run_job_for_partition(
            job_name,
            partition,
            run_config=run_config,
            run_id=run_id,
            log_level=level,
            asset_selection=asset_selection,
            tags=tags,
            council_path=council_path,
        )

    return execute_cli_run(start, resume_command(job_name, partition), verbose, name_instance)


def report_job_result(result, job_name: str, partition: str, verbose: bool = False) -> int:
    """The end of every job command: failed checks as warnings or failures, and for a failed run
    the failing steps and the resume command. Returns the exit code (0, 1, or 130 passed through)."""
    if isinstance(result, int):
        return result
    for line in check_lines(result):
        if not line.endswith(" passed"):
            print(line, file=sys.stderr)
    if not result.success:
        print_failure(result, resume_command(job_name, partition), verbose)
        return 1
    return 0


_INTERRUPT_ERRORS = ("DagsterExecutionInterruptedError", "KeyboardInterrupt")


def was_interrupted(result) -> bool:
    """Dagster turns Ctrl-C inside a step into a failed step (and a failed run) instead of raising."""
    for event in result.all_events:
        if event.is_step_failure:
            error = event.event_specific_data.error
            while error is not None:
                if error.cls_name in _INTERRUPT_ERRORS:
                    return True
                error = error.cause
    return False


def run_job(
    job: str,
    db_id: str,
    grid: dict | None = None,
    verbose: bool = False,
    tags: dict | None = None,
    council_path: str | None = None,
) -> int:
    """`quandary run` / `demo`: the job's card builds the run config (the grid is the main job's)."""
    from assets.cards import MAIN, card_for

    card = card_for(job)
    run_config = card.config(grid=grid) if card is MAIN else card.config()
    result = run_cli_job(job, db_id, run_config, verbose, tags=tags, council_path=council_path)
    if isinstance(result, int):
        return result
    print_run_summary(result, db_id, verbose)
    return 0 if result.success else 1


def materialization_metadata(result, asset: str) -> dict:
    """The metadata values ``asset``'s materialization in ``result`` carried ({} when it has none)."""
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization
        if mat.asset_key.to_user_string() == asset:
            return {k: getattr(v, "value", v) for k, v in mat.metadata.items()}
    return {}
