"""The Stochastic Shift jobs' cards (#28 item 1): judging a scenario's pairs, and judging a file of
user predictions (``quandary aisql evaluate``)."""

from assets.aisql.assets import PREDICTION_VERDICTS, AisqlResource, EvaluateConfig, planned_pairs
from assets.aisql.definitions import aisql_evaluate_job, aisql_job
from assets.shared.cards import JobCard, Plan, merge_configs, op_config, resource_config, resource_values
from assets.shared.preflight import PreflightError
from pipelines.aisql.methods import DETERMINISTIC
from pipelines.aisql.metrics import table1_sections
from storage.stores import latest_frame

RESOURCE = "aisql"


def config(**values) -> dict:
    """Run config of ``aisql judge`` (AisqlResource fields; None = the default)."""
    return resource_config(RESOURCE, AisqlResource, values)


def estimate(partition: str, run_config: dict | None, council_path: str | None = None) -> Plan:
    """One judge call per (pair, LLM method), up to three with retries; EX and the deterministic
    layers need none. With
    ``backend council`` the AI operators are answered by the council too (not counted: how many
    distinct operator calls a query makes is known only when it runs)."""
    aisql = AisqlResource(**resource_values(run_config, RESOURCE))
    pairs = planned_pairs(aisql, partition)
    llm_methods = [m for m in aisql.methods if m not in DETERMINISTIC]
    detail = f"{len(llm_methods)} LLM method{'s' if len(llm_methods) != 1 else ''} × {pairs} pairs"
    if aisql.backend == "council":
        detail += "; plus the AI operators' calls (backend council)"
    if aisql.generator_samples:
        detail += f"; plus {aisql.generator_samples} generated candidates per question"
    n_methods = f"{len(aisql.methods)} method{'s' if len(aisql.methods) != 1 else ''}"
    return Plan(
        items=f"{pairs} pairs × {n_methods} = {pairs * len(aisql.methods)} verdicts",
        calls=pairs * len(llm_methods),
        role="judges",
        detail=detail,
        shrink="--methods ex,layers,ours --questions Q1 (one gold query; EX and the layers make no LLM call)",
    )


def _known(flag: str, given, known) -> None:
    bad = [str(x) for x in given or () if x not in known]
    if bad:
        listed = ", ".join(known) or "none (check --data)"
        raise PreflightError(f"{flag} {','.join(map(str, given))}: unknown {', '.join(bad)}; known: {listed}")


def preflight(partition: str, run_config: dict | None, council_path: str | None = None) -> None:
    """Every option of `aisql judge` checked before its run exists, one line each naming the fix
    (#42 item 1): a known scenario, methods, dialects and variant types, and question ids the
    scenario's gold queries have (read from the data folder: no LLM call, no database built)."""
    from pipelines.aisql.methods import METHODS
    from pipelines.aisql.rewrite import DIALECTS
    from pipelines.aisql.scenarios import SCENARIOS, ScenarioError, load_queries
    from pipelines.aisql.variants import VARIANT_TYPES
    from pipelines.aisql.verifier import default_budget_ms

    if partition not in SCENARIOS:
        raise PreflightError(f"--scenario {partition}: unknown scenario; scenarios: {', '.join(sorted(SCENARIOS))}")
    try:  # read by the judge's verifier step: a bad value must stop the command, not that step
        default_budget_ms()
    except ValueError as exc:
        raise PreflightError(str(exc)) from None
    values = resource_values(run_config, RESOURCE)
    _known("--methods", values.get("methods"), METHODS)
    _known("--methods (sweep)", values.get("sweep_methods"), METHODS)
    _known("--dialects", values.get("dialects"), DIALECTS)
    _known("--variants", values.get("variant_types"), VARIANT_TYPES)
    if values.get("methods") == [] or values.get("dialects") == []:
        raise PreflightError("--methods/--dialects: give at least one")
    n = values.get("generator_samples")
    if n is not None and n < 0:
        raise PreflightError(f"--generate {n}: give 0 (none) or more candidates per question")
    try:
        aisql = AisqlResource(**values)
        asked = values.get("question_ids")
        if asked:
            have = list(
                dict.fromkeys(g.question_id for g in load_queries(partition, aisql.root(), tuple(aisql.dialects)))
            )
            _known("--questions", asked, have)
    except PreflightError:
        raise
    except (ScenarioError, ValueError, OSError) as exc:
        raise PreflightError(f"aisql judge --scenario {partition}: {' '.join(str(exc).split())}") from None


def summary(result, partition: str) -> list[str]:
    """Table 1 of the scenario, per evaluation set."""
    metrics = latest_frame("aisql_metrics", partition)
    return [] if metrics is None else table1_sections(metrics, partition)


def evaluate_config(
    predictions_path: str | None = None, methods: list[str] | None = None, source_name: str | None = None, **values
) -> dict:
    """Run config of ``aisql evaluate``: the predictions file and methods, and AisqlResource fields."""
    return merge_configs(
        config(**values),
        op_config(
            PREDICTION_VERDICTS,
            EvaluateConfig,
            {"predictions_path": predictions_path, "methods": methods, "source_name": source_name},
        ),
    )


def evaluate_summary(result, partition: str | None) -> list[str]:
    """What the evaluate run judged and reused."""
    event = result.asset_materializations_for_node(PREDICTION_VERDICTS)[-1]
    meta = {k: v.value for k, v in event.metadata.items()}
    return [f"{meta.get('predictions', 0)} predictions; reused {meta.get('reused', 0)}, judged {meta.get('judged', 0)}"]


CARD = JobCard(
    job=aisql_job, partitions="a scenario", config=config, estimate=estimate, summary=summary, preflight=preflight
)
EVALUATE_CARD = JobCard(
    job=aisql_evaluate_job, partitions="none (one file per run)", config=evaluate_config, summary=evaluate_summary
)
