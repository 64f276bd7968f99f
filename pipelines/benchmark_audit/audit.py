"""One database's items through the deterministic checks: one row per item (its flags, error types,
the evidence a reviewer needs), reusing stored rows of an earlier run, and the rates by type.

Rows are keyed by everything that defines them: the benchmark file's sha256, the item's index, its
content key (db, question, gold, evidence), the database file's sha256 (the same gold on changed data
is checked again) and :data:`checks.CHECKS_VERSION`. Findings judged by an
LLM never land in these rows' ``flags``: ``source`` says who found a flag (``deterministic`` here).
"""

import json
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl

from pipelines.benchmark_audit import checks, question_checks
from pipelines.benchmark_audit.records import Item, file_digest
from resources.catalog import DatabaseInfo
from resources.sql import QueryResult, execute_sql

SOURCE = "deterministic"
DEFAULT_TIMEOUT_S = 10.0  # gold SQL of BIRD can be slow on its larger tables

SCHEMA = {
    "benchmark": pl.Utf8,
    "benchmark_sha256": pl.Utf8,
    "db_id": pl.Utf8,
    "item_index": pl.Int64,
    "question_id": pl.Utf8,
    "item_key": pl.Utf8,
    "database_sha256": pl.Utf8,
    "checks_version": pl.Utf8,
    "source": pl.Utf8,
    "question": pl.Utf8,
    "evidence": pl.Utf8,
    "gold_sql": pl.Utf8,
    "flagged": pl.Boolean,
    "flags": pl.Utf8,  # comma-separated check names of annotation errors, "" when clean
    "weak": pl.Utf8,  # comma-separated weak-item checks (correct, but cannot tell systems apart here), ""
    "error_types": pl.Utf8,  # comma-separated E1..E4, "" when clean
    "findings": pl.Utf8,  # JSON list of findings: check, error_type, detail, probes (sql, result), suggested_fix
    "suggested_fix": pl.Utf8,  # the first mechanical fix as JSON {"field": "gold_sql"|"evidence", "value"}, or ""
    "gold_rows": pl.Int64,  # rows the gold returned (None when it failed)
    "elapsed_ms": pl.Float64,
}


def item_findings(item: Item, db_path: Path, schema: DatabaseInfo | None, timeout_s: float) -> tuple[list, object]:
    """Every per-item check; returns the findings and the gold's outcome (for the duplicate pass)."""
    outcome = execute_sql(db_path, item.gold_sql, timeout_s=timeout_s)
    tree = checks.parse(item.gold_sql)
    findings = checks.execution_findings(item.gold_sql, outcome, db_path, tree, schema, timeout_s)
    findings += checks.construct_findings(item.gold_sql, tree)
    if outcome.ok:
        findings += checks.limit_findings(
            db_path, tree, timeout_s, lambda k: question_checks.asks_for_any(item.question, k)
        )
        findings += checks.text_number_findings(db_path, tree, schema, timeout_s)
    findings += checks.evidence_findings(item.evidence, item.gold_sql, tree, schema, db_path, timeout_s)
    findings += question_checks.question_column_findings(item.question, tree, schema)
    findings += question_checks.answer_shape_findings(item.question, tree, schema, outcome)
    findings += question_checks.comparison_findings(item.question, tree)
    return findings, outcome


def duplicate_findings(items: list[Item], outcomes: dict[int, object]) -> dict[int, list]:
    """``duplicate_conflict`` for every item whose normalised question another item of the same
    database repeats with a gold whose result differs (both golds must run: else undecided).
    Items with hidden knowledge (ABISS readings of one question) are not compared."""
    groups: dict[str, list[Item]] = {}
    for item in items:
        if item.hidden_knowledge:
            continue
        groups.setdefault(checks.normalised_question(item.question), []).append(item)
    out: dict[int, list] = {}
    for group in groups.values():
        if len(group) < 2:
            continue
        for a in group:
            others = []
            for b in group:
                if b is a or b.gold_sql == a.gold_sql:
                    continue
                oa, ob = outcomes.get(a.index), outcomes.get(b.index)
                if not (isinstance(oa, QueryResult) and isinstance(ob, QueryResult)):
                    continue
                if not checks.same_result(a.gold_sql, oa, b.gold_sql, ob):
                    others.append(b)
            if others:
                probes = tuple(checks.Probe(b.gold_sql, checks.shown(outcomes[b.index])) for b in others)
                ids = ", ".join(f"item {b.index}" for b in others)
                out[a.index] = [
                    checks.Finding(
                        "duplicate_conflict",
                        f"{ids} ask{'s' if len(others) == 1 else ''} the same question with a gold whose result differs",
                        (checks.Probe(a.gold_sql, checks.shown(oa)), *probes) if (oa := outcomes[a.index]) else probes,
                    )
                ]
    return out


def _row(item: Item, benchmark: str, digest: str, db_sha: str, findings: list, gold_rows, elapsed_ms: float) -> dict:
    flags = list(dict.fromkeys(f.check for f in findings if not f.weak))
    weak = list(dict.fromkeys(f.check for f in findings if f.weak))
    types = sorted({f.error_type for f in findings if not f.weak})
    fix = next((f.suggested_fix for f in findings if f.suggested_fix), "")  # JSON {field, value}
    return {
        "benchmark": benchmark,
        "benchmark_sha256": digest,
        "db_id": item.db_id,
        "item_index": item.index,
        "question_id": item.question_id,
        "item_key": item.key(),
        "database_sha256": db_sha,
        "checks_version": checks.CHECKS_VERSION,
        "source": SOURCE,
        "question": item.question,
        "evidence": item.evidence,
        "gold_sql": item.gold_sql,
        "flagged": bool(flags),
        "flags": ",".join(flags),
        "weak": ",".join(weak),
        "error_types": ",".join(types),
        "findings": json.dumps([f.to_dict() for f in findings], ensure_ascii=False),
        "suggested_fix": fix,
        "gold_rows": gold_rows,
        "elapsed_ms": round(elapsed_ms, 3),
    }


def _stored_findings(row: dict) -> list:
    """A stored row's per-item findings (the duplicate pass is redone every run)."""
    out = []
    for f in json.loads(row["findings"]):
        if f["check"] == "duplicate_conflict":
            continue
        probes = tuple(checks.Probe(p["sql"], p["result"]) for p in f.get("probes") or ())
        out.append(checks.Finding(f["check"], f["detail"], probes, f.get("suggested_fix", "")))
    return out


def audit_database(
    items: list[Item],
    db_path: Path,
    *,
    benchmark: str,
    digest: str,
    schema: DatabaseInfo | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    stored: pl.DataFrame | None = None,
    advance: Callable[[int], None] | None = None,
) -> tuple[pl.DataFrame, int]:
    """One row per item of one database; rows of ``stored`` with the same key are reused (their
    golds are run again only when a duplicate question needs the result). Returns (rows, reused)."""
    db_sha = schema.sha256 if schema is not None and schema.sha256 else file_digest(Path(db_path))
    keep: dict[tuple, dict] = {}
    if stored is not None and stored.height and "database_sha256" in stored.columns:
        for row in stored.filter(pl.col("benchmark_sha256") == digest).iter_rows(named=True):
            keep[(row["item_index"], row["item_key"], row["database_sha256"], row["checks_version"])] = row
    per_item: dict[int, tuple[list, object, float]] = {}
    outcomes: dict[int, object] = {}
    reused = 0
    for item in items:
        old = keep.get((item.index, item.key(), db_sha, checks.CHECKS_VERSION))
        if old is not None:
            per_item[item.index] = (_stored_findings(old), old["gold_rows"], old["elapsed_ms"])
            reused += 1
        else:
            start = time.perf_counter()
            findings, outcome = item_findings(item, db_path, schema, timeout_s)
            outcomes[item.index] = outcome
            rows = outcome.row_count if outcome.ok else None
            per_item[item.index] = (findings, rows, (time.perf_counter() - start) * 1000)
        if advance:
            advance(1)
    # the duplicate pass needs every repeated question's result: reused items run again
    repeated = _repeated(items)
    for item in items:
        if item.index in repeated and item.index not in outcomes:
            outcomes[item.index] = execute_sql(db_path, item.gold_sql, timeout_s=timeout_s)
    dups = duplicate_findings([i for i in items if i.index in repeated], outcomes)
    rows = []
    for item in items:
        findings, gold_rows, elapsed = per_item[item.index]
        rows.append(_row(item, benchmark, digest, db_sha, findings + dups.get(item.index, []), gold_rows, elapsed))
    return pl.DataFrame(rows, schema=SCHEMA), reused


def _repeated(items: list[Item]) -> set[int]:
    seen: dict[str, list[int]] = {}
    for item in items:
        seen.setdefault(checks.normalised_question(item.question), []).append(item.index)
    return {i for group in seen.values() if len(group) > 1 for i in group}


def merge_rows(stored: pl.DataFrame | None, fresh: pl.DataFrame) -> pl.DataFrame:
    """The stored table with this run's rows replacing those of the same file and item; other
    files' rows are kept (no command drops results it did not mean to replace)."""
    if stored is None or not stored.height:
        return fresh
    mine = fresh.select("benchmark_sha256", "item_index")
    others = stored.join(mine, on=["benchmark_sha256", "item_index"], how="anti")
    if "weak" not in others.columns:  # rows stored before weak items were told apart
        others = others.with_columns(pl.lit(None, dtype=pl.Utf8).alias("weak"))
    return pl.concat([others.select(list(SCHEMA)), fresh], how="vertical_relaxed").sort(
        ["benchmark", "benchmark_sha256", "item_index"]
    )


def rates(df: pl.DataFrame) -> pl.DataFrame:
    """Per database and overall (``db_id`` = ``ALL``): items, flagged, weak (apart from flagged),
    and per error type, per check and per weak check the count and rate (a flag of several types
    counts once per type)."""
    if not df.height:
        return pl.DataFrame()
    frames = []
    for db_id, part in [*sorted(df.group_by("db_id"), key=lambda g: g[0][0]), (("ALL",), df)]:
        n = part.height
        row = {"db_id": db_id[0], "items": n, "flagged": int(part["flagged"].sum())}
        row["flagged_rate"] = row["flagged"] / n
        weak = part["weak"].fill_null("") if "weak" in part.columns else pl.Series([""] * n)
        row["weak"] = int((weak != "").sum())
        row["weak_rate"] = row["weak"] / n
        for t in ("E1", "E2", "E3", "E4"):
            c = int(part["error_types"].str.contains(t).sum())
            row[f"{t}"] = c
            row[f"{t}_rate"] = c / n
        for check in checks.CHECKS:
            row[check] = int(part["flags"].str.split(",").list.contains(check).sum())
        for check in checks.WEAK_CHECKS:
            row[check] = int(weak.str.split(",").list.contains(check).sum())
        frames.append(row)
    return pl.DataFrame(frames)
