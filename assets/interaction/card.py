"""The interaction job's card (ABISS §5, #28 item 1)."""

from assets.interaction.assets import (
    ConversationConfig,
    GoldConfig,
    ScoreConfig,
    SubsetConfig,
    dataset_source,
    select_questions,
)
from assets.interaction.definitions import interaction_job
from assets.shared.cards import JobCard, Plan, council, op_values, ops_config
from assets.shared.preflight import PreflightError, check_council, check_database
from pipelines.interaction.leakage import leakage_rows, observations
from pipelines.interaction.metrics import metric_rows, table4_lines
from pipelines.interaction.modes import MODES
from storage.audit import list_views, open_audit, query_frame
from storage.stores import artifact_store

SUBSET, CONVERSATIONS, SCORES = "interaction_subset", "interaction_conversations", "interaction_scores"
GOLD = "interaction_gold"
OPS = {SUBSET: SubsetConfig, GOLD: GoldConfig, CONVERSATIONS: ConversationConfig, SCORES: ScoreConfig}


def config(**values) -> dict:
    """Run config from plain values: each goes to the op whose config has that field (None = its default)."""
    return ops_config(OPS, values)


def estimate(partition: str, run_config: dict | None, council_path: str | None = None) -> Plan:
    subset = SubsetConfig(**op_values(run_config, SUBSET))
    conv = ConversationConfig(**op_values(run_config, CONVERSATIONS))
    # the run's own selection (source dataset or imported_dataset, balance, cap, subcategories)
    try:
        questions, source, _pool = select_questions(partition, subset)
        n_questions, detail = questions.height, f"questions from {source}"
    except ValueError as exc:
        n_questions, detail = 0, str(exc)
    except Exception as exc:  # noqa: BLE001 - a plan never stops a run: the run's own step reports it
        source = dataset_source(partition, subset.source)
        stored = artifact_store().read_latest(source, partition) if source else None
        n_questions = stored.height if stored is not None else 0
        if subset.max_questions is not None:
            n_questions = min(n_questions, int(subset.max_questions))
        detail = f"questions from {source} (not selected as the run will: {type(exc).__name__}: {exc})"
    modes = conv.modes or list(MODES)
    agents = conv.agents or council(council_path).councils["system_agents"]
    steps = int(conv.max_steps)
    conversations = n_questions * len(modes) * len(agents)
    # per turn: a system-agent call and a simulated-user answer; a final turn; a category prediction
    calls = conversations * (2 * steps + 2)
    return Plan(
        items=f"{conversations} conversations ({n_questions} questions × {len(modes)} modes × "
        f"{len(agents)} agent{'s' if len(agents) != 1 else ''}, up to {steps} clarification turns)",
        calls=calls,
        bound=True,
        detail=detail,
        role="system_agents",
        shrink="--max-questions 1 --max-steps 0 (one question, the final turn only)",
    )


def preflight(partition: str, run_config: dict | None, council_path: str | None = None) -> None:
    """Every option of `quandary interact` checked before its run exists, one line each naming the
    fix (#42 item 1): registered databases (listed), a dataset to evaluate, at least one question
    (a zero-sized run would replace the stored results with empty tables, #42 item 2), turn counts,
    modes, and agents that are system_agents members or importable classes."""
    from pipelines.interaction.agents import load_agent
    from pipelines.interaction.modes import parse_modes

    subset, conv = op_values(run_config, SUBSET), op_values(run_config, CONVERSATIONS)
    for db in [partition, *(subset.get("pool") or [])]:
        check_database(db)
    n = subset.get("max_questions")
    if n is not None and n < 1:
        raise PreflightError(
            f"--max-questions {n}: give at least 1 question (or leave it out for all); "
            "a run of no questions would replace the stored results with empty tables"
        )
    for key, flag, low in (
        ("max_steps", "--max-steps", 0),
        ("workers", "workers", 1),
        ("max_fragments", "max_fragments", 1),
    ):
        if conv.get(key) is not None and conv[key] < low:
            raise PreflightError(f"{flag} {conv[key]}: give {low} or more")
    members = check_council(council_path).councils.get("system_agents", [])
    for spec in conv.get("agents") or ():
        if spec in members:
            continue
        if ":" not in spec and "." not in spec:
            raise PreflightError(
                f"--agents {spec}: not a system_agents member of the council (members: "
                f"{', '.join(members) or 'none'}) nor a package.module:Class path"
            )
        try:
            load_agent(spec, None)  # imports it: a typo'd path is refused here
        except ValueError as exc:
            raise PreflightError(f"--agents {' '.join(str(exc).split())}") from None

    try:
        parse_modes(conv.get("modes"))
        questions, source, _pool = select_questions(partition, SubsetConfig(**subset))  # as the run will
    except ValueError as exc:  # no dataset, an unknown source or pool database: one line
        raise PreflightError(str(exc)) from None
    if questions.height == 0:  # a zero-sized run would replace the stored results with empty tables (#42 item 2)
        raise PreflightError(
            f"{partition}: these options select no question of {source}; nothing to evaluate "
            "(check --max-questions, --pool and the dataset)"
        )


def stored_metric_rows(db_id: str | list[str] | None = None):
    """The metric rows of the stored scores (and the leakage rows of the stored conversations)."""
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


def summary(result, partition: str) -> list[str]:
    """Table 4 over the partition's stored scores."""
    return table4_lines(stored_metric_rows(partition) or [])


CARD = JobCard(
    job=interaction_job,
    partitions="a registered database with a dataset",
    config=config,
    estimate=estimate,
    summary=summary,
    database_partitions=True,
    preflight=preflight,
)
