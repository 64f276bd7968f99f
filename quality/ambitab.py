"""Data contracts for AmbiTab task records and rejects, plus the record-level rules.

The column contract (:data:`AMBITAB_RECORDS`) runs as a Great Expectations suite through
:func:`quality.gx_suite.run_contract`; the rules that need the record's structure or a database
are plain functions returning :class:`RuleOutcome` (the asset turns each into an asset check):

* :func:`amb_count_rule` — ``n_ambiguities`` counts only critical + knowledge ambiguities;
* :func:`reference_executes_rule` — every reading's reference SQL executes where its (SQLite)
  database is present; records marked non-executable must say why;
* :func:`readings_differ_rule` — the readings of one AVT give pairwise different results, where
  the paper requires it (AmbiQT, TACO; the other corpora report but do not require it).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from pipelines.ambitab.comparison import results_match
from pipelines.ambitab.record import CORPORA, COUNTED_KINDS, ENGINES, ComparisonPolicy
from quality.base import ColumnRule, Contract
from resources.sql import execute_sql

# corpora whose build requires the readings of an AVT to differ on the data [P]
READINGS_MUST_DIFFER = frozenset({"ambiqt", "taco"})

AMBITAB_RECORDS = Contract(
    name="ambitab_records",
    description="AmbiTab task records (one per interpretation; nested parts as JSON).",
    columns=(
        ColumnRule("record_id", pl.String, nullable=False, unique=True, min_length=1),
        ColumnRule("corpus", pl.String, nullable=False, allowed=CORPORA),
        ColumnRule("split", pl.String, nullable=False, min_length=1),
        ColumnRule("avt_id", pl.String, nullable=False, min_length=1),
        ColumnRule("interpretation_id", pl.String, nullable=False),
        ColumnRule("engine", pl.String, nullable=False, allowed=ENGINES),
        ColumnRule("db_id", pl.String, nullable=False, min_length=1),
        ColumnRule("user_query", pl.String, nullable=False, min_length=1),
        ColumnRule("n_ambiguities", pl.Int64, nullable=False, min_value=0),
        ColumnRule("executable", pl.Boolean, nullable=False),
        ColumnRule("spec_json", pl.String, nullable=False, min_length=2),
        ColumnRule("ambiguities_json", pl.String, nullable=False, min_length=2),
        ColumnRule("verifier_json", pl.String, nullable=False, min_length=2),
        ColumnRule("provenance_json", pl.String, nullable=False, min_length=2),
    ),
)

AMBITAB_REJECTS = Contract(
    name="ambitab_rejects",
    description="Source rows a conversion rejected, with the stage and reason.",
    columns=(
        ColumnRule("corpus", pl.String, nullable=False),
        ColumnRule("source_id", pl.String, nullable=False, min_length=1),
        ColumnRule("stage", pl.String, nullable=False, min_length=1),
        ColumnRule("reason", pl.String, nullable=False, min_length=1),
    ),
)

# Evaluation (one row per record × seed × condition)
AMBITAB_EPISODES = Contract(
    name="ambitab_episodes",
    description="Ask-then-solve episodes: every turn with its credit and response, the SQL and the verdict.",
    columns=(
        ColumnRule("episode_id", pl.String, nullable=False, unique=True, min_length=1),
        ColumnRule("record_id", pl.String, nullable=False, min_length=1),
        ColumnRule("avt_id", pl.String, nullable=False, min_length=1),
        ColumnRule("seed", pl.Int64, nullable=False),
        ColumnRule("asker", pl.String, nullable=False, min_length=1),
        ColumnRule("oracle", pl.String, nullable=False, min_length=1),
        ColumnRule("solver", pl.String, nullable=False, min_length=1),
        ColumnRule("corpus", pl.String, nullable=False, min_length=1),
        ColumnRule("budget", pl.Int64, nullable=False, min_value=0),
        ColumnRule("options", pl.String, nullable=False, min_length=1),
        ColumnRule("n_amb", pl.Int64, nullable=False, min_value=0),
        ColumnRule("n_questions", pl.Int64, nullable=False, min_value=0),
        ColumnRule("recall", pl.Float64, min_value=0.0, max_value=1.0),
        ColumnRule("precision", pl.Float64, min_value=0.0, max_value=1.0),
        ColumnRule("f1", pl.Float64, min_value=0.0, max_value=1.0),
        ColumnRule("verdict", pl.Int64, allowed=(0, 1)),
        ColumnRule(
            "status", pl.String, nullable=False, allowed=("ok", "unverifiable", "context_overflow", "no_solver")
        ),
        ColumnRule("turns_json", pl.String, nullable=False),
    ),
)


@dataclass
class RuleOutcome:
    name: str
    passed: bool
    checked: int = 0
    failures: list[str] = field(default_factory=list)
    notes: dict = field(default_factory=dict)

    def summary(self, limit: int = 10) -> str:
        return "\n".join(f"- {f}" for f in self.failures[:limit]) or "none"


def amb_count_rule(df: pl.DataFrame) -> RuleOutcome:
    out = RuleOutcome("ambitab_amb_count", True)
    counted_kinds = {k.value for k in COUNTED_KINDS}
    for rid, n, ambs in df.select("record_id", "n_ambiguities", "ambiguities_json").iter_rows():
        counted = sum(a["kind"] in counted_kinds for a in json.loads(ambs))
        out.checked += 1
        if counted != n:
            out.failures.append(f"{rid}: n_ambiguities={n} but {counted} critical/knowledge ambiguities")
    out.passed = not out.failures
    return out


def _rows_of(df: pl.DataFrame):
    for row in df.select("record_id", "corpus", "avt_id", "engine", "db_path", "executable", "verifier_json").iter_rows(
        named=True
    ):
        yield row, json.loads(row["verifier_json"])


def reference_executes_rule(df: pl.DataFrame, timeout_s: float = 30.0) -> tuple[RuleOutcome, dict]:
    """Execute every executable record's reference SQL; returns (outcome, record_id -> result)."""

    out = RuleOutcome("ambitab_reference_sql_executes", True)
    results: dict = {}
    skipped = 0
    for row, ver in _rows_of(df):
        if not row["executable"]:
            skipped += 1
            if not ver.get("skip_reason"):
                out.failures.append(f"{row['record_id']}: not executable and no skip_reason")
            continue
        path = row["db_path"]
        if row["engine"] != "sqlite" or not path or not Path(path).is_file():
            out.failures.append(
                f"{row['record_id']}: marked executable but database {path!r} is not a present SQLite file"
            )
            continue
        if len(ver["reference_sql"]) != 1:
            out.failures.append(f"{row['record_id']}: SQLite records need exactly one reference SQL")
            continue
        res = execute_sql(path, ver["reference_sql"][0], timeout_s=timeout_s)
        out.checked += 1
        if not res.ok:
            out.failures.append(f"{row['record_id']}: {res.one_line()}")
        else:
            results[row["record_id"]] = (res, ver.get("comparison") or {})
    out.notes = {"executed": out.checked, "not_executable": skipped}
    out.passed = not out.failures
    return out, results


def readings_differ_rule(df: pl.DataFrame, results: dict) -> RuleOutcome:
    """Pairwise-different results within each AVT (required for AmbiQT / TACO)."""

    out = RuleOutcome("ambitab_readings_differ", True)
    groups: dict[str, list[str]] = defaultdict(list)
    corpus_of: dict[str, str] = {}
    for rid, corpus, avt in df.select("record_id", "corpus", "avt_id").iter_rows():
        groups[avt].append(rid)
        corpus_of[avt] = corpus
    equal_avts = []
    for avt, rids in groups.items():
        have = [r for r in rids if r in results]
        if len(have) < 2:
            continue
        out.checked += 1
        for i in range(len(have)):
            for j in range(i + 1, len(have)):
                (a, pol), (b, _) = results[have[i]], results[have[j]]
                if results_match(a, b, ComparisonPolicy(**pol)):
                    equal_avts.append(avt)
                    if corpus_of[avt] in READINGS_MUST_DIFFER:
                        out.failures.append(f"AVT {avt}: readings {have[i]} and {have[j]} give equal results")
    out.notes = {"avts_checked": out.checked, "avts_with_equal_readings": len(set(equal_avts))}
    out.passed = not out.failures
    return out
