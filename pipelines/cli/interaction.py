"""`quandary interact`, `quandary report interaction`, `quandary audit conversation`, and the demo step."""

import json
import sys
from pathlib import Path

from pipelines.cli._groups import subgroup

JOB = "abiss_interaction_job"
# The demo evaluates a handful of questions so `make demo` stays within minutes on 2 cores.
# One question, four modes, the final turn only: each embedded call costs 10-60 s on 2 cores.
DEMO_MAX_QUESTIONS = 1
DEMO_MAX_STEPS = 0


def _frame(con, query: str, params=None):
    """A query result as a polars frame (DuckDB 2.0: ``.arrow()`` is a RecordBatchReader, and Arrow
    from a DB-API ``execute`` result warns about an extra copy)."""
    import polars as pl

    return pl.from_arrow(con.sql(query, params=params or None).to_arrow_table())


def run_config(args) -> dict:
    subset = {"balanced": bool(args.balanced), "balance_by": args.balance_by, "seed": args.seed}
    if args.max_questions is not None:
        subset["max_questions"] = args.max_questions
    conv = {"max_steps": args.max_steps, "candidate_filter": args.candidate_filter}
    if args.agents:
        conv["agents"] = args.agents
    if args.modes:
        conv["modes"] = args.modes
    return {"ops": {"interaction_subset": {"config": subset}, "interaction_conversations": {"config": conv},
                    "interaction_scores": {"config": {"order_sensitive": bool(args.order_sensitive)}}}}


def _metric_rows(db_id: str | None = None):

    from pipelines.interaction.metrics import metric_rows
    from storage.audit import list_views, open_audit

    con = open_audit()
    try:
        if "interaction_scores" not in list_views(con):
            return None
        q = "SELECT * FROM interaction_scores" + (" WHERE db_id = ?" if db_id else "")
        scores = _frame(con, q, [db_id] if db_id else [])
    finally:
        con.close()
    return metric_rows(scores.drop("fb_votes").to_dicts()) if scores.height else []


def execute(db_id: str, config: dict, verbose: bool = False, name_instance: bool = True):
    """The interaction job for one database through the shared CLI run path (instance line, progress,
    one line and exit 130 on Ctrl-C/SIGTERM); returns the result or an exit code."""
    from pipelines.cli.run import run_cli_job

    return run_cli_job(JOB, db_id, config, verbose, name_instance=name_instance)


def _materialization(result, asset: str) -> dict:
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization
        if mat.asset_key.to_user_string() == asset:
            return {k: getattr(v, "value", v) for k, v in mat.metadata.items()}
    return {}


def _interact(args) -> int:
    from pipelines.interaction.metrics import report_text
    from pipelines.interaction.modes import parse_modes
    from resources.catalog import Catalog

    if args.db not in Catalog().ids():
        print(f"database {args.db!r} is not registered; use `quandary db register`", file=sys.stderr)
        return 2
    try:
        parse_modes(args.modes)
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    from assets.interaction import dataset_source

    if dataset_source(args.db) is None:
        print(f"no dataset for {args.db!r}: run `quandary run --db {args.db}` or `quandary import FILE` first",
              file=sys.stderr)
        return 2
    from pipelines.cli.run import report_job_result

    result = execute(args.db, run_config(args), args.verbose)
    if isinstance(result, int):
        return result
    conv = _materialization(result, "interaction_conversations")
    print(f"run {result.run_id[:8]} for '{args.db}': {'succeeded' if result.success else 'FAILED'}; "
          f"{conv.get('conversations', '?')} conversations, {conv.get('turns', '?')} turns, "
          f"{conv.get('new_llm_calls', '?')} new LLM calls")
    if report_job_result(result, JOB, args.db, args.verbose):
        return 1
    rows = _metric_rows(args.db) or []
    print(report_text(rows))
    if args.export:
        n = export(args.export, args.db)
        print(f"wrote {n} result file(s) to {args.export}")
    return 0


def export(out_dir: str, db_id: str | None = None) -> int:
    """Write ``<out_dir>/<agent>.json`` in the reference ``Results`` layout; returns the file count."""

    from pipelines.interaction.tables import results_json
    from resources.llm import load_council_config
    from storage.audit import list_views, open_audit

    con = open_audit()
    try:
        views = set(list_views(con))
        if not {"interaction_conversations", "interaction_scores", "interaction_subset"} <= views:
            return 0
        where = " WHERE db_id = ?" if db_id else ""
        p = [db_id] if db_id else []
        turns = _frame(con, "SELECT * FROM interaction_conversations" + where, p)
        scores = _frame(con, "SELECT * FROM interaction_scores" + where, p)
        subset = _frame(con, "SELECT * FROM interaction_subset" + where, p)
    finally:
        con.close()
    cfg = load_council_config()
    docs = results_json(turns, scores, subset, "+".join(cfg.councils["user_simulator"]), db_id or "quandary")
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    for agent, doc in docs.items():
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in agent)
        (Path(out_dir) / f"{safe}.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False, default=str))
    return len(docs)


def _report(args) -> int:
    from pipelines.interaction.metrics import report_text

    rows = _metric_rows(args.db)
    if rows is None:
        print("no interaction scores yet; run `quandary interact --db ID` first", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(report_text(rows))
    if args.export:
        print(f"wrote {export(args.export, args.db)} result file(s) to {args.export}")
    return 0


def audit_conversation(args) -> int:
    from pipelines.cli.abiss import print_logged_call
    from storage.audit import list_views, open_audit

    con = open_audit()
    try:
        if "interaction_conversations" not in list_views(con):
            print("no conversations materialized yet; run `quandary interact` first", file=sys.stderr)
            return 1
        ids = [r[0] for r in con.execute(
            "SELECT DISTINCT conversation_id FROM interaction_conversations WHERE conversation_id LIKE ?",
            [args.id + "%"]).fetchall()]
        if len(ids) != 1:
            print(f"no conversation {args.id!r}" if not ids else f"{args.id!r} is ambiguous: give more of the id",
                  file=sys.stderr)
            return 1
        turns = _frame(con, "SELECT * FROM interaction_conversations WHERE conversation_id = ? ORDER BY step",
                       [ids[0]]).to_dicts()
        has_calls = "llm_calls" in list_views(con)

        def call(call_id):
            if not has_calls or not call_id:
                return None, None
            r = con.execute("SELECT request_json, raw_response FROM llm_calls WHERE call_id = ?", [call_id]).fetchall()
            return r[0] if r else (None, None)

        def show(call_id, indent="      "):
            req, raw = call(call_id)
            print_logged_call(req, raw, width=args.width, prompts=args.prompts, indent=indent)

        t0 = turns[0]
        q = con.execute("SELECT question, evidence, sql, hidden_knowledge, feedback, subcategory FROM interaction_subset "
                        "WHERE question_id = ? LIMIT 1", [t0["question_id"]]).fetchall() \
            if "interaction_subset" in list_views(con) else []
        print(f"conversation {ids[0]}  agent {t0['agent']} · mode {t0['mode']} · db {t0['db_id']} · ends {t0['end']}")
        if q:
            question, evidence, sql, hk, fb, sub = q[0]
            print(f"  question ({sub}): {question}")
            for label, v in (("evidence", evidence), ("gold sql", sql), ("hidden knowledge", hk), ("feedback", fb)):
                if v:
                    print(f"  {label}: {v}")
        if t0["mode"] == "predicted":
            print(f"  classification: {t0['predicted_subcategory']} ({t0['classification_status']})  "
                  f"call {t0['classification_call_id']}")
            show(t0["classification_call_id"], "    ")
        for t in turns:
            kind = "question" if t["system_question"] else "sql" if t["system_sql"] else "feedback" if t["system_feedback"] else "no answer"
            print(f"\nturn {t['step'] + 1} system [{kind}, {t['system_status']}]: {t['system_question'] or t['system_sql'] or t['system_feedback'] or ''}"
                  f"  call {t['system_call_id']}")
            show(t["system_call_id"])
            if t["relevance"] is None:
                continue
            sc = " (short-circuit, no LLM call)" if t["short_circuit"] else ""
            print(f"  user [{t['relevance']}]{sc}: {t['user_response']}")
            for v in t["label_votes"] or []:
                print(f"    label vote {v['member']:<14} → {v['label']} nodes {v['node_ids']}  call {v['llm_call_id']}")
                show(v["llm_call_id"])
            if t["fragments"]:
                print(f"    technical fragments: {t['fragments']}")
            for c in t["candidates"] or []:
                print(f"    candidate  {c['member']:<14} → {c['answer']}  call {c['llm_call_id']}")
                show(c["llm_call_id"])
            for j in t["tournament"] or []:
                print(f"    judge      {j['judge']:<14} {j['candidate_a']} vs {j['candidate_b']} → {j['winner']}  "
                      f"call {j['llm_call_id']}")
        if "interaction_scores" in list_views(con):
            s = con.execute("SELECT recognition, classification, solved, ex_reason, explained, fb_reason, fb_votes "
                            "FROM interaction_scores WHERE conversation_id = ?", [ids[0]]).fetchall()
            if s:
                rec, cls, solved, exr, expl, fbr, fbv = s[0]
                print(f"\nscores: recognition {rec} · classification {cls} · EX {solved} ({exr}) · FB {expl} ({fbr})")
                for v in fbv or []:
                    print(f"    feedback vote {v['member']} → {v['vote']}  call {v['llm_call_id']}")
                    show(v["llm_call_id"])
        return 0
    finally:
        con.close()


def demo_interaction(db_id: str, verbose: bool = False) -> int:
    """`make demo` step: the embedded system agent in all four modes on a few validated questions."""
    from pipelines.interaction.metrics import table4_lines
    from storage.artifacts import latest_path

    if latest_path("dataset", db_id) is None:
        print("interaction: no dataset to evaluate")
        return 1
    cfg = {"ops": {"interaction_subset": {"config": {"max_questions": DEMO_MAX_QUESTIONS}},
                   "interaction_conversations": {"config": {"max_steps": DEMO_MAX_STEPS}}}}
    print(f"\ninteraction benchmark: the embedded system agent on {DEMO_MAX_QUESTIONS} validated question(s) "
          f"in 4 modes, {DEMO_MAX_STEPS} clarification turn(s) ...", flush=True)
    from pipelines.cli.run import report_job_result

    result = execute(db_id, cfg, verbose, name_instance=False)  # the demo's ABISS run named it
    if isinstance(result, int):
        return result
    code = report_job_result(result, JOB, db_id, verbose)
    conv = _materialization(result, "interaction_conversations")
    print(f"\ninteraction benchmark ({conv.get('conversations', 0)} conversations: up to {DEMO_MAX_QUESTIONS} "
          f"questions × 4 modes, {DEMO_MAX_STEPS} clarification turn(s)): "
          f"{'succeeded' if result.success else 'FAILED'}")
    print("\n".join(table4_lines(_metric_rows(db_id) or [])))
    return code


def register_audit(audit_subparsers) -> None:
    c = audit_subparsers.add_parser("conversation", help="one dialogue with every vote and the prompt behind it")
    c.add_argument("id", help="conversation id (a unique prefix is enough)")
    c.add_argument("--prompts", action="store_true", help="also print the prompt behind each call")
    c.add_argument("--width", type=int, default=None, help="cut each prompt message and answer to this many characters")
    c.set_defaults(func=audit_conversation)


def register(sub) -> None:
    i = sub.add_parser("interact", help="evaluate system agents in dialogues with the simulated user (ABISS §5)")
    i.add_argument("--db", required=True, help="registered db_id with a dataset")
    i.add_argument("--agents", nargs="+", help="system_agents member names or package.module:Class (default: all members)")
    i.add_argument("--modes", nargs="+", help="ground_truth predicted taxonomy_only taxonomy_free (default: all four)")
    i.add_argument("--balanced", action="store_true", help="down-sample every subcategory to the smallest")
    i.add_argument("--balance-by", choices=["subcategory", "group"], default="subcategory")
    i.add_argument("--seed", type=int, default=42)
    i.add_argument("--max-questions", type=int)
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
