"""`quandary audit sql` in a sandbox process (issue 23 item 8): the user's own SQL, but a typo must
not take the machine. The catalog is opened and the query runs in :mod:`resources.sql.audit_worker`
under an address-space limit; the worker interrupts DuckDB at the deadline and is killed at 1.25x
it (or at once on Ctrl-C: the ``KeyboardInterrupt`` goes on to the caller after the kill)."""

import os
import time
from dataclasses import dataclass, field

from resources.sql.pool import _Worker
from resources.sql.results import FailureKind, QueryFailure, check_timeout

DEFAULT_AUDIT_TIMEOUT_S = 60.0
DEFAULT_AUDIT_MAX_BYTES = int(os.environ.get("QUANDARY_AUDIT_MAX_RESULT_MB", "256")) << 20


@dataclass
class AuditOutcome:
    ok: bool
    columns: list = field(default_factory=list)
    rows: list = field(default_factory=list)
    kind: str = ""  # when not ok: timeout | too_large | query | sandbox
    message: str = ""
    views: list = field(default_factory=list)
    elapsed_s: float = 0.0
    memory_limit: int = 0  # the worker's address-space cap, bytes (0: not enforced on this OS)


def run_audit_query(
    sql: str, *, timeout_s: float = DEFAULT_AUDIT_TIMEOUT_S, max_bytes: int = DEFAULT_AUDIT_MAX_BYTES, warn=None
) -> AuditOutcome:
    """Run one audit query in a fresh sandbox worker. Raises ``ValueError`` for a bad timeout only.
    ``warn(message)`` gets the catalog's warnings (a damaged artifact or call log left out)."""

    timeout_s = check_timeout(timeout_s)
    try:
        worker = _Worker("resources.sql.audit_worker")
    except RuntimeError:
        return AuditOutcome(
            False,
            kind="sandbox",
            message="the audit sandbox did not start (run with the catalog warnings above, or check QUANDARY_HOME)",
        )
    for message in (worker.ready.get("warnings") or []) if warn is not None else []:
        warn(message)
    try:
        start = time.perf_counter()
        out = worker.call({"sql": sql, "timeout_s": timeout_s, "max_bytes": max_bytes}, timeout_s)
        elapsed = time.perf_counter() - start
    finally:
        worker.kill()  # one query per worker; also on Ctrl-C
    limit = worker.memory_limit
    if isinstance(out, QueryFailure):  # the parent's verdicts: deadline missed, or the worker died
        kind = "timeout" if out.kind is FailureKind.TIMEOUT else "too_large"
        message = (
            f"the query ran past {timeout_s:g} s and was stopped"
            if kind == "timeout"
            else f"the query's sandbox died, most likely out of memory (limit {limit >> 20} MB)"
        )
        return AuditOutcome(False, kind=kind, message=message, elapsed_s=elapsed, memory_limit=limit)
    return AuditOutcome(
        bool(out.get("ok")),
        columns=out.get("columns", []),
        rows=out.get("rows", []),
        kind=out.get("kind", ""),
        message=out.get("message", ""),
        views=out.get("views", []),
        elapsed_s=elapsed,
        memory_limit=limit,
    )
