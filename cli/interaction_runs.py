"""How the interaction job is started from the CLI (``quandary interact``, and the ABISS §5 step
of ``quandary demo``), and where its results are read back."""

from cli.run_output import materialization_metadata, report_job_result, run_cli_job

# The demo evaluates a handful of questions so `make demo` stays within minutes on 2 cores.
# One question, four modes, the final turn only: each embedded call costs 10-60 s on 2 cores.
DEMO_MAX_QUESTIONS = 1


DEMO_MAX_STEPS = 0


def _card():
    from assets.interaction.card import CARD  # lazily: the command line starts without Dagster

    return CARD


def job_name() -> str:
    return _card().name


def run_config(args) -> dict:
    """The run config of `quandary interact`'s options, built by the job's card."""
    return _card().config(
        balanced=bool(args.balanced),
        balance_by=args.balance_by,
        seed=args.seed,
        max_questions=args.max_questions,
        pool=getattr(args, "pool", None) or None,
        max_steps=args.max_steps,
        candidate_filter=args.candidate_filter,
        agents=args.agents or None,
        modes=args.modes or None,
        order_sensitive=bool(args.order_sensitive),
    )


def stored_metric_rows(db_id: str | list[str] | None = None):
    """The metric rows of the stored scores (and the leakage rows of the stored conversations)."""
    from assets.interaction.card import stored_metric_rows as rows

    return rows(db_id)


def execute(
    db_id: str, config: dict, verbose: bool = False, name_instance: bool = True, council_path: str | None = None
):
    """The interaction job for one database through the shared CLI run path (instance line, progress,
    one line and exit 130 on Ctrl-C/SIGTERM); returns the result or an exit code."""
    return run_cli_job(job_name(), db_id, config, verbose, name_instance=name_instance, council_path=council_path)


def demo_interaction(db_id: str, verbose: bool = False, council_path: str | None = None) -> int:
    """`make demo` step: the embedded system agent in all four modes on a few validated questions
    (``council_path``: the demo's council, as its ABISS run had it)."""
    from pipelines.interaction.metrics import table4_lines
    from storage.stores import artifact_store

    if artifact_store().latest_location("dataset", db_id) is None:
        print("interaction: no dataset to evaluate")
        return 1
    cfg = _card().config(max_questions=DEMO_MAX_QUESTIONS, max_steps=DEMO_MAX_STEPS)
    print(
        f"\ninteraction benchmark: the embedded system agent on {DEMO_MAX_QUESTIONS} validated question(s) "
        f"in 4 modes, {DEMO_MAX_STEPS} clarification turn(s) ...",
        flush=True,
    )
    result = execute(db_id, cfg, verbose, name_instance=False, council_path=council_path)  # the ABISS run named it
    if isinstance(result, int):
        return result
    code = report_job_result(result, job_name(), db_id, verbose)
    conv = materialization_metadata(result, "interaction_conversations")
    print(
        f"\ninteraction benchmark ({conv.get('conversations', 0)} conversations: up to {DEMO_MAX_QUESTIONS} "
        f"questions × 4 modes, {DEMO_MAX_STEPS} clarification turn(s)): "
        f"{'succeeded' if result.success else 'FAILED'}"
    )
    print("\n".join(table4_lines(stored_metric_rows(db_id) or [])))
    return code
