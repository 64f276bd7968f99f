"""`quandary aisql ...` and `quandary report aisql`: AI-operator SQL on DuckDB (The Stochastic Shift).

quandary aisql run movie "SELECT ... AI.IF(...)"      one query with AI operators, and the calls it made
quandary aisql split "SQL" [--dialect thalamusdb]     structural part + AI parts
quandary aisql compare movie GOLD_SQL CANDIDATE_SQL   each layer's verdict for one pair; exit 0 accept, 1 reject, 3 undecided, 2 bad input
quandary aisql evaluate PREDICTIONS.jsonl             judge a file of your predictions (Dagster asset), Table 1
quandary aisql judge --scenario movie                 materialize the aisql job (Dagster) and print Table 1
quandary aisql label --export todo.csv | FILE.csv     export unlabelled pairs / import manual labels
quandary report aisql [--scenario movie]              Table 1, per variant type, sweep chart
"""

import json
import sys
from pathlib import Path

from cli.output import render_table
from resources.sql import MAX_TIMEOUT_S, timeout_arg
from storage.paths import relative_note, shared_data_root, user_path


def _data(args) -> Path:
    """--data by the one data-path rule (relative to the current directory, absolute in messages);
    none given: the shared data folder beside the checkout, from any directory (#31 item 4)."""
    return user_path(args.data) if args.data else shared_data_root()


def _scenario_db(args):
    """The scenario database a compare/evaluate run judges on (built once, reused by hash)."""
    from pipelines.aisql.pipeline import prepare_db  # lazy: sqlglot/duckdb, not for `quandary --help`
    from storage.paths import quandary_home

    return prepare_db(
        args.scenario, _data(args), quandary_home(), sample=args.sample, seed=args.seed, sample_groups=_groups(args)
    )


def _groups(args) -> tuple[str, ...] | None:
    g = getattr(args, "sample_groups", None)
    return tuple(x.strip() for x in g.split(",") if x.strip()) if g else None


def _err(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return 2


def _dialect(sql: str, dialect: str) -> str:
    if dialect != "auto":
        return dialect
    from pipelines.aisql.rewrite import find_operator_names

    names = find_operator_names(sql)
    return "bigquery" if any(n.startswith("AI.") for n in names) else "thalamusdb"


def _run(args) -> int:
    from pipelines.aisql.execute import run_query
    from pipelines.aisql.pipeline import AisqlSettings, make_runtime
    from pipelines.aisql.scenarios import ScenarioError

    settings = AisqlSettings(
        backend=args.backend,
        flip_rate=args.flip_rate,
        seed=args.seed,
        budget=args.budget,
        sample=args.sample,
        operator_member=args.member,
    )
    try:
        db = _scenario_db(args)
        runtime = make_runtime(settings, db)
    except (ScenarioError, KeyError, ValueError) as exc:
        return _err(str(exc).strip("'\""))
    dialect = _dialect(args.sql, args.dialect)
    try:
        rec = run_query(db.path, args.sql, dialect, runtime, budget=args.budget, timeout_s=args.timeout)
    except KeyboardInterrupt:  # the query's sandbox worker is already killed
        print("interrupted: the AI-operator query was stopped", file=sys.stderr)
        return 130
    finally:
        runtime.close()
    calls = (
        f"AI-operator calls: {rec.calls} distinct (made {rec.made}, cached {rec.cached}, failed {rec.failed}); "
        f"backend {runtime.backend.name}"
    )
    if args.json:
        print(json.dumps({**rec.summary(), "dialect": dialect, "backend": runtime.backend.name}, default=str))
    elif rec.ok:
        from cli.output import render_table

        print(render_table(rec.columns, rec.shown_rows()))
        print(f"({rec.row_count} rows, {rec.elapsed_s:.2f} s) {calls}")
    else:
        print(f"{rec.status}: {rec.error}", file=sys.stderr)
        print(calls, file=sys.stderr)
    return 0 if rec.ok else 1


def _split(args) -> int:
    from pipelines.aisql.scenarios import SCENARIOS
    from pipelines.aisql.splitter import split

    keys = SCENARIOS[args.scenario].key_columns() if args.scenario else {}
    res = split(args.sql, _dialect(args.sql, args.dialect), keys)
    if not res.ok:
        return _err(f"cannot split: {res.error}")
    if args.json:
        print(res.to_json())
        return 0
    print(f"full (DuckDB):  {res.sql}")
    print(f"structural:     {res.structural_sql}")
    for p in res.ai_parts:
        print(
            f"AI part {p.index} [{p.op} on {', '.join(p.sources)}; inputs {', '.join(p.input_columns)}]:\n    {p.sql}"
        )
    return 0


COMPARE_METHODS = ("ex", "layers", "ours")


def _sql_arg(text: str) -> str:
    """A query given inline, or ``@path`` to read it from a file."""
    if text.startswith("@"):
        path = Path(text[1:])
        if not path.is_file():
            raise ValueError(f"{path} not found (give the SQL inline or as @FILE)")
        return path.read_text()
    return text


def _compare(args) -> int:
    """Exit code by the final verdict: 0 accept, 1 reject, 3 cannot decide; 2 bad input (one line)."""
    from pipelines.aisql.checks import BadPairInput, check_pair
    from pipelines.aisql.compare import BAD_INPUT, EXIT_CODES
    from pipelines.aisql.judging import PairToJudge, judge_pairs, judge_settings, open_judging
    from pipelines.aisql.pipeline import AisqlSettings, council_for
    from pipelines.aisql.scenarios import ScenarioError

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in COMPARE_METHODS]
    if unknown or not methods:
        return _err(
            f"--methods {args.methods!r}: unknown {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(COMPARE_METHODS)}"
        )
    try:
        gold, cand = _sql_arg(args.gold_sql), _sql_arg(args.candidate_sql)
        dialect = _dialect(gold, args.dialect)
        check_pair(gold, cand, dialect)  # before the database is built: bad input is one line, exit 2
        settings = AisqlSettings(
            backend=args.backend,
            flip_rate=args.flip_rate,
            seed=args.seed,
            budget=args.budget,
            sample=args.sample,
            timeout_s=args.timeout,
        )
        judges = council_for("judges") if "ours" in methods else None
        db = _scenario_db(args)
        judging = open_judging(settings, db)
    except (BadPairInput, ScenarioError, KeyError, ValueError) as exc:
        return _err(str(exc).strip("'\""))
    try:
        pair = PairToJudge("compare", gold, cand, dialect, args.question or "")
        [(result, _)] = judge_pairs(judging, [pair], methods, judges, judge_settings(settings))
    finally:
        judging.close()
    if result.bad_input:
        return _err(result.bad_input)
    shown = [v for v in result.layers if v.layer in ("structural", "ai") or v.layer in methods]
    if args.json:
        print(
            json.dumps(
                {
                    "final": result.final,
                    "final_method": result.final_method,
                    "verdict_class": result.verdict_class,
                    "dialect": dialect,
                    "layers": [v.row() for v in shown],
                },
                default=str,
            )
        )
    else:
        for v in shown:
            print(f"{v.layer:<11} {v.verdict:<14} {v.reason}")
        if result.final_method == "none":
            print("final: cannot decide (no layer decided; --methods ex,layers,ours asks the autorater)")
        else:
            print(f"final (decided by {result.final_method}): {result.final}")
        print(f"verdict class: {result.verdict_class}")
    return EXIT_CODES.get(result.final, EXIT_CODES[BAD_INPUT])


def _evaluate(args) -> int:
    """Check the file (one line naming file and line on a problem), then run the evaluate job."""
    from pipelines.aisql.predictions import PredictionsError, parse_methods, read_predictions

    try:
        methods = parse_methods(args.methods)
        preds, digest = read_predictions(Path(args.predictions))
    except (PredictionsError, ValueError) as exc:
        return _err(str(exc))
    if args.export and Path(args.export).suffix.lower() not in (".csv", ".jsonl", ".ndjson"):
        return _err(f"--export {args.export}: use a .jsonl or .csv name")
    data = _data(args)
    if not (data / "sembench" / "files").is_dir():
        return _err(f"--data {data}: no sembench/files folder there{relative_note(args.data) if args.data else ''}")
    if "ours" in methods:
        from pipelines.aisql.pipeline import council_for

        try:
            council_for("judges")
        except KeyError as exc:
            return _err(str(exc).strip("'\""))
    return _run_evaluate(args, preds, digest, methods)


def _aisql_values(args) -> dict:
    """The ``aisql`` resource values shared by `evaluate` and `judge` (data, operator backend,
    sample), for the job card's config builder."""
    from storage.paths import allow_data_root

    return {
        "data_root": str(allow_data_root(_data(args))),  # runs read only the project's roots (#34 item 5)
        "backend": args.backend,
        "flip_rate": args.flip_rate,
        "seed": args.seed,
        "budget": args.budget,
        "sample": args.sample or None,
        "sample_groups": list(_groups(args)) if _groups(args) else None,
    }


def _run_evaluate(args, preds, digest: str, methods) -> int:
    from assets.aisql.assets import PREDICTION_VERDICTS
    from assets.aisql.card import EVALUATE_CARD
    from cli.run_output import execute_cli_run, report_job_result
    from cli.runs import run_job_for_partition
    from pipelines.aisql.predictions import export, file_results, summary_markdown
    from storage.paths import stage_input
    from storage.stores import artifact_store

    # a run reads only inside the project's roots (issue 34 item 5): a file elsewhere is staged as a
    # content-addressed copy under $QUANDARY_HOME/inputs; the rows still name the user's file
    run_config = EVALUATE_CARD.config(
        predictions_path=str(stage_input(args.predictions, "predictions")),
        source_name=str(Path(args.predictions).resolve()),
        methods=list(methods),
        timeout_s=args.timeout,
        **_aisql_values(args),
    )
    resume = f"quandary aisql evaluate {args.predictions} (stored verdicts are reused)"
    print(f"evaluating {len(preds)} predictions from {args.predictions} (sha256 {digest[:12]}) ...", file=sys.stderr)
    result = execute_cli_run(
        lambda run_id, level: run_job_for_partition(
            EVALUATE_CARD.name, None, run_config=run_config, run_id=run_id, log_level=level
        ),
        resume,
        args.verbose,
    )
    code = report_job_result(result, EVALUATE_CARD.name, "", args.verbose)
    if code:
        return code
    results = file_results(artifact_store(), digest)
    event = result.asset_materializations_for_node(PREDICTION_VERDICTS)[-1]
    meta = {k: v.value for k, v in event.metadata.items()}
    counts = results.counts
    print(
        f"run {result.run_id[:8]} succeeded: {len(preds)} predictions; reused {meta.get('reused', 0)} stored "
        f"verdicts, judged {meta.get('judged', 0)}"
    )
    print(
        f"final verdicts: {counts['accept']} accept, {counts['reject']} reject, {counts['cannot decide']} cannot decide"
    )
    if results.metrics.height:
        print("\nlabelled predictions (TPR / TNR / accuracy, counts in brackets; 'cannot decide' counts as reject):\n")
        print(summary_markdown(results.metrics))
    else:
        print('no labels in the file: verdicts only (add "label": true/false for Table 1)')
    print(f"\nexports: {meta.get('export_jsonl')}  {meta.get('export_csv')}")
    if args.export:
        print(f"wrote {export(results.verdicts, Path(args.export))}")
    return 0


def _judge(args) -> int:
    from assets.aisql.assets import AISQL_ASSETS
    from assets.aisql.card import CARD
    from cli.run_output import refused, report_job_result, run_cli_job

    def listed(text):
        return [x.strip() for x in text.split(",") if x.strip()] if text else None

    methods = listed(args.methods)
    run_config = CARD.config(
        **_aisql_values(args),
        variant_types=listed(args.variants),
        question_ids=listed(args.questions),
        methods=methods,
        sweep_methods=([m for m in methods if m in ("ex", "ours")] or ["ex"]) if methods else None,
        compact_judge=True if args.compact_judge else None,
        llm_split_fallback=True if args.llm_split_fallback else None,
        dialects=listed(args.dialects),
        generator_samples=args.generate or None,
    )
    keys = [a.key for a in AISQL_ASSETS if args.sweep or a.key.to_user_string() != "aisql_sweep"]
    if code := refused(CARD.name, [args.scenario], run_config):
        return code
    print(f"materializing {len(keys)} aisql assets for scenario {args.scenario} ...", file=sys.stderr)
    result = run_cli_job(CARD.name, args.scenario, run_config, args.verbose, asset_selection=keys)
    code = report_job_result(result, CARD.name, args.scenario, args.verbose)
    if code:
        return code
    print(f"run {result.run_id[:8]} succeeded")
    return _report_text(args.scenario)


def _report_text(scenario: str | None) -> int:
    from pipelines.aisql.metrics import error_counts, table1_sections
    from pipelines.aisql.scenarios import SCENARIOS
    from storage.stores import artifact_store, latest_frame

    store = artifact_store()
    shown = 0
    for sc in [scenario] if scenario else sorted(SCENARIOS):
        metrics = latest_frame("aisql_metrics", sc, store)
        if metrics is None:
            continue
        shown += 1
        print("\n".join(table1_sections(metrics, sc)))
        pairs, verdicts = latest_frame("aisql_pairs", sc, store), latest_frame("aisql_verdicts", sc, store)
        if pairs is not None and verdicts is not None:
            from pipelines.aisql.evalset import balance_table

            print(f"\nlabel balance (ours per set, and the paper's):\n{balance_table(pairs)}")
            print(f"\nper variant type (share judged right):\n{per_variant_table(pairs, verdicts)}")
            errs = error_counts(verdicts)
            if errs.height:
                print(f"\nerror verdicts (counted as rejections):\n{render_table(errs.columns, errs.rows())}")
        sweep = store.latest_location("aisql_sweep", sc)
        if sweep is not None:
            png = sweep_chart(sc)
            print(f"\nflip-rate sweep: {sweep}" + (f"\nchart: {png}" if png else ""))
    if not shown:
        print("no aisql results yet: run `quandary aisql judge --scenario movie` first", file=sys.stderr)
        return 1
    return 0


def sweep_chart(scenario: str) -> str | None:
    """The sweep's PNG: the file beside the local artifacts, else where the asset's latest
    materialization put it (a shared store's object, written by another node)."""
    from storage.paths import artifacts_dir

    png = artifacts_dir() / "aisql_sweep" / scenario / "sweep.png"
    if png.exists():
        return str(png)
    from dagster import AssetKey, AssetRecordsFilter

    from cli.runs import get_instance

    records = (
        get_instance()
        .fetch_materializations(
            AssetRecordsFilter(asset_key=AssetKey("aisql_sweep"), asset_partitions=[scenario]), limit=1
        )
        .records
    )
    meta = records[0].asset_materialization.metadata if records and records[0].asset_materialization else {}
    return getattr(meta.get("chart"), "value", None)


def per_variant_table(pairs, verdicts) -> str:
    """Share of labelled pairs each method judged right, per variant type: every row and column
    (an aligned table, not a truncated frame repr; #24 item 7)."""
    from pipelines.aisql.metrics import per_variant_accuracy

    by_type = per_variant_accuracy(pairs, verdicts)
    return render_table(by_type.columns, by_type.rows())


def _report(args) -> int:
    return _report_text(args.scenario)


def _label(args) -> int:
    from pipelines.aisql.evalset import export_label_csv, import_label_csv, manual_labels_path
    from storage.paths import quandary_home
    from storage.stores import latest_frame

    out = manual_labels_path(quandary_home())
    if args.export:
        pairs = latest_frame("aisql_pairs", args.scenario)
        if pairs is None:
            return _err(
                f"no aisql_pairs for {args.scenario}: run `quandary aisql judge --scenario {args.scenario}` first"
            )
        n = export_label_csv(pairs, Path(args.export), all_pairs=args.all)
        print(
            f"wrote {n} pairs to {args.export}; fill `label` (yes/no) and import with "
            f"`quandary aisql label {args.export}`"
        )
        return 0
    if not args.csv:
        return _err("give a CSV to import (pair_id,label[,rationale]) or --export FILE")
    if not Path(args.csv).is_file():
        return _err(f"{args.csv} not found")
    try:
        stored, problems = import_label_csv(Path(args.csv), out)
    except ValueError as exc:
        return _err(str(exc))
    for p in problems:
        print(f"warning: {p}", file=sys.stderr)
    print(f"stored {stored} manual labels in {out}; rerun `quandary aisql judge` to count them")
    return 0


def _positive_int(text: str) -> int:
    import argparse

    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text} must be at least 1")
    return v


def _rate(text: str) -> float:
    import argparse

    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} must be between 0 and 1")
    return v


def _timeout_option(p) -> None:
    p.add_argument(
        "--timeout",
        type=timeout_arg,
        default=600.0,
        help=f"seconds per query (at most {MAX_TIMEOUT_S:g}); in-flight AI-operator calls are cancelled (default 600)",
    )


def _common(p, data=True) -> None:
    if data:
        p.add_argument(
            "--data",
            help="folder holding sembench/, relative to the current directory "
            "(default: $QUANDARY_DATA, else ../shared/data beside the checkout)",
        )
    p.add_argument(
        "--backend",
        default="oracle",
        choices=["oracle", "council"],
        help="AI-operator backend: label oracle (default) or the council's ai_operator role",
    )
    p.add_argument("--flip-rate", type=_rate, default=0.1, help="label-oracle flip rate p in [0, 1] (default 0.1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--budget",
        type=_positive_int,
        default=5000,
        help="AI-operator calls per query, enforced per call (default 5000)",
    )
    p.add_argument("--sample", type=_positive_int, default=None, help="keep N seeded rows per group (LLM operators)")
    p.add_argument("--sample-groups", default=None, help="with --sample: keep only these groups (e.g. taken_3)")


def register(sub) -> None:
    p = sub.add_parser("aisql", help="AI-operator SQL (AI.IF, NLfilter) on DuckDB and its multilayered evaluation")
    s = p.add_subparsers(dest="aisql_command", required=True, metavar="SUBCOMMAND")

    r = s.add_parser("run", help="run one query with AI operators on a scenario database")
    r.add_argument("scenario")
    r.add_argument("sql")
    r.add_argument("--dialect", default="auto", choices=["auto", "bigquery", "thalamusdb"])
    r.add_argument("--member", default=None, help="ai_operator council member (with --backend council)")
    _timeout_option(r)
    r.add_argument("--json", action="store_true")
    _common(r)
    r.set_defaults(func=_run)

    sp = s.add_parser("split", help="split a query into its structural part and AI parts")
    sp.add_argument("sql")
    sp.add_argument("--dialect", default="auto", choices=["auto", "bigquery", "thalamusdb"])
    sp.add_argument("--scenario", default=None, help="adds the scenario's key columns to AI parts")
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(func=_split)

    c = s.add_parser(
        "compare",
        help="judge one candidate against a gold query, layer by layer (exit 0 accept, 1 reject, 2 bad input, 3 cannot decide)",
    )
    c.add_argument("scenario")
    c.add_argument("gold_sql", help="gold query (inline, or @FILE)")
    c.add_argument("candidate_sql", help="candidate query (inline, or @FILE)")
    c.add_argument("--dialect", default="auto", choices=["auto", "bigquery", "thalamusdb"])
    c.add_argument(
        "--methods",
        default="ex,layers",
        help="comma-separated: ex, layers (deterministic stand-in), ours (LLM autorater; final when given)",
    )
    c.add_argument("--question", default="", help="the NL question (for the autorater)")
    c.add_argument("--json", action="store_true")
    _timeout_option(c)
    _common(c)
    c.set_defaults(func=_compare)

    ev = s.add_parser(
        "evaluate",
        help="judge a JSONL file of your predictions ({id, scenario, question, gold_sql, "
        "predicted_sql[, label]}): one verdict per row, Table 1 when labelled",
    )
    ev.add_argument("predictions", help="JSONL file, one prediction per line")
    ev.add_argument(
        "--methods",
        default="ex,layers",
        help="comma-separated: ex, layers (deterministic stand-in), ours (LLM autorater; final when given)",
    )
    ev.add_argument("--export", default=None, help="also write this file's verdicts to PATH (.jsonl or .csv)")
    ev.add_argument("--verbose", action="store_true")
    _timeout_option(ev)
    _common(ev)
    ev.set_defaults(func=_evaluate)

    j = s.add_parser("judge", help="materialize the aisql assets for a scenario and print Table 1")
    j.add_argument("--scenario", default="movie")
    j.add_argument("--questions", default=None, help="comma-separated gold query ids (e.g. Q2,Q3)")
    j.add_argument(
        "--methods",
        default=None,
        help="comma-separated: ex,layers,mm,mm_exec,ec,ec_exec,ours (layers: the deterministic layers, no LLM call)",
    )
    j.add_argument("--dialects", default=None, help="bigquery,thalamusdb (default both)")
    j.add_argument("--variants", default=None, help="comma-separated variant types (default all)")
    j.add_argument(
        "--generate",
        type=int,
        default=0,
        help="generator candidates per question, labelled by execution under the label oracle at p=0 "
        "plus the structural rules (undecided ones left to `aisql label`)",
    )
    j.add_argument("--sweep", action="store_true", help="also run the flip-rate sweep and its chart")
    j.add_argument("--compact-judge", action="store_true", help="short judge prompt (small local models)")
    j.add_argument(
        "--llm-split-fallback",
        action="store_true",
        help="when the AST splitter fails, ask the few-shot LLM splitter (council role 'splitter')",
    )
    j.add_argument("--verbose", action="store_true")
    _common(j)
    j.set_defaults(func=_judge)

    lb = s.add_parser("label", help="export unlabelled pairs to CSV, or import manual labels from one")
    lb.add_argument("csv", nargs="?", help="CSV with pair_id,label[,rationale] to import")
    lb.add_argument("--export", default=None, help="write unlabelled pairs of --scenario to this CSV")
    lb.add_argument("--all", action="store_true", help="with --export: every pair, not only unlabelled ones")
    lb.add_argument("--scenario", default="movie")
    lb.set_defaults(func=_label)

    _register_report(sub)


def _register_report(sub) -> None:
    """`quandary report aisql`: joins an existing `report` group if another module created one."""
    report = sub.choices.get("report")
    if report is None:
        report = sub.add_parser("report", help="print reports of finished runs")
        report.set_defaults(func=lambda a: (report.print_help(), 2)[1])
    groups = [a for a in report._actions if a.__class__.__name__ == "_SubParsersAction"]
    inner = groups[0] if groups else report.add_subparsers(dest="report_kind", metavar="KIND")
    ra = inner.add_parser("aisql", help="AI-operator SQL meta-evaluation (Table 1, variants, sweep)")
    ra.add_argument("--scenario", default=None)
    ra.set_defaults(func=_report)
