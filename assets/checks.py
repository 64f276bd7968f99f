"""Turn data contracts (quality/) into blocking Dagster asset checks."""

import polars as pl
from dagster import AssetCheckResult, AssetCheckSeverity, AssetCheckSpec, MetadataValue

from quality.contracts import Contract
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
