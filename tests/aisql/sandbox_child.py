"""A separate process for tests/aisql/test_sandbox_limits.py (its peak memory is its own, and it can
be interrupted or killed): runs one AI-operator query and prints one JSON line.

    python -m tests.aisql.sandbox_child DB_PATH SQL TIMEOUT_S keyword|blocking

``blocking``: the AI operator prints ``calling`` and never answers (until interrupted)."""

import json
import sys
import threading
import time
from pathlib import Path

from pipelines.aisql.execute import run_duckdb_sql
from pipelines.aisql.operators import AIRuntime, KeywordOperator
from resources.sql.worker import proc_status_bytes


class Blocking:
    name = "blocking"

    def answer_now(self, reqs):
        print("calling", flush=True)
        threading.Event().wait()


def main(db: str, sql: str, timeout_s: str, backend: str) -> int:
    rt = AIRuntime(Blocking() if backend == "blocking" else KeywordOperator())
    before = proc_status_bytes("VmHWM")
    print("running", flush=True)
    start = time.monotonic()
    try:
        rec = run_duckdb_sql(Path(db), sql, rt, timeout_s=float(timeout_s))
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        return 130
    finally:
        rt.close()
    print(
        json.dumps(
            {
                "status": rec.status,
                "error": rec.error,
                "rows": rec.rows,
                "calls": rec.calls,
                "elapsed_s": time.monotonic() - start,
                "rss_growth": proc_status_bytes("VmHWM") - before,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
