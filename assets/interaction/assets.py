"""ABISS interaction benchmark assets (§5–§6), partitioned by database. Thin: config → pipelines.interaction.

dataset ─ interaction_subset ─ interaction_conversations ─ interaction_scores ─ interaction_metrics
seed_databases, schema_context ─┘ (schema prompt, database path)
"""

import textwrap
from collections import Counter

import polars as pl
from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    Config,
    Failure,
    MetadataValue,
    asset,
)
from pydantic import Field

from assets.shared.charts import chart_metadata, chart_path, report_file_metadata
from assets.shared.checked_config import checked_config, op_config
from assets.shared.checks import contract_check_result, contract_check_spec
from assets.shared.io_manager import GROWING, artifact_output, code_markdown, keyed_output
from assets.shared.partitions import databases_partitions
from assets.shared.pools import LLM_POOL
from assets.shared.progress import step_progress
from assets.shared.resources import CouncilResource, SafeSqlResource, seed_row
from pipelines.interaction import PIPELINE_VERSION
from pipelines.interaction import metrics as M
from pipelines.interaction import tables as T
from pipelines.interaction.balance import partition_subset
from pipelines.interaction.dialogue import MAX_STEPS, run_benchmark
from pipelines.interaction.ends import INCOMPLETE_ENDS, SYSTEM_FAILED
from pipelines.interaction.modes import MODES, parse_modes
from pipelines.interaction.user import MAX_FRAGMENTS, members_without_usable_answer
from quality.interaction import ENDS, INTERACTION_SCORES, INTERACTION_TURNS

GROUP = "interaction"


class SubsetConfig(Config):
    """Which validated questions are evaluated (ABISS §6 balances every subcategory)."""

    balanced: bool = Field(
        False,
        description="down-sample every subcategory (or group) to the smallest one, over "
        "the questions of every database in `pool` (the paper balances over all databases)",
    )
    balance_by: str = Field("subcategory", description="'subcategory' (the paper) or 'group' (the reference CLI)")
    seed: int = 42
    max_questions: int | None = Field(
        None,
        description="keep at most this many, stratified by subcategory (or "
        "group) and seeded; over the pool when balanced, else over this database",
    )
    pool: list[str] | None = Field(
        None, description="databases balanced together (a dataset); default: every registered database with questions"
    )
    subcategories: list[str] | None = Field(None, description="only these subcategory ids")
    source: str = Field(
        "auto",
        description="'dataset' (the pipeline's), 'imported_dataset' (`quandary import`), "
        "or 'auto': the pipeline's dataset when this partition has one, else the imported one",
    )


class ConversationConfig(Config):
    agents: list[str] | None = Field(
        None, description="system_agents member names and/or package.module:Class paths; default: every member"
    )
    modes: list[str] = Field(default=list(MODES), description="ground_truth, predicted, taxonomy_only, taxonomy_free")
    max_steps: int = Field(MAX_STEPS, ge=0, description="clarification turns before the final turn")
    candidate_filter: str = Field("label", description="'label' (paper: only matching voters answer) or 'all'")
    max_fragments: int | None = Field(
        MAX_FRAGMENTS,
        description="at most this many gold-SQL fragments ground a Technical "
        "answer (the most chosen first); null = no cap (the reference)",
    )
    workers: int = Field(8, ge=1)


def check_conversations_on_launch(values: dict) -> None:
    """Modes, bounds, agents and the council file, checked on every launch (UI included)."""
    from assets.shared.preflight import check_council
    from pipelines.interaction.agents import load_agent

    parse_modes(values.get("modes"))
    for key, low in (("max_steps", 0), ("workers", 1), ("max_fragments", 1)):
        if values.get(key) is not None and values[key] < low:
            raise ValueError(f"{key}: must be at least {low} (got {values[key]})")
    if values.get("candidate_filter") not in ("label", "all"):
        raise ValueError(f"candidate_filter: use 'label' or 'all' (got {values.get('candidate_filter')!r})")
    members = check_council().councils.get("system_agents", [])
    for spec in values.get("agents") or ():
        if spec not in members:
            if ":" not in spec and "." not in spec:
                raise ValueError(
                    f"agents: {spec!r} is neither a system_agents council member "
                    f"({', '.join(members)}) nor a dotted path package.module:Class"
                )
            load_agent(spec, None)  # imports it: a typo'd path is refused here


class ScoreConfig(Config):
    order_sensitive: bool = Field(False, description="EX: gold top-level ORDER BY makes row order significant")


class GoldConfig(Config):
    gold_timeout_s: float = Field(
        M.GOLD_TIMEOUT_S,
        gt=0,
        le=3600,
        description="budget of each gold query (trusted, run once per gold and database version for every "
        "agent and mode); predictions keep the safe executor's budget",
    )


_db = seed_row  # the seed database row, its path the file to read on this node


def dataset_source(db_id: str, source: str = "auto") -> str | None:
    """Which questions to evaluate: the pipeline's ``dataset`` or ``quandary import``'s own asset
    (import never overwrites the pipeline's dataset). ``None`` when the chosen one is missing."""
    from pipelines.abiss.outputs import IMPORTED_ASSET
    from storage.stores import artifact_store

    store = artifact_store()
    names = {"auto": ("dataset", IMPORTED_ASSET), "dataset": ("dataset",), IMPORTED_ASSET: (IMPORTED_ASSET,)}.get(
        source
    )
    if names is None:
        raise ValueError(f"unknown source {source!r}: use dataset, {IMPORTED_ASSET} or auto")
    return next((n for n in names if store.latest_location(n, db_id) is not None), None)


@asset(
    partitions_def=databases_partitions,
    group_name=GROUP,
    code_version="2",
    deps=["dataset"],
    description="The questions evaluated: the partition's dataset (or the imported one), optionally balanced "
    "per subcategory.",
)
def interaction_subset(context: AssetExecutionContext, config: SubsetConfig):
    try:
        df, source, pool = select_questions(context.partition_key, config)
    except ValueError as exc:
        raise Failure(str(exc)) from exc
    context.log.info(f"evaluating questions from {source}[{context.partition_key}]")
    if config.balanced:
        context.log.info(f"balancing over {len(pool)} database(s): {', '.join(pool)}")
    by_sub = dict(df.group_by("subcategory").len().iter_rows()) if df.height else {}
    yield artifact_output(
        df,
        questions=df.height,
        source=source,
        balanced=config.balanced,
        balance_by=config.balance_by,
        seed=config.seed,
        by_subcategory=MetadataValue.json(by_sub),
        pool=", ".join(pool),
    )


def select_questions(partition: str, config: SubsetConfig) -> tuple[pl.DataFrame, str, list[str]]:
    """The questions a run evaluates, the source they come from (``dataset`` or the imported one)
    and the pool balanced over; the asset and the plan line share it, so the plan counts what the
    run will do (#30 item 6). Raises ValueError with the one-line reason."""
    from storage.stores import artifact_store

    source = dataset_source(partition, config.source)
    if source is None:
        raise ValueError(
            f"no dataset for {partition!r}: run `quandary run --db {partition}` or `quandary import FILE` first"
        )
    dataset = artifact_store().read_latest(source, partition)
    pooled, pool = dataset.to_dicts(), [partition]
    if config.balanced:
        pooled, pool = _pooled_rows(partition, dataset, config)
    rows = partition_subset(
        pooled,
        partition,
        balanced=config.balanced,
        by=config.balance_by,
        seed=config.seed,
        max_questions=config.max_questions,
        subcategories=config.subcategories,
    )
    df = pl.DataFrame(rows, schema=dataset.schema) if rows else dataset.clear()
    return df, source, pool


def _pooled_rows(partition: str, dataset: pl.DataFrame, config: SubsetConfig) -> tuple[list[dict], list[str]]:
    """The questions of every database in the pool (default: every registered one with questions)."""
    from resources.catalog import Catalog
    from storage.stores import artifact_store

    registered = Catalog().ids()
    pool = list(config.pool) if config.pool else registered
    unknown = [d for d in pool if d not in registered]
    if unknown:
        raise ValueError(
            f"pool: {', '.join(map(repr, unknown))} not registered; use `quandary db register` or drop them"
        )
    rows, used = dataset.to_dicts(), [partition]
    for db in pool:
        if db == partition:
            continue
        source = dataset_source(db, config.source)
        if source is not None:
            rows += artifact_store().read_latest(source, db).to_dicts()
            used.append(db)
    return rows, sorted(used)


@asset(
    partitions_def=databases_partitions,
    group_name=GROUP,
    code_version=PIPELINE_VERSION,
    # a run that produced no conversations never replaces stored ones (#42 item 2)
    metadata={GROWING: True},
    check_specs=[
        contract_check_spec(INTERACTION_TURNS, "interaction_conversations"),
        AssetCheckSpec(
            "within_turn_limit",
            asset="interaction_conversations",
            description="No conversation has more than max_steps + 1 system turns.",
        ),
        AssetCheckSpec(
            "votes_join_logged_calls",
            asset="interaction_conversations",
            description="Every system turn, label vote, answer and judge vote joins llm_calls.",
        ),
    ],
    config_schema=checked_config(ConversationConfig, check_conversations_on_launch),
    pool=LLM_POOL,
    description="The dialogues: one row per system turn with the user's answer, relevancy and every vote.",
)
def interaction_conversations(
    context: AssetExecutionContext,
    council: CouncilResource,
    interaction_subset: pl.DataFrame,
    schema_context: pl.DataFrame,
    seed_databases: pl.DataFrame,
):
    from pipelines.interaction.agents import load_agent
    from pipelines.interaction.user import SimulatedUser

    config = ConversationConfig(**op_config(context))

    try:
        modes = parse_modes(config.modes)
        system = council.get_council("system_agents")
        agents = [load_agent(a, system) for a in (config.agents or system.member_names)]
        user = SimulatedUser(
            council.get_council("user_simulator"),
            config.candidate_filter,
            max_fragments=config.max_fragments,
            log=context.log,
        )
    except ValueError as exc:
        raise Failure(str(exc)) from exc
    log = council.get_council("user_simulator").log
    before = log.count() if log else 0

    rows = interaction_subset.to_dicts()
    # items are conversations (agent × question × mode); the council counts the calls
    with step_progress(context, total=len(agents) * len(rows) * len(modes)) as p:
        convs, skipped = run_benchmark(
            agents,
            rows,
            modes,
            user,
            schema_context["schema_context"][0],
            _db(seed_databases)["path"],
            config.max_steps,
            config.workers,
            lambda done, total: p.advance(1),
        )
    df = T.turns_frame(convs, config.max_steps)
    broken = members_without_usable_answer(convs)
    if broken:
        context.log.warning(
            "user-council member(s) with no usable answer (every call failed or was unreadable): "
            + ", ".join(f"{m} ({n})" for m, n in broken.items())
        )
    yield artifact_output(
        df,
        conversations=len(convs),
        turns=df.height,
        agents=", ".join(a.name for a in agents),
        modes=", ".join(modes),
        skipped=MetadataValue.json(skipped[:50]),
        n_skipped=len(skipped),
        new_llm_calls=(log.count() - before) if log else 0,
        # counted in Python: a frame inferred from the conversations broke on mixed-type rows (#38)
        ends=MetadataValue.json(dict(Counter(c["end"] for c in convs))),
        # conversations whose user turn could not be produced (a council call failed) or whose system
        # endpoint gave no answer: not scored, and the next run retries exactly the failed calls (the
        # call log caches only answers)
        incomplete=sum(c["end"] in INCOMPLETE_ENDS for c in convs),
        system_failed=sum(c["end"] == SYSTEM_FAILED for c in convs),
        members_without_usable_answer=MetadataValue.json(broken),
        hallucinated_node_ids=int(df["invalid_node_ids"].list.len().sum()) if df.height else 0,
    )
    yield contract_check_result(INTERACTION_TURNS, df)
    too_long = (
        df.group_by("conversation_id").len().filter(pl.col("len") > config.max_steps + 1).height if df.height else 0
    )
    yield AssetCheckResult(
        check_name="within_turn_limit",
        passed=too_long == 0,
        metadata={"too_long": too_long, "limit": config.max_steps + 1},
    )
    ids = T.all_call_ids(df) if df.height else []
    missing = [i for i in ids if log is None or log.get(i) is None]
    yield AssetCheckResult(
        check_name="votes_join_logged_calls",
        passed=not missing,
        severity=AssetCheckSeverity.ERROR,
        metadata={"call_ids": len(ids), "missing": MetadataValue.json(missing[:20])},
    )


@asset(
    partitions_def=databases_partitions,
    group_name=GROUP,
    code_version=PIPELINE_VERSION,
    description="Each gold query's result as row count and order-independent digest, computed once per gold "
    "and database version (kept across runs) and reused by every agent and mode (#30 item 4).",
    config_schema=checked_config(GoldConfig),  # a finite budget, checked before launch (#45 item 1)
)
def interaction_gold(
    context: AssetExecutionContext,
    interaction_subset: pl.DataFrame,
    seed_databases: pl.DataFrame,
):
    from storage.stores import latest_frame

    config = GoldConfig(**op_config(context))
    stored = latest_frame("interaction_gold", context.partition_key)
    golds = M.GoldResults(
        _db(seed_databases)["path"], config.gold_timeout_s, stored.to_dicts() if stored is not None else None
    )
    failed = {}
    for sql in sorted({q["sql"] for q in interaction_subset.iter_rows(named=True) if q.get("sql")}):
        out = golds.summary(sql)
        if not out.ok and not getattr(out, "digested", False):
            failed[sql[:200]] = out.one_line()
    new = T.gold_frame(golds.rows())
    if failed:
        context.log.warning(f"{len(failed)} gold quer{'y' if len(failed) == 1 else 'ies'} failed: EX undecided")
    # this run's rows only: the store merges them into what is stored when it writes, so two runs of
    # one database at once keep both runs' golds (#34 item 1)
    yield keyed_output(
        new,
        T.GOLD_KEY,
        golds=new.height,
        executed=golds.executed,
        reused_from_earlier_runs=golds.reused,
        failed=len(failed),
        failed_examples=MetadataValue.json(dict(list(failed.items())[:10])),
        gold_timeout_s=config.gold_timeout_s,
    )


@asset(
    partitions_def=databases_partitions,
    group_name=GROUP,
    code_version=PIPELINE_VERSION,
    check_specs=[
        contract_check_spec(INTERACTION_SCORES, "interaction_scores"),
        AssetCheckSpec(
            "every_conversation_ends",
            asset="interaction_scores",
            description="Every conversation ends in SQL, feedback, or an explicit give-up.",
        ),
    ],
    description="Per conversation: recognition, classification, EX (relaxed equivalence), FB (council vote).",
    pool=LLM_POOL,
)
def interaction_scores(
    context: AssetExecutionContext,
    config: ScoreConfig,
    council: CouncilResource,
    safe_sql: SafeSqlResource,
    interaction_conversations: pl.DataFrame,
    interaction_subset: pl.DataFrame,
    interaction_gold: pl.DataFrame,
    schema_context: pl.DataFrame,
    seed_databases: pl.DataFrame,
):
    schema = schema_context["schema_context"][0]
    role = M.feedback_role(council.council_config().councils)
    judge = M.council_feedback_judge(council.get_council(role), schema)
    questions = {r["question_id"]: r for r in interaction_subset.iter_rows(named=True)}
    convs = T.conversations_from_turns(interaction_conversations) if interaction_conversations.height else []
    # each gold's stored digest (interaction_gold); executed here only when a comparison needs its rows
    golds = M.GoldResults(_db(seed_databases)["path"], stored=interaction_gold.to_dicts())
    scores = [
        M.score_conversation(
            c,
            questions[c["question_id"]],
            _db(seed_databases)["path"],
            judge,
            config.order_sensitive,
            schema,
            safe_sql.timeout_s,
            golds,
        )
        for c in convs
    ]
    df = T.scores_frame(scores)
    yield artifact_output(
        df,
        conversations=df.height,
        feedback_judges=role,
        order_sensitive=config.order_sensitive,
        gold_queries_executed=golds.executed,
        gold_digests_reused=golds.reused,
    )
    yield contract_check_result(INTERACTION_SCORES, df)
    bad = df.filter(~pl.col("end").is_in(list(ENDS))).height if df.height else 0
    yield AssetCheckResult(check_name="every_conversation_ends", passed=bad == 0, metadata={"unfinished": bad})


@asset(
    partitions_def=databases_partitions,
    group_name=GROUP,
    code_version=PIPELINE_VERSION,
    metadata={GROWING: True},
    description="Tables 4, 5, 6 and Appendix D as one long table, with the conversations not counted "
    "(incomplete, undecided) and the leakage diagnostics; Figure 2 as a text table and a PNG; the "
    "whole report as a text file (report_path).",
)
def interaction_metrics(
    context: AssetExecutionContext,
    interaction_scores: pl.DataFrame,
    interaction_conversations: pl.DataFrame,
    interaction_subset: pl.DataFrame,
):
    from pipelines.interaction.leakage import leakage_rows, observations

    rows = M.metric_rows(interaction_scores.to_dicts()) if interaction_scores.height else []
    questions = {r["question_id"]: r for r in interaction_subset.iter_rows(named=True)}
    rows += leakage_rows(observations(interaction_conversations.to_dicts(), questions))
    complete = interact_command(context.partition_key, context.run.run_config)
    # the command is stored with the tables, so `quandary report interaction` prints it exactly
    df = T.metrics_frame(rows + [{"table": "run", "metric": "complete_with", "slice": complete}], context.partition_key)
    text = M.report_text(rows, complete)
    png = M.figure2_png(rows, chart_path(context, "interaction_metrics", df))
    k, n = M.incomplete_share(rows)
    provisional = M.is_provisional(rows)
    # #42 item 7: what the page shows is within the value column (~40 characters at 1,366 px) and
    # under Dagster's inline limit, so it reads whole without "[Show Markdown]"; the whole report is
    # a file (report_path) and `quandary report interaction` prints it
    where = (
        "Table 4: table4; Figure 2: figure2. Table 6, Appendix D, the conversations not counted and the "
        f"leakage: the file at report_path, or `quandary report interaction --db {context.partition_key}`."
    )
    yield artifact_output(
        df,
        # #30 item 5: tables with incomplete conversations or undecided items are provisional, in the
        # UI as on the terminal
        provisional=provisional,
        undecided=MetadataValue.json(M.undecided_share(rows)),
        incomplete_conversations=f"{k} of {n}" + (f" ({100 * k / n:.1f} %)" if n else ""),
        **({"complete_with": complete} if provisional else {}),
        report=MetadataValue.md(
            code_markdown(
                "\n".join([*M.report_summary_lines(rows, UI_LINE_CHARS), "", _wrapped(where)]), width=UI_LINE_CHARS
            )
        ),
        **report_file_metadata(context, "interaction_metrics", df, text),
        figure2=MetadataValue.md(
            code_markdown("\n".join(M.figure2_lines(rows, UI_LINE_CHARS)) or "no conversations", width=UI_LINE_CHARS)
        ),
        **chart_metadata(png, "figure 2", image_key="figure2_chart", path_key="figure2_path"),
        # the key table as the report prints it (one line per agent): short enough to render in place
        # on the asset page; the long per-metric rows are the artifact (#31 item 7)
        table4=MetadataValue.md(
            f"```\n{chr(10).join(M.table4_narrow_lines(rows))}\n```"
            if df.filter(pl.col("table") == "table4").height
            else "no conversations"
        ),
        table4_legend=MetadataValue.md(
            code_markdown(_wrapped(M.TABLE4_LEGEND), width=UI_LINE_CHARS)
        ),  # the headers (#42 item 7)
    )


# What a line of a code block on the interaction pages may hold: the value column shows ~40
# monospace characters at 1,366 px beside the key column these pages need (measured in
# tests/dagster/test_ui_screenshot.py)
UI_LINE_CHARS = 38


def _wrapped(text: str) -> str:
    """``text`` wrapped to :data:`UI_LINE_CHARS` (a code line does not wrap on the page)."""
    return "\n".join(textwrap.wrap(text, UI_LINE_CHARS))


def interact_command(db: str, run_config: dict | None) -> str:
    """The exact `quandary interact` command that repeats a run's selection and options (#38 item 5):
    it completes the run's incomplete conversations (failed calls are re-asked, the rest is cached).
    Options the command line has no flag for are named after it, to be set in the UI launchpad."""
    import shlex

    from assets.shared.cards import council_path_of, op_values

    sub, conv = op_values(run_config, "interaction_subset"), op_values(run_config, "interaction_conversations")
    score, gold = op_values(run_config, "interaction_scores"), op_values(run_config, "interaction_gold")
    defaults = {**SubsetConfig().model_dump(), **ConversationConfig().model_dump(), **ScoreConfig().model_dump()}
    given = {k: v for k, v in {**sub, **conv, **score}.items() if v is not None and v != defaults.get(k)}
    args = ["quandary", "interact", "--db", db]
    for key, flag in (("agents", "--agents"), ("modes", "--modes"), ("pool", "--pool")):
        if key in given:
            args += [flag, *map(str, given[key])]
    for key in ("balanced", "order_sensitive"):
        if given.get(key):
            args.append("--" + key.replace("_", "-"))
    for key in ("balance_by", "seed", "max_questions", "max_steps", "candidate_filter"):
        if key in given:
            args += ["--" + key.replace("_", "-"), str(given[key])]
    council = council_path_of(run_config)
    command = (f"QUANDARY_COUNCIL_CONFIG={shlex.quote(council)} " if council else "") + shlex.join(args)
    no_flag = {k: given[k] for k in ("subcategories", "source", "max_fragments") if k in given}
    if gold.get("gold_timeout_s") not in (None, M.GOLD_TIMEOUT_S):
        no_flag["gold_timeout_s"] = gold["gold_timeout_s"]
    if no_flag:
        command += " (with " + ", ".join(f"{k}={v!r}" for k, v in no_flag.items()) + " set in the UI launchpad)"
    return command


INTERACTION_ASSETS = [
    interaction_subset,
    interaction_gold,
    interaction_conversations,
    interaction_scores,
    interaction_metrics,
]
