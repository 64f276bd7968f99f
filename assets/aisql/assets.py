"""AI-operator SQL assets (The Stochastic Shift), partitioned by SemBench scenario, dialect as a column.

    aisql_scenario_db ─ aisql_pairs ─┬─ aisql_split_queries
                                     ├─ aisql_executions ─ aisql_verdicts ─ aisql_metrics
                                     └─ aisql_sweep (flip-rate sweep + PNG)

    aisql_prediction_verdicts ─ aisql_prediction_metrics     (`quandary aisql evaluate FILE`, unpartitioned)

Thin: each asset calls :mod:`pipelines.aisql` and returns a table; checks are blocking.
"""

import hashlib
import json
from pathlib import Path

import polars as pl
from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    Config,
    ConfigurableResource,
    Failure,
    MetadataValue,
    StaticPartitionsDefinition,
    asset,
)
from pydantic import Field

from assets.shared.charts import chart_metadata
from assets.shared.checked_config import check_resource_config_on_launch, checked_config, op_config
from assets.shared.checks import contract_check_result, contract_check_spec
from assets.shared.io_manager import artifact_output, keyed_output, path_markdown, preview_markdown
from assets.shared.pools import LLM_POOL
from assets.shared.progress import step_progress
from assets.shared.resources import CouncilResource, check_paths_on_launch
from pipelines.aisql.evalset import (
    balance_table,
    build_pairs,
    execution_labels,
    generator_pairs,
    manual_labels_path,
    read_manual_labels,
    with_set,
)
from pipelines.aisql.methods import DETERMINISTIC, METHOD_LABELS, METHODS
from pipelines.aisql.metrics import class_markdown, metric_table, table1_markdown
from pipelines.aisql.pipeline import (
    AisqlSettings,
    council_for,
    evidence_from,
    flip_rate_sweep,
    make_runtime,
    prepare_db,
    run_executions,
    run_methods,
    schema_text,
    sweep_png,
)
from pipelines.aisql.prompts import PROMPT_VERSION
from pipelines.aisql.scenarios import SCENARIOS, ScenarioDB, get_scenario, leaked_label_columns, load_queries
from pipelines.aisql.splitter import split
from quality.aisql import (
    AISQL_EXECUTIONS,
    AISQL_METRICS,
    AISQL_PAIRS,
    AISQL_PREDICTION_METRICS,
    AISQL_PREDICTION_VERDICTS,
    AISQL_SCENARIO_DB,
    AISQL_SPLITS,
    AISQL_VERDICTS,
)
from storage.journal import RowJournal
from storage.paths import artifacts_dir, quandary_home

GROUP = "aisql"
scenario_partitions = StaticPartitionsDefinition(sorted(SCENARIOS))


class AisqlResource(ConfigurableResource):
    """Knobs of the AI-operator SQL evaluation (defaults: label oracle, p=0.1, every method)."""

    data_root: str = Field(default="../shared/data", description="folder holding sembench/files/<scenario>")
    backend: str = Field(default="oracle", description="oracle | council (the ai_operator role)")
    flip_rate: float = 0.1
    seed: int = 0
    budget: int = 5000
    sample: int | None = Field(default=None, description="rows per group kept in the scenario DB (LLM operators)")
    sample_groups: list[str] | None = Field(default=None, description="with sample: keep only these groups (movie ids)")
    variant_types: list[str] | None = Field(default=None, description="restrict controlled variant types")
    probe_n: int = 100
    timeout_s: float = Field(default=600.0, description="seconds per query (gold, candidate, parts, probes)")
    methods: list[str] = Field(default=list(METHODS))
    threshold: int = 3
    decision: str = "overall"
    relational_gate: bool = False
    compact_judge: bool = Field(default=False, description="short judge prompt for small local models")
    llm_split_fallback: bool = Field(
        default=False,
        description="when the AST splitter fails, ask the few-shot LLM "
        "splitter (the council's splitter role, else default)",
    )
    question_ids: list[str] | None = Field(default=None, description="restrict gold queries (e.g. ['Q2','Q3'])")
    dialects: list[str] = Field(default=["bigquery", "thalamusdb"])
    correct_share: float | None = 0.7
    generator_samples: int = Field(default=0, description="candidates per question from the generators council")
    generated_labels: str = Field(
        default="executed",
        description="labels of generator candidates: executed (label "
        "oracle at p=0 + structural rules; undecided ones left to `aisql label`) | manual",
    )
    sweep_rates: list[float] = Field(default=[0.0, 0.1, 0.2, 0.3])
    sweep_methods: list[str] = Field(default=["ex", "ours"])
    sweep_max_pairs: int = Field(default=40, description="labelled pairs per dialect in the sweep")

    def __init__(self, **data):
        super().__init__(**data)
        # issue 34 item 5: the data folder a launch names lies in the project's roots
        check_resource_config_on_launch(self, check_paths_on_launch("data_root"))

    def settings(self, **over) -> AisqlSettings:
        base = dict(
            backend=self.backend,
            flip_rate=self.flip_rate,
            seed=self.seed,
            budget=self.budget,
            sample=self.sample,
            probe_n=self.probe_n,
            methods=tuple(self.methods),
            threshold=self.threshold,
            decision=self.decision,
            relational_gate=self.relational_gate,
            compact_judge=self.compact_judge,
            llm_split_fallback=self.llm_split_fallback,
            timeout_s=self.timeout_s,
        )
        return AisqlSettings(**{**base, **over})

    def root(self) -> Path:
        return Path(self.data_root)


def _db(aisql: AisqlResource, scenario: str, rebuild: bool = False) -> ScenarioDB:
    return prepare_db(
        scenario,
        aisql.root(),
        quandary_home(),
        sample=aisql.sample,
        seed=aisql.seed,
        sample_groups=tuple(aisql.sample_groups) if aisql.sample_groups else None,
        rebuild=rebuild,
    )


def _schema_of(db: ScenarioDB):
    cache: dict[str, str] = {}

    def get(dialect: str) -> str:
        if dialect not in cache:
            cache[dialect] = schema_text(db.path, db.scenario, dialect)
        return cache[dialect]

    return get


def _log_progress(context):
    return lambda msg: context.log.info(msg)


@asset(
    partitions_def=scenario_partitions,
    group_name=GROUP,
    code_version="1",
    check_specs=[
        contract_check_spec(AISQL_SCENARIO_DB, "aisql_scenario_db"),
        AssetCheckSpec(
            "no_hidden_label_column",
            asset="aisql_scenario_db",
            blocking=True,
            description="No hidden label column (e.g. movie reviewState) is reachable in the AI-visible DB",
        ),
    ],
    description="The label-free SemBench scenario database (DuckDB; BigQuery names as views) and its separate label file.",
)
def aisql_scenario_db(context: AssetExecutionContext, aisql: AisqlResource):
    db = _db(aisql, context.partition_key, rebuild=True)
    sc = get_scenario(db.scenario)
    from pipelines.aisql.scenarios import visible_columns

    vis = visible_columns(db.path)
    rows = [
        {
            "scenario": sc.name,
            "table_name": t.name,
            "bigquery_name": f"{sc.bigquery_schema}.{t.bigquery_name}",
            "row_count": int(db.row_counts[t.name]),
            "columns": json.dumps(vis.get(f"main.{t.name}", [])),
            "hidden_excluded": json.dumps(list(t.hidden)),
            "db_path": str(db.path),
            "labels_path": str(db.labels_path),
            "sample": db.sample,
        }
        for t in sc.tables
    ]
    df = pl.DataFrame(rows, schema_overrides={"row_count": pl.Int64, "sample": pl.Int64})
    leaked = leaked_label_columns(db.path, sc)
    yield artifact_output(df, db_path=path_markdown(str(db.path)), preview=MetadataValue.md(preview_markdown(df)))
    yield contract_check_result(AISQL_SCENARIO_DB, df)
    yield AssetCheckResult(
        check_name="no_hidden_label_column",
        passed=not leaked,
        severity=AssetCheckSeverity.ERROR,
        metadata={
            "leaked": MetadataValue.text(", ".join(leaked) or "none"),
            "hidden": MetadataValue.text(json.dumps(sc.hidden)),
        },
    )


@asset(
    partitions_def=scenario_partitions,
    group_name=GROUP,
    code_version=f"1-{PROMPT_VERSION}",
    check_specs=[contract_check_spec(AISQL_PAIRS, "aisql_pairs")],
    description="Labelled evaluation pairs: SemBench gold AI-SQL x controlled variants (and generator candidates).",
    pool=LLM_POOL,
)
def aisql_pairs(
    context: AssetExecutionContext, aisql: AisqlResource, council: CouncilResource, aisql_scenario_db: pl.DataFrame
):
    scenario = context.partition_key
    golds = gold_queries(aisql, scenario)
    extra = []
    if aisql.generator_samples > 0:
        db = _db(aisql, scenario)
        extra = generator_pairs(
            council_for("generators", council.get_council),
            aisql.root(),
            get_scenario(scenario),
            golds,
            _schema_of(db),
            samples=aisql.generator_samples,
        )
        if aisql.generated_labels == "executed":  # independent of every judge measured (issue 19 item 10)
            extra = execution_labels(extra, db, budget=aisql.budget, seed=aisql.seed)
    df = build_pairs(
        scenario,
        aisql.root(),
        golds,
        correct_share=aisql.correct_share,
        seed=aisql.seed,
        extra_rows=extra,
        manual=read_manual_labels(manual_labels_path(quandary_home())),
        variant_types=tuple(aisql.variant_types) if aisql.variant_types else None,
    )
    counts = df.group_by("dialect", "label").len().sort("dialect", "label")
    yield artifact_output(
        df,
        pairs=MetadataValue.int(df.height),
        labelled=MetadataValue.int(int(df["label"].is_not_null().sum())),
        by_label=MetadataValue.md(preview_markdown(counts, rows=10)),
    )
    yield contract_check_result(AISQL_PAIRS, df)


def gold_queries(aisql: AisqlResource, scenario: str) -> list:
    """The scenario's gold AI queries this run judges: ``question_ids`` if given, else all but the
    default exclusions (shared by the asset and the CLI's plan)."""
    return [
        g
        for g in load_queries(scenario, aisql.root(), dialects=tuple(aisql.dialects))
        if (aisql.question_ids is None or g.question_id in aisql.question_ids)
        and (aisql.question_ids is not None or g.question_id not in _excluded(scenario))
    ]


def planned_pairs(aisql: AisqlResource, scenario: str) -> int:
    """How many labelled pairs ``aisql_pairs`` will hold before generator candidates (no LLM call)."""
    return build_pairs(
        scenario,
        aisql.root(),
        gold_queries(aisql, scenario),
        correct_share=aisql.correct_share,
        seed=aisql.seed,
        variant_types=tuple(aisql.variant_types) if aisql.variant_types else None,
    ).height


def _excluded(scenario: str) -> set[str]:
    from pipelines.aisql.evalset import DEFAULT_EXCLUDED

    return DEFAULT_EXCLUDED.get(scenario, set())


@asset(
    partitions_def=scenario_partitions,
    group_name=GROUP,
    code_version="1",
    check_specs=[contract_check_spec(AISQL_SPLITS, "aisql_split_queries")],
    description="Deterministic sqlglot split of every gold and candidate: structural part and one AI part per call.",
)
def aisql_split_queries(context: AssetExecutionContext, aisql_pairs: pl.DataFrame):
    keys = get_scenario(context.partition_key).key_columns()
    rows = []
    for p in aisql_pairs.iter_rows(named=True):
        for side, sql in (("gold", p["gold_sql"]), ("candidate", p["candidate_sql"])):
            r = split(sql, p["dialect"], keys)
            rows.append(
                {
                    "pair_id": p["pair_id"],
                    "side": side,
                    "dialect": p["dialect"],
                    "method": r.method,
                    "structural_sql": r.structural_sql,
                    "ai_parts_json": json.dumps([vars(a) for a in r.ai_parts]),
                    "n_ai_parts": len(r.ai_parts),
                    "error": r.error,
                }
            )
    df = pl.DataFrame(rows, schema_overrides={"n_ai_parts": pl.Int64})
    yield artifact_output(df, failed=MetadataValue.int(int((df["error"] != "").sum())))
    yield contract_check_result(AISQL_SPLITS, df)


@asset(
    partitions_def=scenario_partitions,
    group_name=GROUP,
    code_version="1",
    check_specs=[contract_check_spec(AISQL_EXECUTIONS, "aisql_executions")],
    description="Split execution: full gold/candidate, structural and AI parts, row diffs, per-call probe agreement.",
    pool=LLM_POOL,
)
def aisql_executions(
    context: AssetExecutionContext,
    aisql: AisqlResource,
    council: CouncilResource,
    aisql_scenario_db: pl.DataFrame,
    aisql_pairs: pl.DataFrame,
):
    db = _db(aisql, context.partition_key)
    settings = aisql.settings()
    runtime = make_runtime(settings, db, getter=council.get_council)
    try:
        with step_progress(context, total=aisql_pairs.height) as p:  # AI-operator calls via the council count too
            df, _ = run_executions(
                aisql_pairs, db, runtime, settings, lambda _msg: p.advance(1), getter=council.get_council
            )
    finally:
        runtime.close()
    t = runtime.totals
    yield artifact_output(
        df.with_columns(pl.lit(runtime.backend.name).alias("operator_backend")),
        operator_backend=MetadataValue.text(runtime.backend.name),
        calls_made=MetadataValue.int(t.made),
        calls_cached=MetadataValue.int(t.cached),
        calls_failed=MetadataValue.int(t.failed),
    )
    yield contract_check_result(AISQL_EXECUTIONS, df)


@asset(
    partitions_def=scenario_partitions,
    group_name=GROUP,
    code_version=f"1-{PROMPT_VERSION}",
    check_specs=[
        contract_check_spec(AISQL_VERDICTS, "aisql_verdicts"),
        AssetCheckSpec(
            "every_pair_every_method",
            asset="aisql_verdicts",
            blocking=True,
            description="Every pair has a verdict from every configured method",
        ),
    ],
    description="Verdicts of EX, LLM-SQL-Solver (M&M, E&C, each ± exec results) and the multilayered autorater.",
    pool=LLM_POOL,
)
def aisql_verdicts(
    context: AssetExecutionContext,
    aisql: AisqlResource,
    council: CouncilResource,
    aisql_pairs: pl.DataFrame,
    aisql_executions: pl.DataFrame,
):
    db = _db(aisql, context.partition_key)
    settings = aisql.settings()
    judges = (
        council_for("judges", council.get_council) if any(m not in DETERMINISTIC for m in settings.methods) else None
    )
    with step_progress(context, total=aisql_pairs.height * len(settings.methods)) as p:  # (pair, method) verdicts
        df = run_methods(
            aisql_pairs,
            aisql_executions,
            evidence_from(aisql_executions),
            settings,
            _schema_of(db),
            _log_progress(context),
            judges=judges,
            advance=p.advance,
        )
    have = set(zip(df["pair_id"].to_list(), df["method"].to_list()))
    missing = [(p, m) for p in aisql_pairs["pair_id"].to_list() for m in settings.methods if (p, m) not in have]
    yield artifact_output(
        df,
        errors=MetadataValue.int(int((df["status"] == "error").sum())),
        accepted=MetadataValue.int(int(df["accepted"].sum())),
    )
    yield contract_check_result(AISQL_VERDICTS, df)
    yield AssetCheckResult(
        check_name="every_pair_every_method",
        passed=not missing,
        severity=AssetCheckSeverity.ERROR,
        metadata={"missing": MetadataValue.int(len(missing)), "examples": MetadataValue.text(str(missing[:5]))},
    )


@asset(
    partitions_def=scenario_partitions,
    group_name=GROUP,
    code_version="1",
    check_specs=[contract_check_spec(AISQL_METRICS, "aisql_metrics")],
    description="Meta-evaluation: TPR, TNR, accuracy per set (synthetic variants / generated candidates), method "
    "and dialect with counts (the paper's Table 1), and the label balance beside the paper's.",
)
def aisql_metrics(context: AssetExecutionContext, aisql_pairs: pl.DataFrame, aisql_verdicts: pl.DataFrame):
    # the synthetic (variants) and generated (generator candidates) sets are reported separately
    df = metric_table(with_set(aisql_pairs), aisql_verdicts, by=("set", "dialect"))
    sets = [s for s in ("synthetic", "generated") if s in set(df["set"].to_list())]
    tables = {f"table1_{s}": MetadataValue.md(table1_markdown(df.filter(pl.col("set") == s))) for s in sets}
    # what each verdict claims, per method (#39 item 1): proofs, bounded proofs (k), witnesses, evidence
    tables |= {
        f"verdict_classes_{s}": MetadataValue.md(class_markdown(df.filter(pl.col("set") == s), METHOD_LABELS))
        for s in sets
    }
    yield artifact_output(df, **tables, balance=MetadataValue.md(preview_markdown(balance_table(aisql_pairs), rows=20)))
    yield contract_check_result(AISQL_METRICS, df)


@asset(
    partitions_def=scenario_partitions,
    group_name=GROUP,
    code_version=f"1-{PROMPT_VERSION}",
    description="Accuracy of each method as the label-oracle flip rate p grows (0 to 0.3), with a PNG chart.",
    pool=LLM_POOL,
)
def aisql_sweep(
    context: AssetExecutionContext, aisql: AisqlResource, council: CouncilResource, aisql_pairs: pl.DataFrame
):
    db = _db(aisql, context.partition_key)
    settings = aisql.settings(methods=tuple(aisql.sweep_methods), backend="oracle")
    # up to sweep_max_pairs labelled pairs per dialect
    pairs = aisql_pairs.filter(pl.col("label").is_not_null()).filter(
        pl.int_range(pl.len()).over("dialect") < aisql.sweep_max_pairs
    )
    res = flip_rate_sweep(
        pairs,
        db,
        settings,
        _schema_of(db),
        rates=tuple(aisql.sweep_rates),
        progress=_log_progress(context),
        getter=council.get_council,
    )
    png = sweep_png(
        res.metrics,
        artifacts_dir() / "aisql_sweep" / context.partition_key / "sweep.png",
        title=f"SemBench {context.partition_key}: accuracy vs AI-operator noise",
    )
    return artifact_output(
        res.metrics,
        **chart_metadata(png, "accuracy vs AI-operator noise", image_key="chart_image", path_key="chart"),
        pairs=MetadataValue.int(pairs.height),
    )


class EvaluateConfig(Config):
    """`quandary aisql evaluate`: the predictions file and the methods (as `aisql compare --methods`)."""

    predictions_path: str = Field(description="JSONL of {id, scenario, question, gold_sql, predicted_sql[, label]}")
    methods: list[str] = Field(default=["ex", "layers"], description="ex, layers, ours (the LLM autorater)")
    source_name: str | None = Field(
        default=None, description="the file as the user named it (recorded in the rows; never read)"
    )


# issue 34 item 5: a run reads predictions only from the project's roots (the CLI stages a copy of a
# file elsewhere: storage.paths.stage_input), and never echoes a path that came from {env: X}
check_evaluate_on_launch = check_paths_on_launch("predictions_path", exist=("predictions_path",))


PREDICTION_VERDICTS = "aisql_prediction_verdicts"


@asset(
    name=PREDICTION_VERDICTS,
    group_name=GROUP,
    config_schema=checked_config(EvaluateConfig, check_evaluate_on_launch),
    code_version=f"1-{PROMPT_VERSION}",
    check_specs=[contract_check_spec(AISQL_PREDICTION_VERDICTS, PREDICTION_VERDICTS)],
    description="One verdict row per user prediction (every layer of `aisql compare`), keyed by the file's "
    "content hash, prediction id, scenario and settings; other files' rows are kept.",
)
def aisql_prediction_verdicts(context: AssetExecutionContext, aisql: AisqlResource, council: CouncilResource):
    config = EvaluateConfig(**op_config(context))
    from pipelines.aisql.judging import open_judging
    from pipelines.aisql.predictions import (
        Engine,
        PredictionsError,
        evaluate,
        export,
        parse_methods,
        read_predictions,
        settings_key,
    )
    from storage.stores import latest_frame

    try:
        preds, digest = read_predictions(Path(config.predictions_path))
        methods = parse_methods(",".join(config.methods))
    except (PredictionsError, ValueError) as exc:
        raise Failure(str(exc)) from None
    settings = aisql.settings()

    def context_for(scenario: str):
        return open_judging(settings, _db(aisql, scenario), getter=council.get_council)

    judges = council_for("judges", council.get_council) if "ours" in methods else None
    stored = latest_frame(PREDICTION_VERDICTS)
    skey = settings_key(settings, methods)
    stem = f"{digest[:16]}-{hashlib.sha256(skey.encode()).hexdigest()[:8]}"
    journal = RowJournal(PREDICTION_VERDICTS, stem)  # verdicts finished before a kill -9 (#45 item 5)
    with step_progress(context, total=len(preds)) as p:  # predictions judged or reused
        df, reused, judged = evaluate(
            preds,
            digest,
            config.source_name or str(Path(config.predictions_path).resolve()),
            settings,
            methods,
            Engine(context_for, judges),
            stored=stored,
            advance=p.advance,
            journal=journal,
        )
    mine = df.filter((pl.col("predictions_sha256") == digest) & (pl.col("settings_key") == skey))
    folder = artifacts_dir() / PREDICTION_VERDICTS / "exports"
    paths = [export(mine, folder / f"{stem}.{ext}") for ext in ("jsonl", "csv")]
    from pipelines.aisql.predictions import KEY

    # only this file's rows go to the store, merged by KEY into the rows stored when it writes, so a
    # concurrent evaluation of another file keeps its verdicts (issue 34 item 1)
    yield keyed_output(
        mine,
        KEY,
        predictions=MetadataValue.int(len(preds)),
        reused=MetadataValue.int(reused),
        judged=MetadataValue.int(judged),
        predictions_sha256=MetadataValue.text(digest),
        export_jsonl=path_markdown(str(paths[0])),
        export_csv=path_markdown(str(paths[1])),
        accepted=MetadataValue.int(int(mine["accepted"].sum())),
    )
    journal.clear()  # the rows are stored (the IO manager handled the output above)
    yield contract_check_result(AISQL_PREDICTION_VERDICTS, df)


@asset(
    group_name=GROUP,
    code_version="1",
    check_specs=[contract_check_spec(AISQL_PREDICTION_METRICS, "aisql_prediction_metrics")],
    description="Table 1 (TPR / TNR / accuracy with counts) per predictions file, settings, dialect and method, "
    "over the labelled predictions; 'cannot decide' counts as a rejection and is shown on its own.",
)
def aisql_prediction_metrics(context: AssetExecutionContext, aisql_prediction_verdicts: pl.DataFrame):
    from pipelines.aisql.predictions import summary_markdown, summary_table

    df = summary_table(aisql_prediction_verdicts)
    yield artifact_output(df, table1=MetadataValue.md(summary_markdown(df)))
    yield contract_check_result(AISQL_PREDICTION_METRICS, df)


AISQL_EVALUATE_ASSETS = [aisql_prediction_verdicts, aisql_prediction_metrics]

AISQL_ASSETS = [
    aisql_scenario_db,
    aisql_pairs,
    aisql_split_queries,
    aisql_executions,
    aisql_verdicts,
    aisql_metrics,
    aisql_sweep,
]
