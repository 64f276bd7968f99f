"""Data contracts for Quandary's artifacts: columns, types and value rules.

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


SEED_DATABASES = Contract(
    name="seed_databases",
    description="One row per registered seed database.",
    min_rows=1,
    columns=(
        ColumnRule("db_id", pl.String, nullable=False, unique=True, min_length=1),
        ColumnRule("path", pl.String, nullable=False, min_length=1),
        ColumnRule("engine", pl.String, nullable=False, allowed=("sqlite", "duckdb")),
        ColumnRule("sha256", pl.String, nullable=False, min_length=64),
        ColumnRule("size_bytes", pl.Int64, nullable=False, min_value=1),
        ColumnRule("n_tables", pl.Int64, nullable=False, min_value=1),
        ColumnRule("n_columns", pl.Int64, nullable=False, min_value=1),
        ColumnRule("n_foreign_keys", pl.Int64, nullable=False, min_value=0),
        ColumnRule("total_rows", pl.Int64, nullable=False, min_value=0),
        ColumnRule("tables_json", pl.String, nullable=False, min_length=2),
    ),
)

SCHEMA_CONTEXT = Contract(
    name="schema_context",
    description="The rendered prompt context per database (DDL + 5 sample rows per table).",
    min_rows=1,
    columns=(
        ColumnRule("db_id", pl.String, nullable=False, unique=True, min_length=1),
        ColumnRule("schema_context", pl.String, nullable=False, min_length=10),
        ColumnRule("n_tables", pl.Int64, nullable=False, min_value=1),
        ColumnRule("n_chars", pl.Int64, nullable=False, min_value=10),
        ColumnRule("approx_tokens", pl.Int64, nullable=False, min_value=1),
    ),
)


def _taxonomy_values():
    from pipelines.taxonomy import DIFFICULTY_BY_ID, STYLE_BY_ID, SUBCATEGORY_BY_ID, Group

    return (tuple(SUBCATEGORY_BY_ID), tuple(g.value for g in Group), tuple(STYLE_BY_ID), tuple(DIFFICULTY_BY_ID))


_SUBS, _GROUPS, _STYLES, _DIFFICULTIES = _taxonomy_values()

# What every question-bearing artifact must satisfy: text present, labels from the taxonomy.
QUESTION_RULES = (
    ColumnRule("question", pl.String, nullable=False, min_length=1),
    ColumnRule("subcategory", pl.String, nullable=False, allowed=_SUBS),
    ColumnRule("group", pl.String, nullable=False, allowed=_GROUPS),
    ColumnRule("style", pl.String, nullable=False, allowed=_STYLES),
    ColumnRule("difficulty", pl.String, nullable=False, allowed=_DIFFICULTIES),
)

CANDIDATES = Contract(
    name="candidates",
    description="Grounded NLQ objects entering the validation cascade.",
    columns=(
        ColumnRule("candidate_id", pl.String, nullable=False, unique=True),
        ColumnRule("group_id", pl.String, nullable=False),
        *QUESTION_RULES,
        ColumnRule("generator", pl.String, nullable=False),
    ),
)

DATASET = Contract(
    name="dataset",
    description="Validated ABISS questions with every paper field.",
    columns=(
        ColumnRule("question_id", pl.String, nullable=False, unique=True),
        ColumnRule("candidate_id", pl.String, nullable=False, unique=True),
        ColumnRule("db_id", pl.String, nullable=False),
        *QUESTION_RULES,
        ColumnRule("is_solvable", pl.Boolean, nullable=False),
        ColumnRule("sql", pl.String),
        ColumnRule("evidence", pl.String),
        ColumnRule("hidden_knowledge", pl.String),
        ColumnRule("feedback", pl.String),
    ),
)

COUNCIL_VOTES = Contract(
    name="council_votes",
    description="One row per council vote, linked to its LLM call.",
    columns=(
        ColumnRule("vote_id", pl.String, nullable=False, unique=True),
        ColumnRule("candidate_id", pl.String, nullable=False),
        ColumnRule("stage", pl.String, nullable=False),
        ColumnRule("member", pl.String, nullable=False),
        ColumnRule("vote", pl.String, nullable=False),
        ColumnRule("parsed_ok", pl.Boolean, nullable=False),
        ColumnRule("llm_call_id", pl.String, nullable=False),
    ),
)

CONTRACTS: dict[str, Contract] = {
    c.name: c for c in (SEED_DATABASES, SCHEMA_CONTEXT, CANDIDATES, DATASET, COUNCIL_VOTES)
}
