"""Turn data contracts (quality/) into blocking Dagster asset checks."""

import polars as pl
from dagster import AssetCheckResult, AssetCheckSeverity, AssetCheckSpec, MetadataValue

from quality.base import Contract
from quality.gx_suite import run_contract


def contract_check_name(contract: Contract) -> str:
    return f"{contract.name}_contract"


def contract_check_spec(contract: Contract, asset: str) -> AssetCheckSpec:
    return AssetCheckSpec(
        name=contract_check_name(contract),
        asset=asset,
        blocking=True,  # a broken artifact must not feed downstream stages
        description=f"Great Expectations suite for the {contract.name} contract: {contract.description}",
    )


def contract_check_result(contract: Contract, df: pl.DataFrame) -> AssetCheckResult:
    outcome = run_contract(contract, df)
    return AssetCheckResult(
        check_name=contract_check_name(contract),
        passed=outcome.success,
        severity=AssetCheckSeverity.ERROR,
        metadata={
            "expectations": MetadataValue.int(len(outcome.outcomes)),
            "failed": MetadataValue.int(len(outcome.failures)),
            "failures": MetadataValue.md("\n".join(f"- {f}" for f in outcome.failures) or "none"),
        },
    )


REJECTION_CHECK = "rejection_rates_within_bounds"


def out_of_bounds_stages(per_stage: list[dict], low: float, high: float, min_entered: int) -> list[str]:
    """One sentence per stage whose rejection rate leaves [low, high]: which stage, which bound, by
    how much. Stages with fewer than ``min_entered`` applicable candidates are not judged: one or
    two rejections there say nothing about the stage."""
    out = []
    for r in per_stage:
        entered, rejected = int(r["entered"]), int(r["rejected"])
        if entered < max(1, min_entered):
            continue
        rate = rejected / entered
        if rate > high:
            out.append(
                f"{r['stage']} rejected {rejected}/{entered} = {rate:.0%}, "
                f"{(rate - high) * 100:.0f} points above the {high:.0%} maximum"
            )
        elif rate < low:
            out.append(
                f"{r['stage']} rejected {rejected}/{entered} = {rate:.0%}, "
                f"{(low - rate) * 100:.0f} points below the {low:.0%} minimum"
            )
    return out


def rejection_bounds_check(
    per_stage: list[dict], low: float, high: float, min_entered: int, note: str = ""
) -> AssetCheckResult:
    """A WARN check (never blocks): the per-stage rates outside the bounds, as readable sentences
    in the ``summary`` metadata (the CLI prints that line)."""
    problems = out_of_bounds_stages(per_stage, low, high, min_entered)
    summary = "; ".join(problems) if problems else f"every stage with ≥{min_entered} candidates within bounds"
    if problems and note:
        summary += f" ({note})"
    return AssetCheckResult(
        check_name=REJECTION_CHECK,
        passed=not problems,
        severity=AssetCheckSeverity.WARN,
        metadata={
            "summary": MetadataValue.text(summary),
            "out_of_bounds": MetadataValue.md("\n".join(f"- {x}" for x in problems) or "none"),
            "bounds": f"[{low:.0%}, {high:.0%}], stages with ≥{min_entered} applicable candidates",
        },
    )


def table_metadata(
    rows: list[dict], columns: list[tuple[str, str, str]], limit: int = 200, cell_chars: int = 160
) -> MetadataValue:
    """Rows as Dagster table metadata (the UI renders it as a table, not as collapsed Markdown).
    ``columns``: (name, type, description); text cells are cut to ``cell_chars`` characters, floats
    rounded to 3 digits."""
    from dagster import TableColumn, TableRecord, TableSchema

    def cell(v):
        if isinstance(v, str) and len(v) > cell_chars:
            return v[: cell_chars - 1] + "…"
        if isinstance(v, float):
            return round(v, 3)
        return v

    schema = TableSchema(columns=[TableColumn(n, t, description=d) for n, t, d in columns])
    records = [TableRecord({n: cell(r.get(n)) for n, _, _ in columns}) for r in rows[:limit]]
    return MetadataValue.table(records, schema=schema)
