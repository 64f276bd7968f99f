"""`quandary interact`, `quandary report interaction`, `quandary audit conversation`, and the demo step."""

import json
import shlex
import sys
from pathlib import Path

from cli.groups import subgroup
from cli.interaction_runs import execute, job_name, run_config, stored_metric_rows
from cli.run_output import materialization_metadata, report_job_result
from storage.audit import query_frame


def _interact(args) -> int:
    from cli.run_output import refused
    from pipelines.interaction.metrics import report_text

    config = run_config(args)
    if code := refused(job_name(), args.db, config):  # every database's run, before the first exists (#42 item 1)
        return code
    code = 0
    for db in args.db:  # one run per database; a balanced subset is pooled over the pool every time
        result = execute(db, config, args.verbose)
        if isinstance(result, int):
            return result
        conv = materialization_metadata(result, "interaction_conversations")
        sub = materialization_metadata(result, "interaction_subset")
        pool = f" (balanced over {sub['pool']})" if args.balanced and sub.get("pool") else ""
        print(
            f"run {result.run_id[:8]} for '{db}': {'succeeded' if result.success else 'FAILED'}; "
            f"{conv.get('conversations', '?')} conversations, {conv.get('turns', '?')} turns, "
            f"{conv.get('new_llm_calls', '?')} new LLM calls{pool}"
        )
        if conv.get("incomplete"):
            outage = conv.get("system_failed") or 0
            print(
                f"{conv['incomplete']} conversation(s) incomplete ({outage} because the system agent's endpoint "
                "gave no answer, the others because a user turn could not be produced: a council call failed or "
                f"its answer was unreadable); they are not scored. Complete them with: {_this_command()}"
            )
        if conv.get("members_without_usable_answer"):
            broken = ", ".join(f"{m} ({n})" for m, n in conv["members_without_usable_answer"].items())
            print(f"no usable answer from user-council member(s) {broken}: check their model and endpoint")
        if report_job_result(result, job_name(), db, args.verbose):
            code = 1
    if code:
        return code
    rows = stored_metric_rows(args.db) or []
    print(report_text(rows, _this_command()))
    if args.export:
        n = export(args.export, args.db)
        print(f"wrote {n} result file(s) to {args.export}")
    return _undecided_exit(rows)


# Exit codes of `interact` / `report interaction`: 0 done; 1 a run or step failed, or nothing to
# report; 2 bad input; 3 a reported metric could not be decided (as `aisql`'s "cannot decide");
# 130 interrupted.
UNDECIDED_EXIT = 3


def _undecided_exit(rows: list[dict]) -> int:
    """3 with one line per Table 4 rate that could not be decided (shown as –), else 0."""
    from pipelines.interaction.metrics import undecided_metrics
    from pipelines.interaction.modes import LABELS

    bad = undecided_metrics(rows)
    if not bad:
        return 0
    judges = [r["agent"] for r in rows if r["table"] == "judges"]
    for r in bad:
        why = f"; FB judges without a usable vote: {', '.join(judges)}" if r["metric"] == "fb" and judges else ""
        print(
            f"{r['metric'].upper()} of {r['agent']} ({LABELS.get(r['mode'], r['mode'])}) could not be decided: "
            f"{r['undecided']} undecided against {r['denominator']} decided{why}",
            file=sys.stderr,
        )
    return UNDECIDED_EXIT


def _this_command() -> str:
    """The command line as typed: running it again completes incomplete conversations."""
    return "quandary " + shlex.join(sys.argv[1:])


def _complete_command(db: str | None) -> str:
    """The exact command of the run behind each database's tables (stored with its metrics, #38
    item 5); several databases: one command each, joined with ``;``."""
    from storage.audit import list_views, open_audit

    con = open_audit()
    try:
        if "interaction_metrics" not in set(list_views(con)):
            commands = {}
        else:
            where, params = (" AND db_id = ?", [db]) if db else ("", [])
            frame = query_frame(
                con,
                "SELECT db_id, slice FROM interaction_metrics WHERE \"table\" = 'run' "
                f"AND metric = 'complete_with'{where} ORDER BY db_id",
                params,
            )
            commands = dict(frame.iter_rows())
    finally:
        con.close()
    if not commands:  # tables from before the command was stored
        return f"quandary interact --db {db or '<db>'} with the options of the run that produced them"
    return "; ".join(commands.values())


def export(out_dir: str, db_id: str | list[str] | None = None) -> int:
    """Write ``<out_dir>/<agent>.json`` in the reference ``Results`` layout; returns the file count."""

    from pipelines.interaction.tables import results_json
    from resources.llm import load_council_config
    from storage.audit import list_views, open_audit

    con = open_audit()
    try:
        views = set(list_views(con))
        if not {"interaction_conversations", "interaction_scores", "interaction_subset"} <= views:
            return 0
        p = [db_id] if isinstance(db_id, str) else list(db_id or [])
        where = f" WHERE db_id IN ({', '.join('?' * len(p))})" if p else ""
        turns = query_frame(con, "SELECT * FROM interaction_conversations" + where, p)
        scores = query_frame(con, "SELECT * FROM interaction_scores" + where, p)
        subset = query_frame(con, "SELECT * FROM interaction_subset" + where, p)
    finally:
        con.close()
    cfg = load_council_config()
    name = db_id if isinstance(db_id, str) else "+".join(db_id) if db_id else "quandary"
    docs = results_json(turns, scores, subset, "+".join(cfg.councils["user_simulator"]), name)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    for agent, doc in docs.items():
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in agent)
        (Path(out_dir) / f"{safe}.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False, default=str))
    return len(docs)


def _report(args) -> int:
    from pipelines.interaction.metrics import incomplete_share, is_provisional, report_text, undecided_share

    rows = stored_metric_rows(args.db)
    if rows is None:
        print("no interaction scores yet; run `quandary interact --db ID` first", file=sys.stderr)
        return 1
    command = _complete_command(args.db)
    if args.json:
        k, n = incomplete_share(rows)
        doc = {
            "provisional": is_provisional(rows),
            "incomplete": k,
            "conversations": n,
            "undecided": undecided_share(rows),
            "complete_with": command if is_provisional(rows) else None,
            "rows": rows,
        }
        print(json.dumps(doc, indent=2))
    else:
        print(report_text(rows, command))
    if args.export:
        print(f"wrote {export(args.export, args.db)} result file(s) to {args.export}")
    return _undecided_exit(rows)


def register(sub) -> None:
    i = sub.add_parser("interact", help="evaluate system agents in dialogues with the simulated user (ABISS §5)")
    i.add_argument("--db", required=True, nargs="+", help="registered db_id(s) with a dataset (one run each)")
    i.add_argument(
        "--agents", nargs="+", help="system_agents member names or package.module:Class (default: all members)"
    )
    i.add_argument("--modes", nargs="+", help="ground_truth predicted taxonomy_only taxonomy_free (default: all four)")
    i.add_argument(
        "--balanced",
        action="store_true",
        help="down-sample every subcategory to the smallest, over every database of --pool (the paper)",
    )
    i.add_argument(
        "--pool",
        nargs="+",
        metavar="DB",
        help="databases balanced together, i.e. the dataset (default: every registered one with questions)",
    )
    i.add_argument("--balance-by", choices=["subcategory", "group"], default="subcategory")
    i.add_argument("--seed", type=int, default=42)
    i.add_argument(
        "--max-questions",
        type=int,
        help="keep at most this many, stratified by subcategory and seeded (over the pool when balanced)",
    )
    i.add_argument("--max-steps", type=int, default=3, help="clarification turns before the final turn (paper: 3)")
    i.add_argument("--candidate-filter", choices=["label", "all"], default="label")
    i.add_argument("--order-sensitive", action="store_true", help="EX: gold ORDER BY makes row order significant")
    i.add_argument("--export", metavar="DIR", help="also write the reference results layout (one JSON per agent)")
    i.add_argument("--verbose", action="store_true", help="print Dagster's log and stack traces on failure")
    i.set_defaults(func=_interact)
    r = subgroup(sub, "report", "reports over materialized results", "report_command")
    ri = r.add_parser("interaction", help="Tables 4, 5, 6 and Appendix D over every evaluated database")
    ri.add_argument("--db", help="only this database")
    ri.add_argument("--json", action="store_true")
    ri.add_argument("--export", metavar="DIR", help="write the reference results layout (one JSON per agent)")
    ri.set_defaults(func=_report)
