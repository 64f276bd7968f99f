"""ABISS dataset commands: `audit question`, `export`, `import`, `rerun`."""

import sys

from cli.output import render_table
from pipelines.abiss.outputs import IMPORTED_ASSET

ABISS_RECORD_ASSETS = ("dataset", IMPORTED_ASSET)


def _export(args) -> int:
    from pathlib import Path

    import polars as pl

    from cli.exports import export_frame
    from resources.catalog import Catalog
    from storage.audit import list_views, open_audit, query_frame

    if args.db and args.db not in Catalog().ids():
        known = ", ".join(Catalog().ids()) or "none"
        print(f"database {args.db!r} is not registered (registered: {known}); nothing exported", file=sys.stderr)
        return 2
    asset = args.asset
    if args.format == "abiss-json" and asset not in ABISS_RECORD_ASSETS:
        print(
            f"--format abiss-json writes ABISS records ({', '.join(ABISS_RECORD_ASSETS)}); "
            f"use --format hf for {asset!r}",
            file=sys.stderr,
        )
        return 2
    con = open_audit()
    try:
        views = [v for v in list_views(con) if v != "llm_calls"]
        if asset not in views:
            hint = (
                "run the ABISS job first"
                if asset == "dataset"
                else f"materialized: {', '.join(views) or 'nothing yet'}"
            )
            print(f"no {asset} materialized yet; {hint}", file=sys.stderr)
            return 1
        # typed from the stored Parquet (a row-wise rebuild would type an all-null column as Null)
        try:
            df = export_frame(asset, query_frame(con, f'SELECT * FROM "{asset}"'))
        except pl.exceptions.PolarsError as exc:  # a stored column whose values do not fit the format
            print(f"cannot export {asset}: {' '.join(str(exc).split())[:300]}", file=sys.stderr)
            return 1
        if args.db:
            if "db_id" not in df.columns:
                print(f"{asset} has no db_id column; leave out --db", file=sys.stderr)
                return 2
            df = df.filter(pl.col("db_id") == args.db)
        if args.db and df.height == 0:
            print(
                f"no {asset} materialized for {args.db!r} yet; run `quandary run --db {args.db}` first", file=sys.stderr
            )
            return 1
        card = None
        if args.format == "hf":
            from cli.exports import card_for

            card = card_for(con, asset, df, args.license)
    finally:
        con.close()
    out = Path(args.path)
    try:
        if args.format == "hf":
            from storage.hf_export import splits_of, write_hf_dataset

            counts = write_hf_dataset(out, splits_of(df), card)
            print(
                f"wrote {sum(counts.values())} rows of {asset} to {out}/data ("
                + ", ".join(f"{s}: {n}" for s, n in counts.items())
                + f") with a dataset card {out}/README.md"
            )
            return 0
        from pipelines.abiss.outputs import write_abiss_json

        out.parent.mkdir(parents=True, exist_ok=True)
        n = write_abiss_json(df, out)
    except OSError as exc:
        print(f"cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"wrote {n} records to {out}")
    return 0


IMPORT_FORMATS = (
    "import reads ABISS JSON files only: a JSON list of records each, as `quandary export` writes them "
    "(not a folder, Parquet or CSV)"
)


def _format_hint(path: str) -> str:
    """The accepted formats, when the file given is not a .json one (#31 item 5)."""
    from pathlib import Path

    p = Path(path)
    return "" if p.suffix.lower() == ".json" and not p.is_dir() else f" — {IMPORT_FORMATS}"


IMPORT_PREFIX = "imported_"  # assets meant for imports: no job defines or reads one as its own


def import_target_error(asset: str, replace: bool) -> str | None:
    """Why ``quandary import`` must not write ``asset`` (one line), or None (issue 34 item 3).

    Import writes only to assets meant for imports — ``imported_dataset`` (the default) or another
    ``imported_<name>`` — or, with ``--replace``, to the ABISS ``dataset``. Any other name could be a
    job's own artifact (``interaction_conversations``, ``aisql_verdicts``, ``ambitab_records``, …):
    a new version there would move that asset's LATEST under its readers."""
    if asset == "dataset":
        if replace:
            return None
        # a new `dataset` version would replace the pipeline's own and cut it off from its audit trail
        return (
            f"refusing to replace the pipeline's 'dataset' (its stage decisions and votes would no longer "
            f"match it); import into '{IMPORTED_ASSET}' (the default), or pass --replace"
        )
    if asset.startswith(IMPORT_PREFIX) and len(asset) > len(IMPORT_PREFIX):
        return None
    return (
        f"refusing to import into {asset!r}: import writes only to '{IMPORTED_ASSET}' (the default), another "
        f"'{IMPORT_PREFIX}<name>' asset, or 'dataset' with --replace"
    )


def _import(args) -> int:
    if (refusal := import_target_error(args.asset, args.replace)) is not None:
        print(refusal, file=sys.stderr)
        return 2
    from storage.paths import UnsafePathError, path_segment

    try:
        path_segment(args.asset, "--asset")
    except UnsafePathError as exc:
        print(f"cannot import {args.paths[0]}: {exc}", file=sys.stderr)
        return 2
    from pipelines.abiss.importing import ImportFileError, import_abiss_files
    from storage.faults import StorageError, storage_message

    try:
        versions = import_abiss_files(args.paths, args.asset)
    except ImportFileError as exc:
        print(f"cannot import {exc.path}: {exc}; nothing imported{_format_hint(exc.path)}", file=sys.stderr)
        return 1
    except StorageError as exc:
        print(f"cannot import: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # the staging folder under QUANDARY_HOME
        print(
            f"cannot import: {storage_message(exc, exc.filename or 'QUANDARY_HOME', 'staging folder')}", file=sys.stderr
        )
        return 1
    from cli.runs import get_instance, report_external_version

    source = args.paths[0] if len(args.paths) == 1 else f"{args.paths[0]} and {len(args.paths) - 1} more files"
    from storage.faults import storage_cause

    try:
        instance = get_instance()  # once: opening it costs ~0.5 s, and a file may hold dozens of databases
    except Exception as exc:  # a full or read-only disk under DAGSTER_HOME
        if storage_cause(exc) is None:
            raise
        instance = None
        print(f"warning: {storage_message(exc, 'DAGSTER_HOME', 'Dagster instance')}", file=sys.stderr)
    for version in versions:
        try:
            reported = instance is not None and report_external_version(
                args.asset,
                version.partition,
                str(version.path),
                version.row_count,
                version.content_hash,
                f"imported from {source}",
                instance=instance,
            )
        except Exception as exc:  # the artifact is stored; only the instance's record of it failed
            if storage_cause(exc) is None:
                raise
            reported = False
            print(
                f"warning: the import is stored but not recorded in the Dagster instance: "
                f"{storage_message(exc, 'DAGSTER_HOME', 'Dagster instance')}",
                file=sys.stderr,
            )
        where = " (recorded in the Dagster instance)" if reported else ""
        print(
            f"imported {version.row_count} records for {version.partition} → {args.asset} "
            f"({'replacing the pipeline dataset' if args.asset == 'dataset' else 'an import-only asset'}, "
            f"{str(version.path).rsplit('/', 1)[-1]}){where}"
        )
    return 0


def _rerun(args) -> int:
    from cli.run_output import check_lines, execute_cli_run, print_failure, resume_command
    from cli.runs import COMMAND_TAG, reexecute_from_failure

    lookup_error = []

    def start(run_id, level):
        try:
            return reexecute_from_failure(
                args.run_id, db_id=args.db, job_name=args.job, log_level=level, announce=print, keep_env=True
            )
        except LookupError as exc:  # no such run, or another configuration (ConfigurationMismatch)
            lookup_error.append(str(exc))
            return None

    from assets.cards import MAIN, UnknownJob, card_for

    try:
        card = card_for(args.job)
    except UnknownJob as exc:
        print(str(exc), file=sys.stderr)
        return 2  # a usage error, as `run --job` says it
    job = card.name
    resume = resume_command(job, args.db or "ID")
    result = execute_cli_run(start, resume, args.verbose)
    if isinstance(result, int):
        return result
    if result is None:
        print(lookup_error[0], file=sys.stderr)
        return 1
    partition = result.dagster_run.tags.get("dagster/partition", args.db or "?")
    print(f"re-executed run {result.run_id[:8]} from failure: {'succeeded' if result.success else 'FAILED'}")
    if card is MAIN:
        # the summary the command that started the run prints: funnel, dataset size (and the demo's Table 4)
        from cli.run_output import print_run_summary

        print_run_summary(result, partition, args.verbose)
        if result.success and result.dagster_run.tags.get(COMMAND_TAG) == "demo":
            from assets.shared.cards import council_path_of
            from cli.interaction_runs import demo_interaction

            return demo_interaction(partition, args.verbose, council_path_of(result.dagster_run.run_config))
        return 0 if result.success else 1
    steps = sorted({e.step_key for e in result.all_events if e.is_step_success and e.step_key})
    print(render_table(["step"], [[s] for s in steps]) if steps else "(no steps ran)")
    for line in check_lines(result):
        print(line)
    if not result.success:
        print_failure(result, resume_command(job, partition), args.verbose)
    else:
        for line in card.summary(result, partition):
            print(line)
    return 0 if result.success else 1


def register(sub) -> None:
    e = sub.add_parser("export", help="write a dataset-like table in a reference layout (ABISS JSON, Hugging Face)")
    e.add_argument("path", help="the file (abiss-json) or folder (hf) to write")
    e.add_argument(
        "--asset",
        default="dataset",
        help=f"the stored table to export (default: dataset; e.g. {IMPORTED_ASSET}, ambitab_records, "
        "interaction_conversations, interaction_metrics, aisql_verdicts)",
    )
    e.add_argument(
        "--format",
        choices=["abiss-json", "hf"],
        default="abiss-json",
        help="abiss-json: the ABISS reference file; hf: Parquet per split + README.md dataset card",
    )
    e.add_argument("--db", help="only this database")
    e.add_argument("--license", help="licence for the dataset card (default: the source's, where known)")
    e.set_defaults(func=_export)

    i = sub.add_parser("import", help="read ABISS JSON files into a dataset artifact")
    i.add_argument(
        "paths",
        nargs="+",
        metavar="path",
        help="ABISS JSON files (a list of records each); several are one import: nothing is stored "
        "unless every record of every file is valid",
    )
    i.add_argument(
        "--asset",
        default=IMPORTED_ASSET,
        help=f"artifact name to write: {IMPORTED_ASSET} (default) or another {IMPORT_PREFIX}<name>; 'dataset' needs --replace",
    )
    i.add_argument(
        "--replace",
        action="store_true",
        help="allow --asset dataset: replace the pipeline's dataset version with the file's records",
    )
    i.set_defaults(func=_import)

    r = sub.add_parser("rerun", help="re-execute a failed run from failure (only failed steps and downstream)")
    r.add_argument("--run-id", help="the failed run (default: the latest failed run of the job for --db)")
    r.add_argument(
        "--db",
        "--partition",
        dest="db",
        metavar="ID",
        help="partition of the failed run to look up (a database id; a scenario or corpus for those jobs)",
    )
    r.add_argument(
        "--job",
        default=None,
        help="job name (default: the main job; an unknown name lists the jobs)",
    )
    r.add_argument("--verbose", action="store_true", help="print Dagster's log and stack traces on failure")
    r.set_defaults(func=_rerun)
