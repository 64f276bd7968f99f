"""ABISS generation and validation assets (thin: load inputs, call pipelines.abiss, return tables).

Graph per database partition::

    seed_databases ─ schema_context ─┐
    generation_requests ─ nlq_objects ─ candidates ─ s01 … s10 ─ dataset
                                                  └──────────────┴─ council_votes, rejection_report
"""

import enum

import polars as pl
from dagster import (
    AssetCheckSpec,
    AssetExecutionContext,
    AssetIn,
    AssetKey,
    Config,
    ConfigurableResource,
    Failure,
    MetadataValue,
    asset,
)
from pydantic import Field

from assets.shared.charts import chart_metadata, chart_path
from assets.shared.checked_config import check_resource_config_on_launch, checked_config, op_config
from assets.shared.checks import (
    REJECTION_CHECK,
    contract_check_result,
    contract_check_spec,
    rejection_bounds_check,
    table_metadata,
)
from assets.shared.io_manager import artifact_output, list_markdown, preview_markdown
from assets.shared.partitions import databases_partitions
from assets.shared.pools import LLM_POOL
from assets.shared.progress import step_progress
from assets.shared.resources import CouncilResource, SafeSqlResource, seed_row
from pipelines.abiss import groups as group_integrity
from pipelines.abiss import outputs, wellformed
from pipelines.abiss.generation import (
    CANDIDATE_EXTRA,
    NLQ_COLUMNS,
    check_provider,
    generate_nlq_objects,
    ground_sql,
    rows_frame,
)
from pipelines.abiss.grid import ALL_SUBCATEGORIES, PROGRAMMATIC, REQUEST_SCHEMA, GridSpec, expand_grid
from pipelines.abiss.prompts import PROMPT_VERSIONS
from pipelines.abiss.stages import STAGES, StageContext, run_stage
from pipelines.abiss.taxonomy import DEFAULT_STYLES, DIFFICULTY_BY_ID, STYLE_BY_ID, SUBCATEGORY_BY_ID
from quality.abiss import CANDIDATES, COUNCIL_VOTES, DATASET
from resources.llm.failures import ProviderUnavailable

GROUP_GEN = "generation"
GROUP_VAL = "validation"
GROUP_OUT = "abiss_outputs"


def _choices(name: str, ids) -> type[enum.Enum]:
    # Enums make the launchpad's config schema refuse an unknown value before a run exists
    return enum.Enum(name, {i: i for i in ids}, type=str)


SubcategoryId = _choices("SubcategoryId", SUBCATEGORY_BY_ID)
StyleId = _choices("StyleId", STYLE_BY_ID)
DifficultyId = _choices("DifficultyId", DIFFICULTY_BY_ID)


def _values(items):
    return None if items is None else tuple(getattr(i, "value", i) for i in items)


class GridConfig(Config):
    """The generation grid (ABISS §4.1/§4.3). Defaults are the paper's grid. Subcategories, styles
    and difficulties are enums, so the launchpad's editor flags unknown ones; ``n < 1``, unknown
    generators and a bad council file are refused when the run is launched, before it exists
    (assets/shared/checked_config.py), with the CLI's messages."""

    generators: list[str] | None = Field(
        default=None,
        description="council member names and/or 'programmatic'; default: programmatic + the generators council",
    )
    subcategories: list[SubcategoryId] = Field(default=list(ALL_SUBCATEGORIES))
    styles: list[StyleId] = Field(default=list(DEFAULT_STYLES))
    difficulties: list[DifficultyId] = Field(default=["simple", "moderate", "complex", "highly complex"])
    n: int = Field(default=3, description="samples per grid cell (at least 1)")
    seed: int = 42
    llm_subcategories: list[SubcategoryId] | None = Field(
        default=None, description="subcategories the LLM generators cover (default: all of `subcategories`)"
    )


class CascadeSettings(ConfigurableResource):
    """Knobs of the validation cascade."""

    order_sensitive: bool = False  # Appendix A tolerates row order; set True for BIRD-style ORDER BY checks
    result_preview_rows: int = 10
    # Share of provider-failed LLM calls a step tolerates (as abstentions) before it fails so it can be
    # re-executed from failure; 0 = any failure fails the step, so no decision rests on a missing vote.
    max_failed_call_share: float = 0.0
    # A step whose answers are mostly unparseable (a provider answering garbage) fails loudly.
    max_unparseable_share: float = 0.5
    max_rejection_rate: float = 0.95  # rejection_report check: flag stages rejecting more than this
    min_rejection_rate: float = 0.0
    # Step 0 (s00_wellformedness, pipelines/abiss/wellformed.py): deterministic checks before the council.
    # Not in the paper: set False for paper-exact runs (every candidate passes, marked not applied).
    wellformedness: bool = True
    # The paper judges each reading of an ambiguous question on its own, so a group can lose a reading;
    # True drops such groups from the dataset (the rejection report counts them either way).
    drop_incomplete_groups: bool = False
    # stages with fewer applicable candidates are not judged (2 of 2 rejected is no signal)
    min_entered_for_bounds: int = 5

    def __init__(self, **data):
        super().__init__(**data)
        check_resource_config_on_launch(self)  # the shared rule: finite shares and rates (#45 item 1)


_db = seed_row  # the seed database row, its path the file to read on this node


def check_grid_on_launch(values: dict) -> None:
    """The CLI's checks of the grid and the council file, on every launch (UI included)."""
    from assets.shared.preflight import check_council, check_grid

    check_grid(values, check_council())


@asset(
    partitions_def=databases_partitions,
    group_name=GROUP_GEN,
    code_version="1",
    config_schema=checked_config(GridConfig, check_grid_on_launch),
    description="The generation grid: generator × subcategory × style × difficulty × n for this database.",
)
def generation_requests(context: AssetExecutionContext, council: CouncilResource, seed_databases: pl.DataFrame):
    config = GridConfig(**op_config(context))
    generators = (
        config.generators
        if config.generators is not None
        else [PROGRAMMATIC, *council.get_council("generators").member_names]
    )
    spec = GridSpec(
        tuple(generators),
        _values(config.subcategories),
        _values(config.styles),
        _values(config.difficulties),
        config.n,
        config.seed,
        _values(config.llm_subcategories),
    )
    try:
        rows = expand_grid(spec, _db(seed_databases)["db_id"])
    except ValueError as exc:
        raise Failure(f"invalid grid config: {exc}") from exc
    df = pl.DataFrame(rows, schema=REQUEST_SCHEMA)
    yield artifact_output(df, requests=len(rows), generators=", ".join(generators))


@asset(
    partitions_def=databases_partitions,
    group_name=GROUP_GEN,
    code_version=PROMPT_VERSIONS["nlq_objects"],
    pool=LLM_POOL,
    description="Step 1: NLQ objects (question, evidence, hidden knowledge / feedback); two per ambiguous request.",
)
def nlq_objects(
    context: AssetExecutionContext,
    council: CouncilResource,
    cascade: CascadeSettings,
    generation_requests: pl.DataFrame,
    schema_context: pl.DataFrame,
    seed_databases: pl.DataFrame,
):
    requests = generation_requests.to_dicts()
    for_llm = sum(r["generator"] != PROGRAMMATIC for r in requests)
    needs_llm = bool(for_llm)
    # the items are the requests the LLM answers (each done at its answer); programmatic ones take no time
    with step_progress(context, total=for_llm):
        rows, stats = generate_nlq_objects(
            requests,
            schema_context["schema_context"][0],
            _db(seed_databases)["path"],
            council.get_council("generators") if needs_llm else None,
        )
    try:
        check_provider(
            "nlq_objects",
            stats["llm_requests"],
            stats["provider_failures"],
            cascade.max_failed_call_share,
            rows=[r for r in rows if r["generator"] != PROGRAMMATIC],
            max_unparseable_share=cascade.max_unparseable_share,
        )
    except ProviderUnavailable as exc:
        raise Failure(str(exc), allow_retries=True) from exc
    df = rows_frame(rows, NLQ_COLUMNS)
    skipped = stats.pop("programmatic_skipped")
    yield artifact_output(df, **stats, programmatic_skipped=MetadataValue.json(skipped))


@asset(
    partitions_def=databases_partitions,
    group_name=GROUP_GEN,
    code_version=PROMPT_VERSIONS["candidates"],
    pool=LLM_POOL,
    check_specs=[contract_check_spec(CANDIDATES, "candidates")],
    description="Step 2: ground-truth SQL for solvable objects (chain-of-thought), difficulty relabelled from the SQL.",
)
def candidates(
    context: AssetExecutionContext,
    council: CouncilResource,
    cascade: CascadeSettings,
    nlq_objects: pl.DataFrame,
    schema_context: pl.DataFrame,
):
    objects = nlq_objects.to_dicts() if nlq_objects.height else []
    to_ground = sum(o["status"] == "ok" and o["group"] != "unanswerable" and not o.get("sql") for o in objects)
    needs_llm = bool(to_ground)
    with step_progress(context, total=to_ground):  # the objects the LLM grounds, each done at its answer
        rows = ground_sql(
            objects, schema_context["schema_context"][0], council.get_council("generators") if needs_llm else None
        )
    grounded = [r for r in rows if r["grounding_status"] != "not_needed"]
    try:
        check_provider(
            "candidates",
            len(grounded),
            sum(r["grounding_status"] == "call_failed" for r in grounded),
            cascade.max_failed_call_share,
            rows=grounded,
            status_key="grounding_status",
            error_key="grounding_error",
            max_unparseable_share=cascade.max_unparseable_share,
        )
    except ProviderUnavailable as exc:
        raise Failure(str(exc), allow_retries=True) from exc
    df = rows_frame(rows, NLQ_COLUMNS + CANDIDATE_EXTRA)
    yield artifact_output(
        df,
        candidates=df.height,
        by_group=MetadataValue.json(dict(df.group_by("group").len().iter_rows()) if df.height else {}),
    )
    yield contract_check_result(CANDIDATES, df)


def _schema_fitter(schema_context: pl.DataFrame, db: dict):
    """Per-candidate schema context when the database's schema had to be cut to fit (#13 item 6)."""
    import json

    if "omitted_json" not in schema_context.columns:
        return None
    omitted = json.loads(schema_context["omitted_json"][0] or "{}")
    if not omitted.get("omitted_tables"):
        return None
    from pipelines.sqltools.schema_context import focused_fitter
    from resources.catalog import inspect_database

    return focused_fitter(inspect_database(db["path"], db["db_id"]), int(omitted["budget_tokens"]))


def _stage_asset(spec, previous_key):
    ins = {
        "candidates": AssetIn("candidates"),
        "schema_context": AssetIn("schema_context"),
        "seed_databases": AssetIn("seed_databases"),
    }
    if previous_key is not None:
        ins["previous"] = AssetIn(previous_key)

    @asset(
        name=spec.key,
        partitions_def=databases_partitions,
        group_name=GROUP_VAL,
        ins=ins,
        pool=LLM_POOL if spec.uses_council else None,
        code_version=wellformed.VERSION if spec.no == 0 else PROMPT_VERSIONS.get(f"s{spec.no:02d}", "1"),
        description=f"Stage {spec.no} ({spec.name.replace('_', ' ')}): {spec.description}",
    )
    def stage_asset(
        context: AssetExecutionContext,
        council: CouncilResource,
        safe_sql: SafeSqlResource,
        cascade: CascadeSettings,
        **inputs,
    ):
        cands = inputs["candidates"]
        entering = outputs.survivors(cands, inputs.get("previous"))
        ctx = None
        if spec.no >= 2 or spec.no == 0:
            ctx = StageContext(
                db_path=_db(inputs["seed_databases"])["path"],
                schema_context=inputs["schema_context"]["schema_context"][0],
                council=council.get_council("validators") if spec.uses_council else None,
                timeout_s=safe_sql.timeout_s,
                order_sensitive=cascade.order_sensitive,
                result_preview_rows=cascade.result_preview_rows,
                max_failed_call_share=cascade.max_failed_call_share,
                max_unparseable_share=cascade.max_unparseable_share,
                schema_fitter=_schema_fitter(inputs["schema_context"], _db(inputs["seed_databases"])),
                wellformedness=cascade.wellformedness,
            )
        rows = entering.to_dicts() if entering.height else []
        try:
            with step_progress(context, total=sum(1 for r in rows if spec.applies(r))):
                decisions = run_stage(spec.no, rows, ctx)
        except ProviderUnavailable as exc:
            raise Failure(str(exc), allow_retries=True) from exc
        df = outputs.decisions_frame(decisions)
        applies = df.filter(pl.col("applies"))
        rejected = int((~applies["passed"]).sum()) if applies.height else 0
        stats = dict(ctx.stats) if ctx else {}
        yield artifact_output(
            df,
            entered=MetadataValue.int(applies.height),
            rejected=MetadataValue.int(rejected),
            rejection_rate=MetadataValue.float(rejected / applies.height if applies.height else 0.0),
            survivors=MetadataValue.int(int(df["passed"].sum()) if df.height else 0),
            llm_calls=MetadataValue.int(stats.get("calls", 0)),
            llm_cache_hits=MetadataValue.int(stats.get("cached", 0)),
            llm_calls_saved_by_short_circuit=MetadataValue.int(stats.get("calls_saved", 0)),
            llm_failures=MetadataValue.int(stats.get("call_failed", 0) + stats.get("parse_failed", 0)),
            decisions=_decisions_table(df, rows),
        )

    return stage_asset


REASON_CHARS = 160  # a reason this long reads whole in a wrapped list item


def _decisions_table(decisions: pl.DataFrame, entering: list[dict]):
    """The stage's decisions on the candidates it applies to, rejections first, as a Markdown list:
    a table's reason column was cut at ~45 characters in the value column at 1,366 px, a list item
    wraps (#42 item 7). The question and whole trail: ``quandary audit question ID``."""
    applied = decisions.filter(pl.col("applies")).to_dicts() if decisions.height else []
    applied.sort(key=lambda d: bool(d["passed"]))

    def item(d) -> str:
        reason = " ".join(str(d.get("reason") or "").split()).replace("|", "/")
        reason = reason if len(reason) <= REASON_CHARS else reason[: REASON_CHARS - 1] + "…"
        return f"{'passed' if d['passed'] else '**rejected**'} `{d['candidate_id']}`: {reason}"

    return MetadataValue.md(
        list_markdown([item(d) for d in applied], more="in this stage's artifact (quandary audit question ID)")
        if applied
        else "_the stage applied to no candidate_"
    )


STAGE_ASSETS = []
_prev = None
for _spec in STAGES:
    STAGE_ASSETS.append(_stage_asset(_spec, _prev))
    _prev = AssetKey(_spec.key)
FINAL_STAGE = STAGES[-1].key
STAGE_INS = {s.key: AssetIn(s.key) for s in STAGES}


@asset(
    partitions_def=databases_partitions,
    group_name=GROUP_OUT,
    code_version="1",
    ins={"candidates": AssetIn("candidates"), "final": AssetIn(FINAL_STAGE)},
    check_specs=[contract_check_spec(DATASET, "dataset")],
    description="The validated ABISS dataset: every question that survived all ten stages.",
)
def dataset(context: AssetExecutionContext, cascade: CascadeSettings, candidates: pl.DataFrame, final: pl.DataFrame):
    df = outputs.dataset_frame(candidates, final)
    orphans_dropped = 0
    if cascade.drop_incomplete_groups:
        df, orphans_dropped = group_integrity.drop_incomplete_groups(df, candidates)
    by_sub = dict(df.group_by("subcategory").len().iter_rows()) if df.height else {}
    yield artifact_output(
        df,
        questions=df.height,
        by_subcategory=MetadataValue.json(by_sub),
        orphan_readings_dropped=MetadataValue.int(orphans_dropped),
    )
    yield contract_check_result(DATASET, df)


@asset(
    partitions_def=databases_partitions,
    group_name=GROUP_OUT,
    code_version="1",
    ins=STAGE_INS,
    check_specs=[contract_check_spec(COUNCIL_VOTES, "council_votes")],
    description="Every council vote of every stage (member, comparison, vote, parsed_ok, llm_call_id).",
)
def council_votes(context: AssetExecutionContext, **stages):
    df = outputs.council_votes_frame([stages[s.key] for s in STAGES])
    yield artifact_output(df, votes=df.height)
    yield contract_check_result(COUNCIL_VOTES, df)


@asset(
    partitions_def=databases_partitions,
    group_name=GROUP_OUT,
    code_version="1",
    ins={"candidates": AssetIn("candidates"), **STAGE_INS},
    check_specs=[
        AssetCheckSpec(
            REJECTION_CHECK,
            asset="rejection_report",
            description="Each stage's rejection rate lies within the configured bounds.",
        )
    ],
    description="Entered / rejected / rate per stage × subcategory × generator, with the funnel.",
)
def rejection_report(
    context: AssetExecutionContext,
    cascade: CascadeSettings,
    council: CouncilResource,
    candidates: pl.DataFrame,
    **stages,
):
    decisions = [stages[s.key] for s in STAGES]
    df = outputs.rejection_report_frame(candidates, decisions)
    funnel = outputs.funnel(candidates, decisions)
    png = outputs.funnel_png(funnel, chart_path(context, "rejection_report", df))
    per_stage = (
        df.group_by("stage_no", "stage")
        .agg(pl.col("entered").sum(), pl.col("rejected").sum())
        .with_columns((pl.col("rejected") / pl.col("entered")).alias("rate"))
        .sort("stage_no")
        if df.height
        else pl.DataFrame()
    )
    survivors = outputs.survivors(candidates, decisions[-1])
    integrity = group_integrity.group_integrity(candidates, survivors)
    yield artifact_output(
        df,
        # shown in place on the asset page (short Markdown); entered = survivors of the stage before
        funnel=MetadataValue.md(outputs.funnel_chart_md(funnel)),
        group_integrity_summary=MetadataValue.text(group_integrity.integrity_text(integrity)),
        orphan_readings=MetadataValue.int(int(integrity["orphan_readings"].sum()) if integrity.height else 0),
        incomplete_groups=MetadataValue.int(int(integrity["incomplete"].sum()) if integrity.height else 0),
        group_integrity=MetadataValue.md(
            preview_markdown(integrity, rows=20) if integrity.height else "no ambiguous groups"
        ),
        **chart_metadata(png, "validation funnel", image_key="funnel_chart_png", path_key="funnel_chart_path"),
        # four narrow columns, rates to 3 digits: renders in place beside the funnel (#31 item 7)
        per_stage=MetadataValue.md(
            preview_markdown(
                per_stage.select(
                    pl.col("stage").map_elements(short_stage, return_dtype=pl.String),
                    pl.format("{}/{}", "rejected", "entered").alias("rejected"),
                    "rate",
                ),
                rows=20,
            )
            if per_stage.height
            else "no stage applied"
        ),
        funnel_table=_funnel_table(funnel, per_stage),
        **{f"survivors {name}": MetadataValue.int(kept) for name, _, kept in funnel},
    )
    note = (
        (
            "the embedded SmolLM2 answers almost the same way every time, so the stages it judges reject "
            "most candidates; use a real council for meaningful rates"
        )
        if any(m.is_embedded for m in council.get_council("validators").members)
        else ""
    )
    yield rejection_bounds_check(
        per_stage.to_dicts() if per_stage.height else [],
        cascade.min_rejection_rate,
        cascade.max_rejection_rate,
        cascade.min_entered_for_bounds,
        note,
    )


# no "entered" column: it is the row above's survivors, and a fifth column was cut off at 1,366 px
FUNNEL_COLUMNS = [
    ("stage", "string", ""),
    # short descriptions: a long one widened its header past the value column (#42 item 7)
    ("rejected", "string", "rejected / judged (of the survivors before)"),
    ("kept", "int", "survivors: left after it"),
]


def short_stage(key: str) -> str:
    """``s03 category`` for ``s03_category_conformance``: the number says which stage, the word
    what it is about, short enough for the asset page's value column at 1,366 px (#31 item 7)."""
    parts = key.split("_")
    return " ".join(parts[:2]) if len(parts) > 1 and parts[0][:1] == "s" and parts[0][1:].isdigit() else key


def _funnel_table(funnel, per_stage: pl.DataFrame):
    applicable = {r["stage"]: (r["entered"], r["rejected"]) for r in per_stage.to_dicts()} if per_stage.height else {}
    rows = [
        {
            "stage": short_stage(name),
            "kept": kept,
            "rejected": f"{entered - kept}/{applicable.get(name, (entered if name == 'candidates' else 0, 0))[0]}",
        }
        for name, entered, kept in funnel
    ]
    return table_metadata(rows, FUNNEL_COLUMNS)


ABISS_ASSETS = [generation_requests, nlq_objects, candidates, *STAGE_ASSETS, dataset, council_votes, rejection_report]
