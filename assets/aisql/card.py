"""The Stochastic Shift jobs' cards (#28 item 1): judging a scenario's pairs, and judging a file of
user predictions (``quandary aisql evaluate``)."""

from assets.aisql.assets import PREDICTION_VERDICTS, AisqlResource, EvaluateConfig, planned_pairs
from assets.aisql.definitions import aisql_evaluate_job, aisql_job
from assets.shared.cards import JobCard, Plan, merge_configs, op_config, resource_config, resource_values
from pipelines.aisql.metrics import table1_sections
from storage.stores import latest_frame

RESOURCE = "aisql"


def config(**values) -> dict:
    """Run config of ``aisql judge`` (AisqlResource fields; None = the default)."""
    return resource_config(RESOURCE, AisqlResource, values)


def estimate(partition: str, run_config: dict | None, council_path: str | None = None) -> Plan:
    """One judge call per (pair, LLM method), up to three with retries; EX needs none. With
    ``backend council`` the AI operators are answered by the council too (not counted: how many
    distinct operator calls a query makes is known only when it runs)."""
    aisql = AisqlResource(**resource_values(run_config, RESOURCE))
    pairs = planned_pairs(aisql, partition)
    llm_methods = [m for m in aisql.methods if m != "ex"]
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
        shrink="--methods ex,ours --questions Q1 (one gold query, two methods)",
    )


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


CARD = JobCard(job=aisql_job, partitions="a scenario", config=config, estimate=estimate, summary=summary)
EVALUATE_CARD = JobCard(
    job=aisql_evaluate_job, partitions="none (one file per run)", config=evaluate_config, summary=evaluate_summary
)
