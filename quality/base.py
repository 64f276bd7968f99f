"""The data-contract type every job's contracts use (``quality/<job>.py``): columns, types and value rules.

A :class:`Contract` is plain data. It is enforced twice: a fast polars check (schema, types)
and a Great Expectations suite built from the same rules (:mod:`quality.gx_suite`), which the
assets run as blocking asset checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl


@dataclass(frozen=True)
class ColumnRule:
    name: str
    dtype: type[pl.DataType] | pl.DataType
    nullable: bool = True
    unique: bool = False
    allowed: tuple | None = None  # closed value set
    min_value: float | None = None
    max_value: float | None = None
    min_length: int | None = None  # for strings


@dataclass(frozen=True)
class Contract:
    name: str
    columns: tuple[ColumnRule, ...]
    min_rows: int = 0
    description: str = ""
    extra_columns_allowed: bool = True
    unique_together: tuple[str, ...] = field(default_factory=tuple)

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def schema_problems(self, df: pl.DataFrame) -> list[str]:
        """Missing columns and type mismatches (fast, no GX)."""
        problems = []
        for rule in self.columns:
            if rule.name not in df.columns:
                problems.append(f"missing column {rule.name!r}")
                continue
            actual = df.schema[rule.name]
            expected = rule.dtype
            ok = actual == expected if isinstance(expected, pl.DataType) else isinstance(actual, expected)
            if not ok and actual != pl.Null:
                problems.append(f"column {rule.name!r} has type {actual}, expected {expected}")
        if not self.extra_columns_allowed:
            extra = sorted(set(df.columns) - set(self.column_names))
            if extra:
                problems.append(f"unexpected columns {extra}")
        if df.height < self.min_rows:
            problems.append(f"{df.height} rows, expected at least {self.min_rows}")
        return problems
