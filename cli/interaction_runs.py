"""How the interaction job is started from the CLI (``quandary interact``, and the ABISS §5 step
of ``quandary demo``), and where its results are read back."""

from cli.run_output import materialization_metadata, report_job_result, run_cli_job
from storage.audit import query_frame


JOB = "abiss_interaction_job"


# The demo evaluates a handful of questions so `make demo` stays within minutes on 2 cores.
# One question, four modes, the final turn only: each embedded call costs 10-60 s on 2 cores.
DEMO_MAX_QUESTIONS = 1


DEMO_MAX_STEPS = 0


def run_config(args) -> dict:
    subset = {"balanced": bool(args.balanced), "balance_by": args.balance_by, "seed": args.seed}
    if args.max_questions is not None:
        subset["max_questions"] = args.max_questions
    if getattr(args, "pool", None):
        subset["pool"] = args.pool
    conv = {"max_steps": args.max_steps, "candidate_filter": args.candidate_filter}
    if args.agents:
        conv["agents"] = args.agents
    if args.modes:
        conv["modes"] = args.modes
    return {
        "ops": {
            "interaction_subset": {"config": subset},
            "interaction_conversations": {"config": conv},
            "interaction_scores": {"config": {"order_sensitive": bool(args.order_sensitive)}},
        }
    }


def stored_metric_rows(db_id: str | list[str] | None = None):
    """The metric rows of the stored scores (and the leakage rows of the stored conversations)."""
    from pipelines.interaction.leakage import leakage_rows, observations
    from pipelines.interaction.metrics import metric_rows
    from storage.audit import list_views, open_audit

    con = open_audit()
    try:
        views = set(list_views(con))
        if "interaction_scores" not in views:
            return None
        dbs = [db_id] if isinstance(db_id, str) else list(db_id or [])
        where = f" WHERE db_id IN ({', '.join('?' * len(dbs))})" if dbs else ""
        scores = query_frame(con, "SELECT * FROM interaction_scores" + where, dbs)
        turns = subset = None
        if {"interaction_conversations", "interaction_subset"} <= views:
            turns = query_frame(con, "SELECT * FROM interaction_conversations" + where, dbs)
            subset = query_frame(con, "SELECT * FROM interaction_subset" + where, dbs)
    finally:
        con.close()
    rows = metric_rows(scores.drop("fb_votes").to_dicts()) if scores.height else []
    if turns is not None and turns.height and "user_status" in turns.columns:
        questions = {r["question_id"]: r for r in subset.iter_rows(named=True)}
        rows += leakage_rows(observations(turns.to_dicts(), questions))
    return rows


def execute(db_id: str, config: dict, verbose: bool = False, name_instance: bool = True):
    """The interaction job for one database through the shared CLI run path (instance line, progress,
    one line and exit 130 on Ctrl-C/SIGTERM); returns the result or an exit code."""
    return run_cli_job(JOB, db_id, config, verbose, name_instance=name_instance)


def demo_interaction(db_id: str, verbose: bool = False) -> int:
    """`make demo` step: the embedded system agent in all four modes on a few validated questions."""
    from pipelines.interaction.metrics import table4_lines
    from storage.stores import artifact_store

    if artifact_store().latest_location("dataset", db_id) is None:
        print("interaction: no dataset to evaluate")
        return 1
    cfg = {
        "ops": {
            "interaction_subset": {"config": {"max_questions": DEMO_MAX_QUESTIONS}},
            "interaction_conversations": {"config": {"max_steps": DEMO_MAX_STEPS}},
        }
    }
    print(
        f"\ninteraction benchmark: the embedded system agent on {DEMO_MAX_QUESTIONS} validated question(s) "
        f"in 4 modes, {DEMO_MAX_STEPS} clarification turn(s) ...",
        flush=True,
    )
    result = execute(db_id, cfg, verbose, name_instance=False)  # the demo's ABISS run named it
    if isinstance(result, int):
        return result
    code = report_job_result(result, JOB, db_id, verbose)
    conv = materialization_metadata(result, "interaction_conversations")
    print(
        f"\ninteraction benchmark ({conv.get('conversations', 0)} conversations: up to {DEMO_MAX_QUESTIONS} "
        f"questions × 4 modes, {DEMO_MAX_STEPS} clarification turn(s)): "
        f"{'succeeded' if result.success else 'FAILED'}"
    )
    print("\n".join(table4_lines(stored_metric_rows(db_id) or [])))
    return code
