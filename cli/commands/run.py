"""`quandary demo` and `quandary run`: execute jobs headless on the project's Dagster instance."""

import sys
from pathlib import Path

from cli.run_output import run_job
from pipelines.abiss.demo_db import DEMO_DB_ID, write_demo_db
from resources.catalog import Catalog
from storage.paths import databases_dir

# A small grid so the demo finishes in minutes on 2 cores with the embedded model: every
# subcategory once from the programmatic builder, three from the embedded LLM generator.
DEMO_GRID = {
    "styles": ["formal"],
    "difficulties": ["moderate"],
    "n": 1,
    "seed": 42,
    "llm_subcategories": ["answerable", "lexical_overlap", "missing_entity"],
}
DEMO_COUNCIL = Path(__file__).resolve().parents[2] / "configs" / "demo-council.yaml"


def _demo(args) -> int:
    from resources.llm.config import CONFIG_ENV, CouncilFileNotFound, resolve_council_path

    try:
        # one embedded validator instead of three: the demo stays within minutes on 2 cores
        council = resolve_council_path(None, default=DEMO_COUNCIL if DEMO_COUNCIL.is_file() else None)
    except CouncilFileNotFound as exc:
        print(str(exc), file=sys.stderr)
        return 2
    if council == DEMO_COUNCIL:
        print(f"council: {DEMO_COUNCIL.name} (embedded SmolLM2; set {CONFIG_ENV} to change)")
    council_path = str(council) if council else None
    path = write_demo_db(databases_dir() / f"{DEMO_DB_ID}.sqlite")
    info = Catalog().register(path, DEMO_DB_ID)
    print(f"demo database '{info.db_id}' registered: {len(info.tables)} tables, {info.total_rows} rows ({path})")
    from assets.cards import card_for
    from cli.runs import COMMAND_TAG

    job = card_for(args.job).name
    code = run_job(job, DEMO_DB_ID, DEMO_GRID, args.verbose, tags={COMMAND_TAG: "demo"}, council_path=council_path)
    from cli.interaction_runs import demo_interaction  # ABISS §5 step of the demo

    return code or (demo_interaction(DEMO_DB_ID, args.verbose, council_path) if not args.job else 0)


def _run(args) -> int:
    from assets.cards import UnknownJob, card_for
    from assets.shared.preflight import PreflightError, check_run_request

    try:
        job = card_for(args.job).name
        grid = check_run_request([args.db], args.grid)
    except (PreflightError, UnknownJob) as exc:
        print(str(exc), file=sys.stderr)
        return 2
    return run_job(job, args.db, grid, args.verbose)


def register(sub) -> None:
    d = sub.add_parser("demo", help="build + register the demo university database and run the main job")
    d.add_argument("--job", help="job to run (default: the main job)")
    d.add_argument("--verbose", action="store_true", help="print Dagster's log and stack traces on failure")
    d.set_defaults(func=_demo)
    r = sub.add_parser("run", help="run a job for one registered database (partition)")
    r.add_argument("--db", required=True, help="registered db_id")
    r.add_argument("--job", help="job to run (default: the main job)")
    r.add_argument("--grid", help="YAML file with the generation grid (GridConfig fields); default: the paper's grid")
    r.add_argument("--verbose", action="store_true", help="print Dagster's log and stack traces on failure")
    r.set_defaults(func=_run)
