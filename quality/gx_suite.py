"""Run a :class:`~quality.base.Contract` as a Great Expectations (1.x) suite.

GX is imported lazily (its import costs seconds) and run in an ephemeral context on a pandas
copy of the frame. The result is plain data the asset checks turn into ``AssetCheckResult``.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import sys
import types
from dataclasses import dataclass

import polars as pl

from quality.base import Contract
from resources.startup import heavy_imports


@dataclass(frozen=True)
class ExpectationOutcome:
    expectation: str
    column: str | None
    success: bool
    unexpected_count: int | None


@dataclass(frozen=True)
class SuiteOutcome:
    contract: str
    success: bool
    outcomes: list[ExpectationOutcome]
    schema_problems: list[str]

    @property
    def failures(self) -> list[str]:
        out = list(self.schema_problems)
        for o in self.outcomes:
            if not o.success:
                where = f" on {o.column}" if o.column else ""
                count = f" ({o.unexpected_count} unexpected)" if o.unexpected_count else ""
                out.append(f"{o.expectation}{where}{count}")
        return out


class _Deferred(types.ModuleType):
    """Stands in ``sys.modules`` for a module GX imports when it is imported but uses only inside
    functions: the real module is imported on the first attribute read. ``__spec__`` is the real
    spec, so a later ``import NAME`` returns this object without loading anything."""

    def __init__(self, name: str, spec):
        super().__init__(name)
        self.__spec__ = spec

    def __getattr__(self, attr: str):
        name = self.__name__
        if sys.modules.get(name) is self:
            del sys.modules[name]
        real = importlib.import_module(name)
        self.__dict__.update(real.__dict__)  # a caller holding this object now reads the real values
        return getattr(real, attr)


# GX's KL-divergence expectation (never one of ours) imports scipy.stats and altair at module level,
# so every `import great_expectations` paid ~1 s of CPU for them: a third of the import, paid by every
# process that runs an asset check (#44).
_DEFERRED = ("scipy.stats", "altair")


def _import_gx():
    for name in _DEFERRED:
        if name in sys.modules:
            continue
        parent = name.rpartition(".")[0]
        if parent:
            importlib.import_module(parent)  # scipy itself is light; its __getattr__ finds the stand-in
        spec = importlib.util.find_spec(name)
        if spec is not None:
            sys.modules[name] = _Deferred(name, spec)
    with heavy_imports():
        import great_expectations as gx  # lazy: great_expectations costs ~1 s at import

    return gx


def _expectations(contract: Contract, columns_present: set[str]):
    gx = _import_gx()

    E = gx.expectations
    yield E.ExpectTableRowCountToBeBetween(min_value=contract.min_rows)
    for rule in contract.columns:
        yield E.ExpectColumnToExist(column=rule.name)
        if rule.name not in columns_present:
            continue  # the existence expectation already fails; value rules would error
        if not rule.nullable:
            yield E.ExpectColumnValuesToNotBeNull(column=rule.name)
        if rule.unique:
            yield E.ExpectColumnValuesToBeUnique(column=rule.name)
        if rule.allowed is not None:
            yield E.ExpectColumnValuesToBeInSet(column=rule.name, value_set=list(rule.allowed))
        if rule.min_value is not None or rule.max_value is not None:
            yield E.ExpectColumnValuesToBeBetween(column=rule.name, min_value=rule.min_value, max_value=rule.max_value)
        if rule.min_length is not None:
            yield E.ExpectColumnValueLengthsToBeBetween(column=rule.name, min_value=rule.min_length)


def run_contract(contract: Contract, df: pl.DataFrame) -> SuiteOutcome:
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    gx = _import_gx()

    problems = contract.schema_problems(df)
    ctx = gx.get_context(mode="ephemeral")
    try:  # progress bars would spam every asset's logs
        ctx.variables.progress_bars = {"globally": False, "metric_calculations": False}
    except Exception:  # noqa: BLE001 - cosmetic only
        pass
    # The batch validated directly against an unsaved suite: the same expectations and results as a
    # stored ValidationDefinition, without serialising the suite, the definition and the results
    # into the ephemeral context's stores (40 % of a check's CPU; every asset runs one, #44).
    batch = (
        ctx.data_sources.add_pandas("quandary")
        .add_dataframe_asset(contract.name)
        .add_batch_definition_whole_dataframe("whole")
        .get_batch(batch_parameters={"dataframe": df.to_pandas()})
    )
    suite = gx.ExpectationSuite(
        name=f"{contract.name}_suite", expectations=list(_expectations(contract, set(df.columns)))
    )
    result = batch.validate(suite)
    outcomes = [
        ExpectationOutcome(
            expectation=r.expectation_config.type,
            column=r.expectation_config.kwargs.get("column"),
            success=bool(r.success),
            unexpected_count=(r.result or {}).get("unexpected_count"),
        )
        for r in result.results
    ]
    return SuiteOutcome(contract.name, bool(result.success) and not problems, outcomes, problems)
