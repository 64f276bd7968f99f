"""Auditing someone else's benchmark (issues 32, 43), in the ``audit`` group.

| command | what it does |
|---|---|
| `quandary audit benchmark FILE --dbs DIR [--databases A,B] [--skip-missing] [--timeout S] [--council [--council-checks C,...]]` | one run per database of a Spider / BIRD file: the deterministic checks, rates by error type, weak items (correct but empty here) apart; with `--council` also the council's checks (LLM-judged, reported apart) |
| `quandary audit benchmark-item FILE INDEX` | one item: its flags (and weak-item notes, marked "not a flag"), every finding with the probe queries and their results, the suggested fix |
| `quandary audit benchmark-export FILE [--out PATH] [--all]` | the flagged items as JSONL or CSV (by the suffix) for a reviewer, fixes pre-filled |
| `quandary audit benchmark-fix FILE --review PATH --out PATH [--dbs DIR]` | the corrected file: the fixes a reviewer accepted (``accept`` true) applied, each fixed SQL run on its database first |

Everything is checked before a run exists: the file's records (a malformed one is refused in one
line naming the file and record), the database folder, the names given to ``--databases``.
"""

import json
import sys
from pathlib import Path

from cli.groups import subgroup
from pipelines.benchmark_audit.records import (
    BenchmarkFileError,
    benchmark_name,
    by_database,
    database_path,
    file_digest,
    read_benchmark,
)
from resources.sql.results import timeout_arg


def _items(path: str):
    try:
        items, no_gold = read_benchmark(path)
    except BenchmarkFileError as exc:
        print(f"audit benchmark: {exc}", file=sys.stderr)
        return None
    if no_gold:
        print(f"not auditable: {no_gold} record(s) without gold SQL by design (ABISS unsolvable questions)")
    return items


def _split(values: list[str] | None) -> list[str]:
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


def _benchmark(args) -> int:
    # lazy: dagster, the job's assets and polars load only when the command runs
    from assets.benchmark_audit.assets import benchmark_partitions, partition_key, stored_rows
    from assets.benchmark_audit.card import CARD, COUNCIL_CARD
    from cli.run_output import report_job_result, run_cli_job
    from cli.runs import get_instance
    from pipelines.benchmark_audit.audit import rates
    from pipelines.benchmark_audit.report import checks_lines, rates_markdown
    from pipelines.benchmark_audit.verdicts import COUNCIL_CHECKS, DEFAULT_COUNCIL_CHECKS

    items = _items(args.file)
    if items is None:
        return 2
    if not Path(args.dbs).is_dir():
        print(
            f"audit benchmark: --dbs {args.dbs}: not a folder (give the folder of <db_id>/<db_id>.sqlite)",
            file=sys.stderr,
        )
        return 2
    groups = by_database(items)
    if args.databases:
        wanted = _split(args.databases)
        unknown = [d for d in wanted if d not in groups]
        if unknown:
            print(
                f"audit benchmark: --databases {', '.join(unknown)}: not in {args.file}; its databases: "
                f"{', '.join(groups)}",
                file=sys.stderr,
            )
            return 2
        groups = {d: groups[d] for d in wanted}
    missing = [d for d in groups if database_path(args.dbs, d) is None]
    if missing:
        n = sum(len(groups[d]) for d in missing)
        line = f"no database file in {args.dbs} for {', '.join(missing)} ({n} items)"
        if not args.skip_missing:
            print(f"audit benchmark: {line}; add them, or --skip-missing to audit the others", file=sys.stderr)
            return 2
        print(f"skipping {line}", file=sys.stderr)
        groups = {d: v for d, v in groups.items() if d not in missing}
    council_checks = _split(args.council_checks) or list(DEFAULT_COUNCIL_CHECKS)
    if args.council_checks and not args.council:
        print("audit benchmark: --council-checks needs --council", file=sys.stderr)
        return 2
    unknown_checks = [c for c in council_checks if c not in COUNCIL_CHECKS]
    if unknown_checks:
        print(
            f"audit benchmark: --council-checks {', '.join(unknown_checks)}: unknown; checks: {', '.join(COUNCIL_CHECKS)}",
            file=sys.stderr,
        )
        return 2
    name = args.name or benchmark_name(args.file)
    try:
        keys = {d: partition_key(name, d) for d in groups}
    except ValueError as exc:  # --name (or a db_id) that cannot be a folder name
        print(f"audit benchmark: --name: {exc}", file=sys.stderr)
        return 2
    instance = get_instance()
    existing = set(instance.get_dynamic_partitions(benchmark_partitions.name))
    new = [k for k in keys.values() if k not in existing]
    if new:
        instance.add_dynamic_partitions(benchmark_partitions.name, new)
    run_config = CARD.config(
        benchmark_path=str(Path(args.file).resolve()), dbs_dir=str(Path(args.dbs).resolve()), timeout_s=args.timeout
    )
    print(
        f"auditing {args.file}: {sum(len(v) for v in groups.values())} items on {len(groups)} database(s)", flush=True
    )
    council_config = COUNCIL_CARD.config(
        benchmark_path=str(Path(args.file).resolve()),
        dbs_dir=str(Path(args.dbs).resolve()),
        timeout_s=args.timeout,
        checks=council_checks,
        max_probes=args.max_probes,
    )
    failed = []
    council_lines = []
    for n, (db_id, key) in enumerate(keys.items()):
        result = run_cli_job(CARD.name, key, run_config, args.verbose, name_instance=n == 0)
        code = report_job_result(result, CARD.name, key, args.verbose)
        if code == 130:
            return code  # stored rows are reused when the command runs again
        if code:
            failed.append(db_id)
            continue
        if args.council:
            result = run_cli_job(COUNCIL_CARD.name, key, council_config, args.verbose, name_instance=False)
            code = report_job_result(result, COUNCIL_CARD.name, key, args.verbose)
            if code == 130:
                return code  # answered calls are in the call log: the next run reuses them
            if code:
                failed.append(f"{db_id} (council)")
                continue
            council_lines += [f"{db_id}:", *COUNCIL_CARD.summary(result, key)]
    digest = file_digest(Path(args.file))
    rows = stored_rows(name, digest)
    if rows is not None:
        rows = rows.filter(rows["db_id"].is_in(list(groups)))
        r = rates(rows)
        print("\nflagged by the deterministic checks (no LLM), by error type:")
        print(rates_markdown(r))
        print("\nper check (over all audited databases):")
        print("\n".join(checks_lines(r)))
        if council_lines:
            print("\njudged by the council (LLM; flag / pass / undecided, never mixed with the above):")
            print("\n".join(council_lines))
        print(f"\nexport for review: quandary audit benchmark-export {args.file} --out flagged.jsonl")
    if failed:
        print(f"audit failed on {', '.join(failed)}; run the command again to resume", file=sys.stderr)
        return 1
    return 0


def _stored(args):
    # lazy: dagster, the job's assets and polars load only when the command runs
    from assets.benchmark_audit.assets import stored_rows

    path = Path(args.file)
    if not path.is_file():
        print(f"{path}: no such file", file=sys.stderr)
        return None
    rows = stored_rows(args.name or benchmark_name(path), file_digest(path))
    if rows is None:
        print(
            f"no audit of this version of {path} yet; run `quandary audit benchmark {path} --dbs DIR` first",
            file=sys.stderr,
        )
    return rows


def _item(args) -> int:
    rows = _stored(args)
    if rows is None:
        return 1
    found = rows.filter(rows["item_index"] == args.index)
    if not found.height:
        print(f"item {args.index} was not audited (audited: {rows.height} items)", file=sys.stderr)
        return 1
    row = found.row(0, named=True)
    council = _council_rows(args, row)
    if args.json:
        row = {**row, "findings": json.loads(row["findings"])}
        row["council"] = [{**c, "votes": json.loads(c["votes"])} for c in council]
        print(json.dumps(row, ensure_ascii=False, indent=2))
        return 0
    print(
        f"item {row['item_index']} ({row['db_id']}{', question_id ' + row['question_id'] if row['question_id'] else ''})"
    )
    print(f"  question: {row['question']}")
    if row["evidence"]:
        print(f"  evidence: {row['evidence']}")
    print(f"  gold:     {row['gold_sql']}")
    print(f"  result:   {'failed' if row['gold_rows'] is None else str(row['gold_rows']) + ' row(s)'}")
    findings = json.loads(row["findings"])
    if not any(not f.get("weak") for f in findings):
        print("  no flag: every deterministic check passed")
    for f in findings:
        kind = "weak: not a flag" if f.get("weak") else f["error_type"]
        print(f"\n  [{kind}] {f['check']} ({row['source']}): {f['detail']}")
        for p in f["probes"]:
            print(f"      probe:  {p['sql']}")
            print(f"      result: {p['result']}")
        if f["suggested_fix"]:
            fix = json.loads(f["suggested_fix"])
            print(f"      suggested fix ({fix['field']}): {fix['value']}")
    if council:
        print("\n  judged by the council (LLM), apart from the checks above:")
    for c in council:
        print(f"  [{c['error_type']}] {c['check']}: {c['verdict']} -- {c['reason']}")
        for v in json.loads(c["votes"]):
            read = "" if v["parsed_ok"] else " (unreadable: not a judgement)"
            print(f"      {v['member']}: {v['vote']}{read}  call {v['llm_call_id']}")
            for probe in v.get("probes") or ():  # the verifier's probes, each with its result
                print(f"          probe:  {probe['sql']}")
                print(f"          result: {probe['result']}")
    return 0


def _council_rows(args, row) -> list[dict]:
    # lazy: dagster, the job's assets and polars load only when the command runs
    from assets.benchmark_audit.assets import COUNCIL, partition_key
    from storage.stores import latest_frame

    df = latest_frame(COUNCIL, partition_key(args.name or benchmark_name(args.file), row["db_id"]))
    if df is None:
        return []
    mine = df.filter((df["benchmark_sha256"] == row["benchmark_sha256"]) & (df["item_index"] == row["item_index"]))
    return mine.to_dicts()


def _council_flags(args, rows) -> dict[int, str]:
    """item index -> the council checks that flagged it (kept in their own column of the export)."""
    # lazy: dagster, the job's assets and polars load only when the command runs
    from assets.benchmark_audit.assets import COUNCIL, partition_key
    from storage.stores import latest_frame

    out: dict[int, list[str]] = {}
    name = args.name or benchmark_name(args.file)
    digest = rows["benchmark_sha256"][0]
    for db_id in rows["db_id"].unique().to_list():
        df = latest_frame(COUNCIL, partition_key(name, db_id))
        if df is None:
            continue
        for r in df.filter((df["benchmark_sha256"] == digest) & (df["verdict"] == "flag")).iter_rows(named=True):
            out.setdefault(r["item_index"], []).append(f"{r['check']} ({r['error_type']})")
    return {k: ",".join(v) for k, v in out.items()}


def _export(args) -> int:
    # lazy: dagster, the job's assets and polars load only when the command runs
    from pipelines.benchmark_audit.review import review_rows, write_review

    rows = _stored(args)
    if rows is None:
        return 1
    out = Path(args.out)
    if out.suffix.lower() not in (".jsonl", ".csv"):
        print(f"--out {out}: give a .jsonl or .csv file", file=sys.stderr)
        return 2
    council = _council_flags(args, rows)
    chosen = rows if args.all else rows.filter(rows["flagged"] | rows["item_index"].is_in(list(council)))
    write_review(review_rows(chosen, council), out)
    print(
        f"wrote {chosen.height} item(s) to {out}: set accept to true (and edit fixed_sql / fixed_evidence) to accept a fix"
    )
    return 0


def _fix(args) -> int:
    # lazy: dagster, the job's assets and polars load only when the command runs
    from pipelines.benchmark_audit.review import corrected_records

    out = Path(args.out)
    if out.resolve() == Path(args.file).resolve():
        print("--out: give a new file (the original benchmark is never overwritten)", file=sys.stderr)
        return 2
    dbs = args.dbs or _audited_dbs(Path(args.file))
    try:
        records, applied, stale = corrected_records(Path(args.file), Path(args.review), dbs and Path(dbs))
    except BenchmarkFileError as exc:
        print(f"audit benchmark-fix: {exc}", file=sys.stderr)
        return 2
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(records, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}: {applied} accepted fix(es) applied to {len(records)} records (each fixed SQL ran on {dbs})")
    if stale:
        print(
            f"{stale} record(s): Spider's query_toks / query_toks_no_value / sql described the old query and were "
            "removed; re-derive them with Spider's process_sql if a tool needs them"
        )
    return 0


def _audited_dbs(path: Path) -> str | None:
    """The database folder the latest audit of this file used (its run's config), if any."""
    from assets.benchmark_audit.assets import FINDINGS
    from cli.runs import get_instance

    target = str(path.resolve())
    for run in get_instance().get_runs(limit=200):
        config = ((run.run_config or {}).get("ops") or {}).get(FINDINGS, {}).get("config") or {}
        if config.get("benchmark_path") == target and config.get("dbs_dir"):
            return config["dbs_dir"]
    return None


def register(sub) -> None:
    audit = subgroup(sub, "audit", "audit artifacts, votes and LLM calls", "audit_command")
    b = audit.add_parser("benchmark", help="audit a Spider / BIRD benchmark's gold items (one run per database)")
    b.add_argument("file", help="Spider / BIRD JSON (or JSONL): db_id, question, query | SQL [, evidence]")
    b.add_argument("--dbs", required=True, help="the database folder: <db_id>/<db_id>.sqlite or <db_id>.sqlite")
    b.add_argument("--databases", action="append", help="only these databases (repeat or comma-separate)")
    b.add_argument("--skip-missing", action="store_true", help="audit the databases that have a file, skip the rest")
    b.add_argument("--name", help="the benchmark's name in partition keys (default: the file's stem)")
    b.add_argument("--timeout", type=timeout_arg, default=None, help="seconds per gold query and probe (default 10)")
    b.add_argument("--council", action="store_true", help="also the council's checks (LLM calls; see the plan line)")
    b.add_argument(
        "--council-checks",
        action="append",
        help="with --council: council_gold_unsatisfying, council_evidence_unneeded, council_rewrites_differ "
        "(the default three), council_verifier (members probe the data before voting)",
    )
    b.add_argument("--max-probes", type=int, default=None, help="council_verifier: probes per member (default 3)")
    b.add_argument("--verbose", action="store_true")
    b.set_defaults(func=_benchmark)
    i = audit.add_parser("benchmark-item", help="one audited item: findings, probes and their results, the fix")
    i.add_argument("file")
    i.add_argument("index", type=int, help="the item's position in the file (0-based, the export's item_index)")
    i.add_argument("--name", help="as given to `audit benchmark --name`")
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=_item)
    e = audit.add_parser("benchmark-export", help="the flagged items as JSONL / CSV for human review")
    e.add_argument("file")
    e.add_argument("--out", required=True, help="a .jsonl or .csv file")
    e.add_argument("--all", action="store_true", help="every audited item, not only the flagged ones")
    e.add_argument("--name", help="as given to `audit benchmark --name`")
    e.set_defaults(func=_export)
    f = audit.add_parser("benchmark-fix", help="the corrected benchmark file from a reviewed export")
    f.add_argument("file")
    f.add_argument("--review", required=True, help="the reviewed export (.jsonl or .csv; accept = true applies a line)")
    f.add_argument("--out", required=True, help="the corrected file to write (never the original)")
    f.add_argument("--dbs", help="the database folder each fixed SQL is run on first (default: the audit's)")
    f.set_defaults(func=_fix)
