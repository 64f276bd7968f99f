"""AmbiTab evaluation assets (thin: load records, call pipelines.ambitab.protocol, return tables).

Per corpus partition::

    ambitab_records ─ ambitab_episodes ─ ambitab_metrics

* ``ambitab_episodes``: one row per record × seed × condition (asker, prompt, oracle, spec
  randomised?), every turn with its credit, response and LLM call ids, the SQL and the verdict.
  A rerun keeps the stored episodes and only runs the missing ones (LLM calls are cached too).
* ``ambitab_metrics``: Table 8 / Table 10 rows (SR, Prec, Rec, F1, gain, gap, the four leakage
  diagnostics with seed SD and AVT-cluster bootstrap intervals), as markdown tables and a PNG chart.
"""

import json

import polars as pl
from dagster import AssetExecutionContext, AssetIn, Config, Failure, MetadataValue, asset
from pydantic import Field

from assets.ambitab.corpus import RECORDS
from assets.ambitab.partitions import corpus_partitions
from assets.shared.charts import chart_metadata, chart_path
from assets.shared.checked_config import checked_config, op_config
from assets.shared.checks import contract_check_result, contract_check_spec
from assets.shared.io_manager import artifact_output, keyed_output, preview_markdown
from assets.shared.pools import LLM_POOL
from assets.shared.progress import step_progress
from assets.shared.resources import CouncilResource
from pipelines.ambitab.protocol.episode import EPISODE_KEY, RunSettings, episodes_frame
from pipelines.ambitab.protocol.prompts import DEFAULT_ASKER_PROMPT, EPISODES_CODE_VERSION
from pipelines.ambitab.protocol.runs import check_names, make_solver, plan_conditions, run_conditions
from pipelines.ambitab.protocol.tables import (
    chart_png,
    metrics_rows,
    table8_markdown,
    table10_markdown,
    table15_markdown,
)
from pipelines.ambitab.protocol.task import Task, select_tasks
from pipelines.ambitab.protocol.verifier import Verifier
from pipelines.ambitab.record import records_from_frame
from pipelines.ambitab.training import asker_names  # noqa: F401  (makes checkpoint:<id> an asker name)
from pipelines.ambitab.training.checkpoints import PREFIX, check_held_out, resolve_checkpoint
from quality.ambitab import AMBITAB_EPISODES
from resources.llm.failures import ProviderUnavailable
from storage.artifacts import upsert_rows

GROUP = "ambitab_eval"
EPISODES = "ambitab_episodes"
METRICS = "ambitab_metrics"


class AmbitabEvalConfig(Config):
    """Which conditions to run (defaults: the paper's inference comparison on the deterministic oracle)."""

    askers: list[str] = Field(
        default=["none", "full", "full_adv", "generic", "llm"],
        description="none, full, full_adv, generic, llm, or a dotted path to a custom asker",
    )
    oracles: list[str] = Field(
        default=["det"], description="det, det_intent, det_knowledge, llm, llm_scoped, llm_unfiltered, hybrid, stress"
    )
    prompts: list[str] = Field(
        default=[DEFAULT_ASKER_PROMPT], description="LLM asker prompts: direct, checklist_chat, checklist_ledger"
    )
    seeds: list[int] = Field(default=[0, 1, 2], description="run seeds (shared by asker and solver)")
    solver: str = Field(default="llm", description="llm (the solvers council) or empty (asking metrics only)")
    split: str | None = Field(default=None, description="only records of this split (e.g. slice_test)")
    limit: int | None = Field(default=None, description="at most this many records (whole AVTs, in AVT order)")
    diagnostics: bool = Field(default=True, description="add the runs the leakage diagnostics need for LLM oracles")
    spec_randomisation: bool = Field(default=False, description="add the spec-randomised asker runs (ΔRec_spec)")
    skip_clear: bool = Field(default=True, description="|Amb| = 0 records skip clarification")
    sql_grounding: bool | None = Field(default=None, description="scoped LLM oracle sees the reference SQL")
    concurrency: int = Field(default=8, ge=1, description="episodes in flight at once")


# Key columns an episode table written before issue 20 lacks: filled so the old rows stay (never
# dropped) and show in reports as "(not recorded)", apart from every run that records them.
_LEGACY_KEY_FILL = {
    "asker_model": "(not recorded)",
    "oracle_model": "(not recorded)",
    "solver_model": "(not recorded)",
    "budget": 2,
    "options": "(not recorded)",
}


def stored_episodes(corpus: str) -> pl.DataFrame:
    """Every stored episode of ``corpus`` (all records, all conditions), old key columns filled."""
    from storage.stores import latest_frame

    df = latest_frame(EPISODES, corpus)
    if df is None:
        return episodes_frame([])
    fill = [pl.lit(v).alias(c) for c, v in _LEGACY_KEY_FILL.items() if c not in df.columns]
    return df.with_columns(fill) if fill else df


def _call_stats(rows: list[dict]) -> dict:
    """LLM calls behind the new episodes: distinct calls and how they ended (from the call log)."""
    from resources.llm.registry import call_log

    ids = {c for r in rows for c in [*(r.get("asker_call_ids") or []), r.get("solver_call_id")] if c}
    ids |= {c for r in rows for t in json.loads(r["turns_json"]) for c in t.get("oracle_call_ids") or []}
    if not ids:
        return {"llm_calls": 0}
    log = call_log()
    statuses = [getattr(log.get(c), "status", "missing") for c in ids]
    return {"llm_calls": len(ids), **{f"llm_calls_{s}": statuses.count(s) for s in sorted(set(statuses))}}


@asset(
    name=EPISODES,
    partitions_def=corpus_partitions,
    group_name=GROUP,
    code_version=EPISODES_CODE_VERSION,
    ins={"records": AssetIn(RECORDS)},
    check_specs=[contract_check_spec(AMBITAB_EPISODES, EPISODES)],
    description="Ask-then-solve episodes (record × seed × asker × prompt × oracle), every turn kept.",
    pool=LLM_POOL,
    config_schema=checked_config(AmbitabEvalConfig),  # the shared launch rule (#45 item 1)
)
def ambitab_episodes(context: AssetExecutionContext, council: CouncilResource, records: pl.DataFrame):
    config = AmbitabEvalConfig(**op_config(context))
    tasks = select_tasks([Task.from_record(r) for r in records_from_frame(records)], config.split, config.limit)
    if not tasks:
        raise Failure(
            f"{context.partition_key}: no records to evaluate (split={config.split!r}); "
            "materialize ambitab_records for this corpus first"
        )
    try:
        askers, oracles, prompts = check_names(config.askers, config.oracles, config.prompts, config.solver)
        for a in askers:  # a trained asker never meets its training records
            if a.startswith(PREFIX):
                check_held_out(resolve_checkpoint(a), tasks)
    except ValueError as exc:
        raise Failure(f"invalid evaluation config: {exc}") from exc
    stored = stored_episodes(context.partition_key)
    conditions = plan_conditions(
        askers, oracles, prompts, diagnostics=config.diagnostics, spec_randomisation=config.spec_randomisation
    )
    try:
        solver = make_solver(config.solver, council.get_council)
        # items are episodes (condition × record × seed; those already stored are skipped)
        total = len(conditions) * len(tasks) * len(config.seeds)
        with step_progress(context, total=total) as p:
            rows = run_conditions(
                tasks,
                conditions,
                config.seeds,
                council_factory=council.get_council,
                solver=solver,
                verifier=Verifier(),
                settings=RunSettings(skip_clear=config.skip_clear),
                sql_grounding=config.sql_grounding,
                skip=set(stored["episode_id"].to_list()) if stored.height else None,
                concurrency=config.concurrency,
                progress=context.log.info,
                on_episode=lambda: p.advance(1),
            )
    except ProviderUnavailable as exc:
        raise Failure(f"{exc} (completed LLM calls are cached: re-execute from failure)", allow_retries=True) from exc
    except ValueError as exc:
        raise Failure(f"invalid evaluation config: {exc}") from exc
    except KeyError as exc:  # a role the council config lacks (and no `default` council to fill it)
        raise Failure(
            f"council config: {exc.args[0] if exc.args else exc}; add the askers / solvers / oracles "
            "councils or a `default` council"
        ) from exc
    # a growing table: this run adds or replaces exactly its own keys, every other stored episode stays.
    # Only the run's rows go to the store, which merges them into the rows stored when it writes: a
    # concurrent run's episodes, stored after `stored` was read, are kept (issue 34 item 1). The
    # counts below are against `stored`; the stored total is the output's dagster/row_count.
    new = episodes_frame(rows)
    merged = upsert_rows(stored if stored.height else None, new, EPISODE_KEY)
    df = merged.frame
    yield keyed_output(
        new,
        EPISODE_KEY,
        legacy_fill=_LEGACY_KEY_FILL,
        episodes=df.height,
        new_episodes=merged.added,
        replaced_episodes=merged.replaced,
        kept_episodes=merged.kept,
        reused_episodes=total - len(rows),
        records=len(tasks),
        episode_key=MetadataValue.text(", ".join(EPISODE_KEY)),
        conditions=MetadataValue.md("\n".join(f"- {c.label}" for c in conditions)),
        fallback_stops=int(df["fallback_stop"].sum()) if df.height else 0,
        unverifiable=int((df["status"] == "unverifiable").sum()) if df.height else 0,
        **_call_stats(rows),
    )
    yield contract_check_result(AMBITAB_EPISODES, df)


@asset(
    name=METRICS,
    partitions_def=corpus_partitions,
    group_name=GROUP,
    code_version="1",
    ins={"episodes": AssetIn(EPISODES), "records": AssetIn(RECORDS)},
    description="Table 8 / Table 10 metrics with seed SDs and AVT-cluster bootstrap intervals; chart.",
)
def ambitab_metrics(context: AssetExecutionContext, episodes: pl.DataFrame, records: pl.DataFrame):
    tasks = [Task.from_record(r) for r in records_from_frame(records)]
    ids = set(episodes["record_id"].to_list()) if episodes.height else set()
    df = metrics_rows(episodes, [t for t in tasks if t.record_id in ids])
    chart = chart_png(df, chart_path(context, METRICS, df))
    yield artifact_output(
        df,
        table8=MetadataValue.md(table8_markdown(df)),
        table10=MetadataValue.md(table10_markdown(df)),
        stress_test=MetadataValue.md(table15_markdown(df)),
        **chart_metadata(chart, "AmbiTab success rates"),
        preview_rows=MetadataValue.md(preview_markdown(df, rows=10) if df.height else "no rows"),
    )


AMBITAB_EVAL_ASSETS = [ambitab_episodes, ambitab_metrics]
