"""`quandary demo` and `quandary run`: execute jobs headless on the project's Dagster instance."""

import os
import sys
from pathlib import Path

from pipelines.demo_db import DEMO_DB_ID, write_demo_db
from pipelines.paths import databases_dir
from resources.catalog import Catalog


# A small grid so the demo finishes in minutes on 2 cores with the embedded model: every
# subcategory once from the programmatic builder, three from the embedded LLM generator.
DEMO_GRID = {"styles": ["formal"], "difficulties": ["moderate"], "n": 1, "seed": 42,
             "llm_subcategories": ["answerable", "lexical_overlap", "missing_entity"]}
DEMO_COUNCIL = Path(__file__).resolve().parents[2] / "configs" / "demo-council.yaml"


def grid_run_config(grid: dict | None) -> dict:
    return {"ops": {"generation_requests": {"config": grid}}} if grid else {}


def _print_funnel(result) -> None:
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization
        if mat.asset_key.to_user_string() == "rejection_report" and "funnel" in mat.metadata:
            print("\nvalidation funnel:")
            print(mat.metadata["funnel"].value.strip("`\n"))
        if mat.asset_key.to_user_string() == "dataset":
            q = mat.metadata.get("questions")
            print(f"\nvalidated questions in dataset: {q.value if q is not None else '?'}")


def _print_run_summary(result, db_id: str) -> None:
    from storage.audit import open_audit

    status = "succeeded" if result.success else "FAILED"
    print(f"run {result.run_id[:8]} for partition '{db_id}': {status}")
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization
        rows = mat.metadata.get("dagster/row_count")
        n = rows.value if rows is not None else "?"
        print(f"  materialized {mat.asset_key.to_user_string():<28} rows={n}")
    for event in result.get_asset_check_evaluations():
        print(f"  check {event.asset_key.to_user_string()}.{event.check_name:<28} "
              f"{'passed' if event.passed else 'FAILED'}")
    _print_funnel(result)
    import duckdb

    con = open_audit()
    try:
        try:  # a damaged artifact was skipped (and named) by open_audit: the summary goes on
            row = con.execute(
                "SELECT n_tables, total_rows, n_foreign_keys FROM seed_databases WHERE db_id = ?", [db_id]
            ).fetchall()
        except duckdb.Error:
            row = []
        if row:
            print(f"  database {db_id}: {row[0][0]} tables, {row[0][1]} rows, {row[0][2]} foreign keys")
    finally:
        con.close()


def _run_job(job: str, db_id: str, grid: dict | None = None) -> int:
    from assets.runner import run_job_for_partition
    from pipelines.definitions import MAIN_JOB

    run_config = grid_run_config(grid) if job == MAIN_JOB else {}
    result = run_job_for_partition(job, db_id, run_config=run_config)
    _print_run_summary(result, db_id)
    return 0 if result.success else 1


def _demo(args) -> int:
    from pipelines.definitions import MAIN_JOB

    if not os.environ.get("QUANDARY_COUNCIL_CONFIG") and DEMO_COUNCIL.is_file():
        # one embedded validator instead of three: the demo stays within minutes on 2 cores
        os.environ["QUANDARY_COUNCIL_CONFIG"] = str(DEMO_COUNCIL)
        print(f"council: {DEMO_COUNCIL.name} (embedded SmolLM2; set QUANDARY_COUNCIL_CONFIG to change)")
    path = write_demo_db(databases_dir() / f"{DEMO_DB_ID}.sqlite")
    info = Catalog().register(path, DEMO_DB_ID)
    print(f"demo database '{info.db_id}' registered: {len(info.tables)} tables, {info.total_rows} rows ({path})")
    return _run_job(args.job or MAIN_JOB, DEMO_DB_ID, DEMO_GRID)


def _run(args) -> int:
    from pipelines.definitions import MAIN_JOB

    if args.db not in Catalog().ids():
        print(f"database {args.db!r} is not registered; use `quandary db register`", file=sys.stderr)
        return 2
    grid = None
    if args.grid:
        try:
            grid = load_grid(args.grid)
        except ValueError as exc:
            print(f"bad grid file {args.grid}: {exc}", file=sys.stderr)
            return 2
    return _run_job(args.job or MAIN_JOB, args.db, grid)


def load_grid(path: str) -> dict:
    """A grid YAML file as GridConfig fields; ValueError with the reason when it is not one."""
    import yaml

    from pipelines.abiss.grid import GRID_FIELDS

    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ValueError(str(exc).splitlines()[0]) from None
    if not isinstance(data, dict):
        raise ValueError("expected a mapping of GridConfig fields (e.g. styles: [formal])")
    unknown = sorted(set(data) - set(GRID_FIELDS))
    if unknown:
        raise ValueError(f"unknown field(s) {unknown}; known: {', '.join(GRID_FIELDS)}")
    return data


def register(sub) -> None:
    d = sub.add_parser("demo", help="build + register the demo university database and run the main job")
    d.add_argument("--job", help="job to run (default: the main job)")
    d.set_defaults(func=_demo)
    r = sub.add_parser("run", help="run a job for one registered database (partition)")
    r.add_argument("--db", required=True, help="registered db_id")
    r.add_argument("--job", help="job to run (default: the main job)")
    r.add_argument("--grid", help="YAML file with the generation grid (GridConfig fields); default: the paper's grid")
    r.set_defaults(func=_run)
