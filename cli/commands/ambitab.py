"""`quandary ambitab build | show | export | rejects`: the AmbiTab corpus from the command line."""

import json
import sys
from pathlib import Path

from cli.output import render_table

VIEWS = ("asker", "solver", "oracle", "verifier")


def _build(args) -> int:
    from assets.ambitab.card import CORPUS_CARD, corpus_metadata
    from cli.run_output import first_failure, refused, resume_command, run_cli_job
    from pipelines.ambitab.corpora import available, default_data_root
    from pipelines.ambitab.record import CORPORA
    from storage.paths import relative_note, user_path

    corpora = [args.corpus] if args.corpus else available()
    if args.corpus and args.corpus not in CORPORA:
        print(f"unknown corpus {args.corpus!r}; expected one of {', '.join(CORPORA)}", file=sys.stderr)
        return 2
    data_root = user_path(args.data) if args.data else default_data_root()
    if not data_root.is_dir():
        where = relative_note(args.data) if args.data else " (the default; pass --data or set QUANDARY_AMBITAB_DATA)"
        print(f"data folder {data_root} not found{where}", file=sys.stderr)
        return 2
    from storage.paths import allow_data_root

    # runs read only the project's roots (issue 34 item 5): the folder this user named is allowed
    run_config = CORPUS_CARD.config(
        data_root=str(allow_data_root(data_root)),
        seed=args.seed,
        llm_steps="off" if args.no_llm else args.llm,
        max_rows=args.max_rows,
        allow_malformed=args.allow_malformed,
    )
    if code := refused(CORPUS_CARD.name, corpora, run_config):  # every corpus's options first (#42 item 1)
        return code
    rows, failed = [], 0
    for i, corpus in enumerate(corpora, 1):
        print(f"[{i}/{len(corpora)}] building {corpus} ...", flush=True)
        result = run_cli_job(CORPUS_CARD.name, corpus, run_config, args.verbose, name_instance=i == 1)
        if isinstance(result, int):
            return result  # interrupted: the corpora built so far are kept
        if not result.success:
            failed += 1
            msg = first_failure(result)
            print(f"  {corpus}: FAILED — {msg}", file=sys.stderr)
            print(f"  resume with: {resume_command(CORPUS_CARD.name, corpus)}", file=sys.stderr)
            rows.append((corpus, "failed", "", "", "", msg[:60]))
            continue
        meta = corpus_metadata(result)
        checks = _check_summary(result)
        skipped = meta.get("skipped_steps") or []
        rows.append((corpus, meta.get("records"), meta.get("avts"), meta.get("rejects"), len(skipped), checks))
        for s in skipped:
            print(f"  WARN {corpus}: skipped {s['step']} ({s['affected']} affected): {s['reason']}")
    print(render_table(["corpus", "records", "avts", "rejects", "skipped steps", "checks"], rows))
    return 1 if failed else 0


def _check_summary(result) -> str:
    evals = [e for e in result.get_asset_check_evaluations()]
    bad = [e.check_name for e in evals if not e.passed]
    return f"{len(evals) - len(bad)}/{len(evals)} passed" + (f" (failing: {', '.join(bad)})" if bad else "")


def _show(args) -> int:
    from pipelines.ambitab.export import find_record, materialized_corpora

    if not materialized_corpora():
        print("no AmbiTab records materialized yet; run `quandary ambitab build` first", file=sys.stderr)
        return 1
    try:
        record = find_record(args.record_id, [args.corpus] if args.corpus else None)
    except LookupError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    if record is None:
        print(f"no AmbiTab record {args.record_id!r}", file=sys.stderr)
        return 1
    kw = {}
    if args.view == "oracle" and args.sql_grounding is not None:
        kw["sql_grounding"] = args.sql_grounding == "on"
    view = record.view(args.view, **kw)
    data = view.model_dump(mode="json")
    if not args.full and "spec" in data and len(data["spec"].get("db_schema") or "") > 1500:
        data["spec"]["db_schema"] = data["spec"]["db_schema"][:1500] + " … (truncated; --full shows all)"
    print(f"# {args.view} view of {record.record_id} ({record.corpus})")
    print(json.dumps(data, indent=2, ensure_ascii=False))
    return 0


def _export(args) -> int:
    from pipelines.ambitab.export import export_dir, export_jsonl, materialized_corpora

    have = materialized_corpora()
    corpora = [args.corpus] if args.corpus else have
    missing = [c for c in corpora if c not in have]
    if missing or not corpora:
        print(
            f"not materialized: {', '.join(missing) or 'any corpus'}; run `quandary ambitab build` first",
            file=sys.stderr,
        )
        return 1
    out = Path(args.out) if args.out else export_dir() / f"{args.corpus or 'ambitab'}.jsonl"
    n = export_jsonl(corpora, out)
    print(f"wrote {n} records ({', '.join(corpora)}) to {out}")
    return 0


def _rejects(args) -> int:
    from pipelines.ambitab.export import load_rejects

    try:
        df = load_rejects(args.corpus)
    except FileNotFoundError:
        print(
            f"no rejects table for {args.corpus!r}; run `quandary ambitab build --corpus {args.corpus}`",
            file=sys.stderr,
        )
        return 1
    if args.stage:
        df = df.filter(df["stage"] == args.stage)
    print(
        render_table(
            ["source_id", "stage", "reason"], df.select("source_id", "stage", "reason").head(args.limit).rows()
        )
    )
    print(f"{df.height} rejected row(s)")
    return 0


def register(sub) -> None:
    p = sub.add_parser("ambitab", help="AmbiTab corpus: build the six conversions, show records, export JSONL")
    s = p.add_subparsers(dest="ambitab_command", required=True, metavar="SUBCOMMAND")
    b = s.add_parser("build", help="convert one corpus (or all) into task records")
    b.add_argument("--corpus", help="ambrosia | ambiqt | taco | ew_bird | bird_interact | bird (default: all)")
    b.add_argument(
        "--data",
        help="source data folder, relative to the current directory "
        "(default: $QUANDARY_AMBITAB_DATA, else $QUANDARY_DATA, else ../shared/data beside the checkout)",
    )
    b.add_argument("--seed", type=int, default=0, help="build seed (default 0)")
    b.add_argument(
        "--llm",
        choices=("auto", "on", "off"),
        default="auto",
        help="LLM steps (EW-Bird filter, Bird authoring): auto = only with a council config file "
        "(QUANDARY_COUNCIL_CONFIG); skipped steps are reported",
    )
    b.add_argument("--no-llm", action="store_true", help="same as --llm off")
    b.add_argument("--max-rows", type=int, help="cap source rows of LLM-built corpora (smoke runs)")
    b.add_argument(
        "--allow-malformed",
        type=int,
        default=0,
        metavar="N",
        help="build even if up to N source rows cannot be read as their format promises (missing field, "
        "duplicate id); default 0: such a row fails the build naming file and line",
    )
    b.add_argument("--verbose", action="store_true", help="show the run's log")
    b.set_defaults(func=_build)
    v = s.add_parser("show", help="print one record as a party sees it")
    v.add_argument("record_id", help="record id (or a unique prefix)")
    v.add_argument("--view", choices=VIEWS, default="asker")
    v.add_argument("--corpus", help="only look in this corpus")
    v.add_argument(
        "--sql-grounding", choices=("on", "off"), help="oracle view: show the reference SQL (default: corpus rule)"
    )
    v.add_argument("--full", action="store_true", help="do not truncate the schema text")
    v.set_defaults(func=_show)
    e = s.add_parser("export", help="write materialized records as JSONL (one record a line)")
    e.add_argument("--corpus", help="one corpus (default: every materialized corpus)")
    e.add_argument("--out", help="output file (default: $QUANDARY_HOME/ambitab/export/<corpus|ambitab>.jsonl)")
    e.set_defaults(func=_export)
    r = s.add_parser("rejects", help="list the source rows a conversion rejected")
    r.add_argument("--corpus", required=True)
    r.add_argument("--stage", help="only this stage (parse, database, execute, filter, ...)")
    r.add_argument("--limit", type=int, default=50)
    r.set_defaults(func=_rejects)
