"""Run one AI-operator query on a scenario database through the project's safe executor.

The query runs in the runtime's sandbox session (a worker process: memory cap, byte caps, read-only,
no external access, one SELECT, watchdog at the deadline and kill at 1.25x it, typed failures); the
AI operators' calls come back to the runtime in this process. ``threads=1`` makes ``LIMIT`` without
``ORDER BY`` reproducible (spec §4.1).

:class:`RunRecord` is the result capture of spec §4.2: status ok|error|timeout|budget_exceeded, the
error, columns, all rows (only the first 50 are persisted, text cut to 120 characters), row count,
the operator calls it made and the wall time.
"""

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from pipelines.aisql.operators import AIRuntime, BudgetExceeded
from pipelines.aisql.rewrite import SqlRewriteError, to_duckdb
from resources.sql import FailureKind, QueryFailure

DEFAULT_TIMEOUT_S = 600.0  # AI operators are slow; the budget is the real bound
SHOWN_ROWS = 50
CELL_CHARS = 120


@dataclass
class RunRecord:
    status: str  # ok | error | timeout | budget_exceeded | undecided (the label oracle cannot answer)
    sql: str
    error: str = ""
    columns: list[str] = field(default_factory=list)
    rows: list[tuple] = field(default_factory=list)
    calls: int = 0  # distinct operator evaluations
    made: int = 0  # answered by the backend
    cached: int = 0
    failed: int = 0
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def row_count(self) -> int:
        return len(self.rows)

    def shown_rows(self) -> list[list]:
        def cell(v):
            if isinstance(v, str) and len(v) > CELL_CHARS:
                return v[: CELL_CHARS - 1] + "…"
            if isinstance(v, float):
                return round(v, 6)
            return v if v is None or isinstance(v, (int, bool, str)) else str(v)

        return [[cell(v) for v in r] for r in self.rows[:SHOWN_ROWS]]

    def summary(self) -> dict:
        return {
            "status": self.status,
            "error": self.error,
            "columns": self.columns,
            "rows": self.shown_rows(),
            "row_count": self.row_count,
            "n_llm_calls": self.calls,
            "made": self.made,
            "cached": self.cached,
            "failed": self.failed,
            "elapsed_s": round(self.elapsed_s, 3),
        }

    def summary_json(self) -> str:
        return json.dumps(self.summary(), default=str)


def run_duckdb_sql(
    db_path: Path,
    sql: str,
    runtime: AIRuntime,
    *,
    budget: int | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_rows: int = 100_000,
) -> RunRecord:
    """Run DuckDB-form AI SQL; never raises for a bad query."""
    start = time.perf_counter()
    try:
        session = runtime.session(db_path)  # the UDFs' calls come back to this runtime
        if session is not None:
            session.start()  # the sandbox worker's start is not part of the query's time
    except Exception as exc:  # noqa: BLE001 - e.g. the worker cannot start: recorded, the run goes on
        return RunRecord(
            status="error",
            sql=sql,
            error=f"cannot run: {type(exc).__name__}: {exc}"[:500],
            elapsed_s=time.perf_counter() - start,
        )
    runtime.begin(budget, timeout_s)
    try:
        if session is None:
            outcome = QueryFailure(FailureKind.RUNTIME, f"{db_path} is not a DuckDB scenario database")
        else:
            outcome = session.execute(sql, timeout_s=timeout_s, max_rows=max_rows)
    except BudgetExceeded as exc:  # raised outside DuckDB (defensive; normally wrapped by DuckDB)
        outcome = None
        err = str(exc)
    except Exception as exc:  # noqa: BLE001 - recorded, the run goes on
        outcome = None
        err = f"cannot run: {type(exc).__name__}: {exc}"[:500]
    finally:
        stats = runtime.end()
    rec = RunRecord(
        status="ok",
        sql=sql,
        calls=stats.calls,
        made=stats.made,
        cached=stats.cached,
        failed=stats.failed,
        elapsed_s=time.perf_counter() - start,
    )
    if stats.budget_exceeded:
        rec.status, rec.error = "budget_exceeded", f"AI-operator call budget of {stats.budget} exceeded"
    elif stats.undecided:
        rec.status, rec.error = "undecided", stats.undecided
    elif stats.timed_out:
        rec.status, rec.error = "timeout", f"query ran past {timeout_s:g} s; in-flight AI-operator calls cancelled"
    elif outcome is None:
        rec.status, rec.error = "error", err
    elif not outcome.ok:
        rec.status = "timeout" if outcome.kind is FailureKind.TIMEOUT else "error"
        # the status already says 'timeout'; errors keep their kind ('runtime: ...'), never twice
        msg = " ".join(outcome.message.split())
        rec.error = (
            msg if rec.status == "timeout" or msg.lower().startswith(outcome.kind.value) else outcome.one_line()
        )[:500]
    else:
        rec.columns, rec.rows = list(outcome.columns), list(outcome.rows)
    return rec


def run_query(db_path: Path, sql: str, dialect: str, runtime: AIRuntime, **kw) -> RunRecord:
    """Rewrite ``sql`` from ``dialect`` to DuckDB and run it."""
    try:
        duck = to_duckdb(sql, dialect)
    except SqlRewriteError as exc:
        return RunRecord(status="error", sql=sql, error=str(exc))
    return run_duckdb_sql(db_path, duck, runtime, **kw)
