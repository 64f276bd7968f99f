"""The ABISS job's card (#28 item 1): how it is configured, what a run costs, how a run is summarised."""

import duckdb

from assets.abiss.assets import GridConfig
from assets.abiss.definitions import abiss_job
from assets.shared.cards import JobCard, Plan, cached_calls, council, op_config, op_values
from pipelines.abiss.grid import PROGRAMMATIC, GridSpec, expand_grid
from pipelines.abiss.stages import STAGES
from pipelines.abiss.stages.s09_consistency import STAGE as CONSISTENCY
from pipelines.abiss.stages.s09_consistency import max_comparisons
from storage.audit import open_audit

GRID_OP = "generation_requests"


def config(grid: dict | None = None) -> dict:
    """The run config for a generation grid (GridConfig fields; None = the paper's grid)."""
    return op_config(GRID_OP, GridConfig, dict(grid or {}))


def estimate(partition: str, run_config: dict | None, council_path: str | None = None) -> Plan:
    members = council(council_path)
    grid = GridConfig(**op_values(run_config, GRID_OP))
    generators = grid.generators if grid.generators is not None else [PROGRAMMATIC, *members.councils["generators"]]

    def values(xs):
        return tuple(getattr(x, "value", x) for x in xs) if xs is not None else None

    spec = GridSpec(
        tuple(generators),
        values(grid.subcategories),
        values(grid.styles),
        values(grid.difficulties),
        grid.n,
        grid.seed,
        values(grid.llm_subcategories),
    )
    requests = expand_grid(spec, partition)
    llm = [r for r in requests if r["generator"] != PROGRAMMATIC]
    # one object per request, two readings per ambiguous one; unanswerable objects need no SQL
    objects = [(r["group"], 2 if r["group"] == "ambiguous" else 1) for r in requests]
    grounding = sum(k for r in llm for k in [2 if r["group"] == "ambiguous" else 1] if r["group"] != "unanswerable")
    validators = len(members.councils["validators"])

    def stage_calls(stage, comparisons, per_vote=validators) -> int:
        return sum(k * per_vote * comparisons(group) for group, k in objects if group in stage.groups)

    council_stages = [s for s in STAGES if s.uses_council]
    # stage 9 compares a candidate with every other subcategory of its group until one is lost: up to
    # 5 comparisons, not 1 (the demo's s09 made 35 calls for 17 candidates, #42 item 5)
    most = [stage_calls(s, max_comparisons if s.no == CONSISTENCY.no else lambda _g: 1) for s in council_stages]
    # the low end: every candidate rejected at its first council vote, decided by its first wave (a
    # majority of the members); rejections make later stages smaller, so counting them all there
    # (123 calls for the demo's 96) put the low end above the run
    fewest = stage_calls(council_stages[0], lambda _g: 1, validators // 2 + 1)
    validation = sum(most)
    cached = cached_calls("generation", [r["request_id"] for r in llm])
    calls = len(llm) + grounding + validation
    return Plan(
        items=f"{len(requests)} generation requests ({len(llm)} for the LLM), about "
        f"{sum(k for _, k in objects)} candidates",
        calls=calls,
        bound=True,
        cached=cached,
        detail=f"generation {len(llm)}, SQL grounding {grounding}, validation ≤ {validation} with "
        f"{validators} validator{'s' if validators != 1 else ''}; short-circuits and rejections make it fewer",
        shrink="--grid configs/grid-small.yaml (one style, one difficulty, n: 1)",
        role="validators",
        steps=(len(llm), grounding, *most),
        fewest_calls=len(llm) + grounding + fewest,
    )


def summary(result, partition: str) -> list[str]:
    """The validation funnel, the dataset's size and the seed database (after a successful run)."""
    lines = []
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization
        if mat.asset_key.to_user_string() == "rejection_report" and "funnel" in mat.metadata:
            lines += ["", "validation funnel (kept/entered per stage):", mat.metadata["funnel"].value.strip("`\n")]
            if "group_integrity_summary" in mat.metadata:
                lines.append(mat.metadata["group_integrity_summary"].value)
        if mat.asset_key.to_user_string() == "dataset":
            q = mat.metadata.get("questions")
            lines += ["", f"validated questions in dataset: {q.value if q is not None else '?'}"]
    con = open_audit()
    try:
        try:  # a damaged artifact was skipped (and named) by open_audit: the summary goes on
            row = con.execute(
                "SELECT n_tables, total_rows, n_foreign_keys FROM seed_databases WHERE db_id = ?", [partition]
            ).fetchall()
        except duckdb.Error:
            row = []
    finally:
        con.close()
    if row:
        lines.append(f"  database {partition}: {row[0][0]} tables, {row[0][1]} rows, {row[0][2]} foreign keys")
    return lines


CARD = JobCard(
    job=abiss_job,
    partitions="a registered database",
    config=config,
    estimate=estimate,
    summary=summary,
    database_partitions=True,
)
