"""What a reviewer gets and gives back: the flagged items as JSONL or CSV (one line per item, the
findings and a pre-filled fix to accept or edit), and the corrected benchmark file written from a
reviewed export (only lines with ``accept`` true change anything)."""

import csv
import json
from pathlib import Path

import polars as pl

from pipelines.benchmark_audit.records import (
    GOLD_KEYS,
    MAX_SQL_CHARS,
    BenchmarkFileError,
    database_path,
    file_digest,
    read_records,
)

EXPORT_COLUMNS = (
    "benchmark_sha256",
    "db_id",
    "item_index",
    "question_id",
    "question",
    "evidence",
    "gold_sql",
    "source",
    "flags",
    "error_types",
    "weak",
    "findings",
)
COUNCIL_COLUMN = "council_flags"  # LLM-judged flags, in a column of their own
REVIEW_COLUMNS = ("accept", "fixed_sql", "fixed_evidence", "note")  # the reviewer fills these


def review_rows(flagged: pl.DataFrame, council_flags: dict[int, str] | None = None) -> list[dict]:
    """One row per flagged item; ``fixed_sql`` / ``fixed_evidence`` start as the gold's own text with
    the suggested fix (when there is one) applied, ``accept`` empty. ``council_flags``: item index ->
    the council's flags, kept apart from the deterministic ``flags``."""
    out = []
    for row in flagged.sort("item_index").iter_rows(named=True):
        rec = {k: row.get(k) or "" if k == "weak" else row[k] for k in EXPORT_COLUMNS}
        rec[COUNCIL_COLUMN] = (council_flags or {}).get(row["item_index"], "")
        fixed = {"gold_sql": row["gold_sql"], "evidence": row["evidence"]}
        if row["suggested_fix"]:
            fix = json.loads(row["suggested_fix"])
            fixed[fix["field"]] = fix["value"]
        rec.update(accept="", fixed_sql=fixed["gold_sql"], fixed_evidence=fixed["evidence"], note="")
        out.append(rec)
    return out


def write_review(rows: list[dict], path: Path) -> Path:
    """JSONL or CSV by the file's suffix (.jsonl / .csv)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = [*EXPORT_COLUMNS, COUNCIL_COLUMN, *REVIEW_COLUMNS]
    if path.suffix.lower() == ".csv":
        with path.open("w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=columns)
            w.writeheader()
            w.writerows(rows)
    else:
        with path.open("w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps({k: r[k] for k in columns}, ensure_ascii=False) + "\n")
    return path


def _truthy(value) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "y", "x", "accept", "accepted")


def read_review(path: Path) -> list[dict]:
    try:
        if path.suffix.lower() == ".csv":
            with path.open(newline="", encoding="utf-8") as fh:
                return list(csv.DictReader(fh))
        rows = []
        with path.open(encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise BenchmarkFileError(f"{path}: line {n} is not valid JSON: {exc.msg}") from None
        return rows
    except FileNotFoundError:
        raise BenchmarkFileError(f"{path}: no such file") from None


# Spider's tokens and parsed tree of the gold: they describe the old query once its SQL is fixed
SPIDER_DERIVED = ("query_toks", "query_toks_no_value", "sql")
FIX_TIMEOUT_S = 30.0


def check_fixed_sql(sql: str, db_path: Path | None, timeout_s: float = FIX_TIMEOUT_S) -> str | None:
    """Why an accepted ``fixed_sql`` cannot be the new gold (None when it can): it must be one
    statement that runs read-only on its database (SQLite parses it there) within ``timeout_s``."""
    from pipelines.sqltools.syntax import has_second_statement
    from resources.sql import execute_sql

    if len(sql) > MAX_SQL_CHARS:
        return f"is {len(sql):,} characters, more than the limit of {MAX_SQL_CHARS:,}"
    if has_second_statement(sql):
        return "holds more than one statement"
    if db_path is None:
        return "cannot be run: no database file for its db_id (give --dbs)"
    outcome = execute_sql(db_path, sql, timeout_s=timeout_s, digest_beyond_cap=True)
    if not outcome.ok and not getattr(outcome, "digested", False):
        return f"does not run on {db_path.name} ({outcome.one_line()[:200]})"
    return None


def corrected_records(benchmark: Path, review: Path, dbs_dir: Path | None = None) -> tuple[list, int, int]:
    """The benchmark's records with every accepted fix applied (its own keys kept: Spider's
    ``query``, BIRD's ``SQL``); returns (records, fixes applied, records whose Spider tokens and
    parsed tree were removed as stale). A review of another version of the file, naming an item the
    file does not have, or an accepted ``fixed_sql`` that does not run on the item's database
    (``dbs_dir``), is refused in one line; nothing is written then."""
    records = read_records(benchmark)
    digest = file_digest(benchmark)
    applied = stale = 0
    for n, row in enumerate(read_review(review), 1):
        where = f"{review}: line {n}"
        if not _truthy(row.get("accept", "")):
            continue
        if row.get("benchmark_sha256") != digest:
            raise BenchmarkFileError(f"{where}: reviews another version of {benchmark} (sha256 differs)")
        try:
            index = int(row["item_index"])
            record = records[index]
        except (KeyError, ValueError, TypeError, IndexError):
            raise BenchmarkFileError(
                f"{where}: item_index {row.get('item_index')!r} is not an item of {benchmark}"
            ) from None
        if record.get("question") != row.get("question"):
            raise BenchmarkFileError(f"{where}: item {index}'s question differs from {benchmark}'s")
        key = next(k for k in GOLD_KEYS if isinstance(record.get(k), str))
        changed = False
        # the export holds stripped text: only a real edit changes a record
        if row.get("fixed_sql") and row["fixed_sql"].strip() != record[key].strip():
            db = database_path(dbs_dir, str(record.get("db_id"))) if dbs_dir else None
            if (why := check_fixed_sql(row["fixed_sql"], db)) is not None:
                raise BenchmarkFileError(f"{where}: item {index}'s fixed_sql {why}; fix or un-accept it")
            record[key] = row["fixed_sql"]
            derived = [k for k in SPIDER_DERIVED if k in record and k != key]
            for k in derived:  # they described the old query; a tool needing them re-derives them
                del record[k]
            stale += bool(derived)
            changed = True
        if (
            "evidence" in record
            and row.get("fixed_evidence") is not None
            and row["fixed_evidence"] != record["evidence"]
        ):
            record["evidence"] = row["fixed_evidence"]
            changed = True
        applied += changed
    return records, applied, stale
