"""The sandbox process behind `quandary audit sql` (issue 23 item 8), driven by
:mod:`resources.sql.audit_runner`.

It opens the audit catalog (artifact views + call log), then caps its address space at what it
uses plus ``$QUANDARY_AUDIT_MEMORY_MB`` (``RLIMIT_AS``; DuckDB's ``memory_limit`` does not count
string functions such as ``repeat``), says it is ready, runs one query under a watchdog that
interrupts DuckDB at the deadline, and answers with rows (bounded in bytes) or a typed failure.
The parent kills it at 1.25x the deadline, on Ctrl-C, or when it dies (``PR_SET_PDEATHSIG``).
Protocol: ``resources/sql/protocol.py``.
"""

import os
import signal
import sys
import threading

from resources.sql.protocol import read_msg, write_msg
from resources.sql.worker import _limit_memory, proc_status_bytes

DEFAULT_MEMORY_MB = 1024


def _die_with_parent() -> None:
    try:
        import ctypes  # lazy: Linux only (prctl)

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _run(con, req: dict) -> dict:
    # lazy: duckdb (also via storage.audit) loads only after main() points sys.stdout at stderr;
    # loaded before, its output would land in the protocol pipe (see resources/sql/engines.py)
    import duckdb

    from resources.sql.results import value_bytes
    from storage.audit import AuditQueryError, audit_query, list_views

    timer = threading.Timer(req["timeout_s"], con.interrupt)
    timer.daemon = True
    timer.start()
    try:
        cur = audit_query(con, req["sql"])
        columns = [d[0] for d in cur.description or []]
        rows, size = [], 0
        while True:
            batch = cur.fetchmany(1000)
            if not batch:
                break
            size += sum(value_bytes(list(r)) for r in batch)
            if size > req["max_bytes"]:
                return {
                    "ok": False,
                    "kind": "too_large",
                    "message": f"the result is larger than {req['max_bytes'] >> 20} MB: add a LIMIT or select "
                    "fewer columns",
                }
            rows += batch
        return {"ok": True, "columns": columns, "rows": rows}
    except (duckdb.Error, AuditQueryError, MemoryError) as exc:
        text = " ".join(str(exc).split())
        if timer.finished.is_set() and ("INTERRUPT" in text.upper()):
            return {"ok": False, "kind": "timeout", "message": f"the query ran past {req['timeout_s']:g} s"}
        if isinstance(exc, MemoryError) or "out of memory" in text.lower() or "failed to allocate" in text.lower():
            return {"ok": False, "kind": "too_large", "message": f"the query ran out of memory ({text[:200]})"}
        try:
            views = list_views(con)
        except duckdb.Error:
            views = []
        return {"ok": False, "kind": "query", "message": text, "views": views}
    finally:
        timer.cancel()


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and kills this process
    _die_with_parent()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but protocol messages on the pipe; catalog warnings to stderr
    from storage.audit import open_audit  # lazy: after the stdout redirect, as in _run

    warnings: list[str] = []  # the catalog's warnings (a damaged file ...) go to the parent's stderr
    con = open_audit(warn=warnings.append)
    con.execute("SELECT 1").fetchall()  # threads and allocator up before the baseline is measured
    limit = _limit_memory(int(os.environ.get("QUANDARY_AUDIT_MEMORY_MB", DEFAULT_MEMORY_MB)) << 20)
    write_msg(
        stdout,
        {"ready": True, "limit": limit, "pid": os.getpid(), "rss": proc_status_bytes("VmRSS"), "warnings": warnings},
    )
    req = read_msg(stdin)
    if req is None:
        return 0
    try:
        out = _run(con, req)
    except MemoryError:
        out = {"ok": False, "kind": "too_large", "message": "the query ran out of memory"}
    try:
        write_msg(stdout, out)
    except MemoryError:
        write_msg(stdout, {"ok": False, "kind": "too_large", "message": "the result is too large to send"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
