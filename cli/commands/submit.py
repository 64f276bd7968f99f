"""`quandary submit`: put runs on the Dagster instance's run queue, one per database (issue 21)."""

import sys


def _submit(args) -> int:
    from assets.cards import MAIN, UnknownJob, card_for
    from assets.shared.preflight import PreflightError, check_run_request
    from cli.queued_runs import NoRunQueueError, submit_job_for_partition
    from cli.runs import describe_instance

    try:
        card = card_for(args.job)
    except UnknownJob as exc:
        print(str(exc), file=sys.stderr)
        return 2
    job = card.name
    try:
        grid = check_run_request(args.db, args.grid)
    except PreflightError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    print(describe_instance())
    run_config = card.config(grid=grid) if card is MAIN else card.config()
    for db in args.db:
        try:
            run = submit_job_for_partition(job, db, run_config=run_config)
        except NoRunQueueError as exc:
            print(str(exc), file=sys.stderr)
            return 2
        print(f"queued {job} for {db}: run {run.run_id} ({run.status.name.lower()})")
    print("a Dagster daemon launches queued runs (`make ui` runs one; a deployment runs `dagster-daemon run`)")
    return 0


def register(sub) -> None:
    s = sub.add_parser("submit", help="put runs on the Dagster run queue (one per database) for the daemon to launch")
    s.add_argument("--job", help="job to run (default: the main job)")
    s.add_argument("--db", required=True, nargs="+", metavar="ID", help="registered db_id(s): one run each")
    s.add_argument("--grid", help="YAML file with the generation grid (GridConfig fields); default: the paper's grid")
    s.set_defaults(func=_submit)
