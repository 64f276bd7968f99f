"""AmbiTab evaluation on the command line.

| command | what it does |
|---|---|
| `quandary ambitab eval --corpus NAME [--asker A ...] [--oracle O ...] [--prompt P ...] --seeds 3` | runs the episodes + metrics assets for one corpus and prints its Table 8 rows |
| `quandary ambitab rollouts --corpus NAME [--reward f1\\|sr] [--out PATH]` | the stored episodes as JSONL rollouts (question-F1 or outcome reward, group-standardised advantage) |
| `quandary report ambitab [--format md\\|csv\\|json]` | Table 8 and Table 10 over every evaluated corpus |
| `quandary audit episode ID [--prompts]` | one episode: every turn with its credit and response, the SQL, the verdict, and the prompt behind each LLM call |

``eval`` and ``rollouts`` join the ``ambitab`` group of :mod:`cli.commands.ambitab`; ``report``
is created here unless another module made it first; ``audit episode`` is registered by
:mod:`cli.commands.audit` with :func:`audit_episode`.
"""

import sys
from pathlib import Path

from cli.groups import subgroup
from cli.output import render

EPISODES = "ambitab_episodes"
METRICS = "ambitab_metrics"


def _split_list(values: list[str] | None, default: list[str]) -> list[str]:
    if not values:
        return default
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def _eval(args) -> int:
    from assets.ambitab.card import EVAL_CARD
    from assets.ambitab.evaluation import AmbitabEvalConfig
    from cli.run_output import report_job_result, run_cli_job
    from pipelines.ambitab.record import CORPORA
    from storage.stores import artifact_store

    if args.corpus not in CORPORA:
        print(f"unknown corpus {args.corpus!r}; expected one of {', '.join(CORPORA)}", file=sys.stderr)
        return 2
    defaults = AmbitabEvalConfig()
    from pipelines.ambitab.protocol.runs import check_names

    try:  # names are checked before a run exists
        askers, oracles, prompts = check_names(
            _split_list(args.asker, defaults.askers),
            _split_list(args.oracle, defaults.oracles),
            _split_list(args.prompt, defaults.prompts),
            args.solver,
        )
    except ValueError as exc:
        print(f"ambitab eval: {exc}", file=sys.stderr)
        return 2
    run_config = EVAL_CARD.config(
        askers=askers,
        oracles=oracles,
        prompts=prompts,
        seeds=list(range(args.seeds)),
        solver=args.solver,
        diagnostics=not args.no_diagnostics,
        spec_randomisation=args.spec_randomisation,
        skip_clear=not args.no_skip_clear,
        concurrency=args.concurrency,
        split=args.split,
        limit=args.limit,
        sql_grounding=None if args.sql_grounding is None else args.sql_grounding == "on",
    )
    from cli.run_output import refused

    if code := refused(EVAL_CARD.name, [args.corpus], run_config):  # every option before a run exists (#31 item 1)
        return code
    if artifact_store().latest_location("ambitab_records", args.corpus) is None:  # after the options (#42 item 1)
        print(
            f"no {args.corpus} records materialized; run `quandary ambitab build --corpus {args.corpus}` first",
            file=sys.stderr,
        )
        return 1
    print(
        f"evaluating {args.corpus}: askers {', '.join(askers)} · oracles {', '.join(oracles)} · seeds {args.seeds}",
        flush=True,
    )
    result = run_cli_job(EVAL_CARD.name, args.corpus, run_config, args.verbose)
    code = report_job_result(result, EVAL_CARD.name, args.corpus, args.verbose)
    if code:
        return code  # stored episodes and LLM calls are reused on resume
    for line in EVAL_CARD.summary(result, args.corpus):
        print(line)
    return 0


def _report(args) -> int:
    import polars as pl

    from pipelines.ambitab.protocol.tables import AGGREGATION, table8_markdown, table10_markdown, table15_markdown
    from pipelines.ambitab.record import CORPORA
    from storage.stores import artifact_store, latest_frame

    store = artifact_store()
    frames = [f for c in CORPORA if (f := latest_frame(METRICS, c, store)) is not None and f.height]
    if not frames:
        print("no AmbiTab metrics yet; run `quandary ambitab eval --corpus NAME` first", file=sys.stderr)
        return 1
    df = pl.concat(frames, how="diagonal_relaxed")
    if args.format == "md":
        print("## Table 8 (SR, Prec, Rec, F1 in %, mean±SD over seeds; diagnostics in points [95% CI])\n")
        print(AGGREGATION + "\n")
        print(table8_markdown(df))
        print("\n## Table 10 (deterministic oracle, per asker prompt)\n")
        print(table10_markdown(df))
        print("\n## Stress test (responder reads the reference SQL: changed − default, points [95% CI])\n")
        print(table15_markdown(df))
    else:
        print(render(args.format, df.columns, df.rows()))
    return 0


def _rollouts(args) -> int:
    from pipelines.ambitab.protocol.training import rollouts, write_rollouts
    from storage.paths import quandary_home
    from storage.stores import latest_frame

    df = latest_frame(EPISODES, args.corpus)
    if df is None:
        print(
            f"no {args.corpus} episodes yet; run `quandary ambitab eval --corpus {args.corpus}` first", file=sys.stderr
        )
        return 1
    import polars as pl

    if args.asker:
        df = df.filter(pl.col("asker") == args.asker)
    if args.reward == "sr" and (unscored := df.filter(pl.col("verdict").is_null()).height):
        # no verdict (asking-only runs, unverifiable records): an outcome reward cannot be decided
        print(f"left out {unscored} episode(s) without a verdict (outcome reward undecidable)", file=sys.stderr)
        df = df.filter(pl.col("verdict").is_not_null())
    from pipelines.ambitab.protocol.task import Task
    from pipelines.ambitab.record import records_from_frame

    records = latest_frame("ambitab_records", args.corpus)
    # records gone: rollouts without the per-decision prompts
    tasks = (
        {t.record_id: t for t in (Task.from_record(r) for r in records_from_frame(records))}
        if records is not None
        else {}
    )
    out = (
        Path(args.out) if args.out else quandary_home() / "ambitab" / "rollouts" / f"{args.corpus}_{args.reward}.jsonl"
    )
    n = write_rollouts(rollouts(df.to_dicts(), reward=args.reward, tasks=tasks), out)
    print(f"wrote {n} rollouts ({df.height} episodes, reward {args.reward}) to {out}")
    return 0


def register(sub) -> None:
    group = subgroup(sub, "ambitab", "AmbiTab corpus and evaluation", "ambitab_command")
    e = group.add_parser("eval", help="run ask-then-solve episodes for one corpus and print its Table 8 rows")
    e.add_argument("--corpus", required=True, help="ambrosia | ambiqt | taco | ew_bird | bird_interact | bird")
    e.add_argument(
        "--asker",
        action="append",
        help="none, full, full_adv, generic, llm or a dotted path (repeat or comma-separate; default: all five)",
    )
    e.add_argument(
        "--oracle",
        action="append",
        help="det (default; or deterministic), det_intent, det_knowledge, llm, llm_scoped, "
        "llm_unfiltered, hybrid, stress; llm@MEMBER picks the oracles council member (repeat or comma-separate)",
    )
    e.add_argument(
        "--prompt", action="append", help="LLM asker prompt: direct, checklist_chat, checklist_ledger (default)"
    )
    e.add_argument("--seeds", type=int, default=3, help="number of seeds (0..N-1; default 3)")
    e.add_argument(
        "--solver", choices=("llm", "empty"), default="llm", help="llm (default) or empty (asking metrics only)"
    )
    e.add_argument("--split", help="only records of this split (e.g. slice_test)")
    e.add_argument("--limit", type=int, help="at most this many records (whole AVTs)")
    e.add_argument("--spec-randomisation", action="store_true", help="also run the spec-randomised asker (ΔRec_spec)")
    e.add_argument("--no-diagnostics", action="store_true", help="skip the extra runs of the leakage diagnostics")
    e.add_argument("--sql-grounding", choices=("on", "off"), help="scoped LLM oracle sees the reference SQL")
    e.add_argument("--no-skip-clear", action="store_true", help="give |Amb| = 0 records the normal budget")
    e.add_argument("--concurrency", type=int, default=8, help="episodes in flight at once (default 8)")
    e.add_argument("--verbose", action="store_true", help="show the run's log (progress per condition)")
    e.set_defaults(func=_eval)
    r = group.add_parser("rollouts", help="export stored episodes as JSONL rollouts for a trainer")
    r.add_argument("--corpus", required=True)
    r.add_argument("--reward", choices=("f1", "sr"), default="f1", help="question F1 (default) or outcome")
    r.add_argument("--asker", help="only this asker's episodes")
    r.add_argument("--out", help="output file (default: $QUANDARY_HOME/ambitab/rollouts/<corpus>_<reward>.jsonl)")
    r.set_defaults(func=_rollouts)
    report = subgroup(sub, "report", "reports over materialized results", "report_command")
    p = report.add_parser("ambitab", help="Table 8 and Table 10 over every evaluated corpus")
    p.add_argument("--format", choices=("md", "csv", "json"), default="md")
    p.set_defaults(func=_report)
