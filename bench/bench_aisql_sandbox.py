"""AI-operator SQL: a sandbox worker hosting the UDFs vs DuckDB's own limits plus a watchdog in
process (issue 23 item 2). Needs ../shared/data/sembench.

    .venv/bin/python bench/bench_aisql_sandbox.py [--budget 1.0] [--cap-gb 6] [--vectors 100] [--smoke]

``--smoke``: the first hostile query only, a 0.3 s budget and 2 vectors (seconds; ``make test``).

Both designs run the same code (``run_duckdb_sql`` -> ``SandboxSession``); the in-process one is
``QUANDARY_SQL_IN_PROCESS=1``: the locked read-only connection with ``memory_limit`` 256 MB and the
watchdog interrupt, in the caller.

1. **Hostile queries**, each in a fresh child process per design: outcome, wall time, peak RSS of
   the caller (VmHWM growth during the query) and of the worker (``RUSAGE_CHILDREN`` after it
   exited). The wall time is the query's (the worker is started before, as ``run_duckdb_sql`` does). The bench kills a child whose RSS (with its worker) passes ``--cap-gb``, so the
   in-process design cannot take the shared machine; that row then says ``> cap``.
2. **A normal AI query** (movie Q3, BigQuery dialect, label oracle): the session's start, the query
   with a cold memo and again with a warm one (every call a memo hit, so only the UDF round trips).
3. **Per UDF call**: one query whose single UDF runs on ``--vectors`` DuckDB vectors of 2,048 rows
   (keyword backend); (worker - in process) / vectors is the cost of one round trip over the pipe.
"""

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DATA = REPO.parent / "shared" / "data"

from pipelines.aisql.execute import run_duckdb_sql, run_query  # noqa: E402
from pipelines.aisql.operators import AIRuntime, KeywordOperator, LabelOracle  # noqa: E402
from pipelines.aisql.pipeline import prepare_db  # noqa: E402
from pipelines.aisql.scenarios import MOVIE, load_labels  # noqa: E402
from resources.sql.worker import proc_status_bytes  # noqa: E402

HOSTILE = [
    ("three repeat('x', 1e9)", "SELECT repeat('x', 1000000000) FROM range(3)"),
    ("count(*) over range(1e12)", "SELECT count(*) FROM range(1000000000000) a WHERE a.range % 7 = 3"),
    ("string_agg(repeat('x', 1e7)) x 1,000", "SELECT length(string_agg(repeat('x', 10000000), '')) FROM range(1000)"),
]
DESIGNS = ("worker", "in process")


def _db():
    return prepare_db("movie", DATA, Path(os.environ["QUANDARY_HOME"]))


def child(sql: str, budget: float) -> None:
    """One query, then one JSON line (runs in a fresh process: its memory figures are its own)."""

    db = _db()
    rt = AIRuntime(KeywordOperator())
    rt.session(db.path).start()  # the worker's start is not part of the query's time (run_duckdb_sql too)
    before = proc_status_bytes("VmHWM")
    start = time.monotonic()
    rec = run_duckdb_sql(db.path, sql, rt, timeout_s=budget)
    wall = time.monotonic() - start
    caller = proc_status_bytes("VmHWM") - before
    rt.close()  # the worker exits and is reaped: RUSAGE_CHILDREN has its peak
    worker = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print(
        json.dumps({"status": rec.status, "error": rec.error[:90], "wall": wall, "caller": caller, "worker": worker}),
        flush=True,
    )


def _descendants_rss(pid: int) -> int:
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += proc_status_bytes("VmRSS", p)
        try:
            todo += [int(c) for c in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
        except OSError:
            pass
    return total


def hostile(design: str, sql: str, budget: float, cap: int) -> dict:
    env = {**os.environ, "QUANDARY_SQL_IN_PROCESS": "1" if design == "in process" else "0"}
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", sql, "--budget", str(budget)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    start, peak = time.monotonic(), 0
    while proc.poll() is None:
        peak = max(peak, _descendants_rss(proc.pid))
        if peak > cap:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return {
                "status": f"> {cap >> 30} GB, killed",
                "error": "",
                "wall": time.monotonic() - start,
                "caller": peak,
                "worker": 0,
            }
        time.sleep(0.05)  # sampling interval of the RSS guard
    out, err = proc.communicate()
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if not lines:
        return {"status": "crash", "error": err[-90:], "wall": time.monotonic() - start, "caller": peak, "worker": 0}
    return json.loads(lines[-1])


def normal_query(design: str) -> dict:
    os.environ["QUANDARY_SQL_IN_PROCESS"] = "1" if design == "in process" else "0"
    db = _db()
    sql = (DATA / "sembench" / "files" / "movie" / "query" / "bigquery" / "Q3.sql").read_text()
    rt = AIRuntime(LabelOracle(load_labels(db.labels_path), MOVIE.vocabulary, p=0.1, score_of=MOVIE.score_of))
    try:
        t0 = time.perf_counter()
        rt.session(db.path).execute("SELECT 1", timeout_s=60)
        t1 = time.perf_counter()
        cold = run_query(db.path, sql, "bigquery", rt)
        t2 = time.perf_counter()
        warm = run_query(db.path, sql, "bigquery", rt)
        t3 = time.perf_counter()
    finally:
        rt.close()
    assert cold.ok and warm.ok and cold.rows == warm.rows, (cold.error, warm.error)
    return {"start": t1 - t0, "cold": t2 - t1, "warm": t3 - t2, "rows": cold.rows, "calls": cold.calls}


def per_call(design: str, vectors: int) -> tuple[float, int]:
    os.environ["QUANDARY_SQL_IN_PROCESS"] = "1" if design == "in process" else "0"
    db = _db()
    sql = (
        f"SELECT count(*) FROM range({vectors * 2048}) t(i) "
        "WHERE nlfilter(CAST(i % 512 AS VARCHAR) || ' good', 'positive')"
    )
    rt = AIRuntime(KeywordOperator())
    try:
        rt.session(db.path).execute("SELECT 1", timeout_s=60)
        run_duckdb_sql(db.path, sql, rt)  # fills the memo: the timed run is round trips + lookups only
        t0 = time.perf_counter()
        rec = run_duckdb_sql(db.path, sql, rt)
        wall = time.perf_counter() - t0
    finally:
        rt.close()
    assert rec.ok, rec.error
    return wall, rec.rows[0][0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=1.0)
    ap.add_argument("--cap-gb", type=float, default=6.0)
    ap.add_argument("--vectors", type=int, default=100)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--smoke", action="store_true", help="one hostile query, 0.3 s budget, 2 vectors: seconds")
    args = ap.parse_args()
    hostile_queries = HOSTILE
    if args.smoke:
        args.budget, args.vectors, args.cap_gb = 0.3, 2, min(args.cap_gb, 2.0)
        hostile_queries = HOSTILE[:1]
    if not (DATA / "sembench").is_dir():
        print(f"SKIP: SemBench data not found at {DATA / 'sembench'}")
        return 0
    os.environ.setdefault("QUANDARY_HOME", tempfile.mkdtemp(prefix="quandary-bench-aisql-sandbox-"))
    if args.child:
        child(args.child, args.budget)
        return 0
    _db()  # built once, before any timing
    print(
        f"{os.cpu_count()} CPUs, load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}; "
        f"budget {args.budget:g} s"
    )
    print(f"\n{'query':<38} {'design':<11} {'outcome':<26} {'wall s':>7} {'caller MB':>10} {'worker MB':>10}")
    for name, sql in hostile_queries:
        for design in DESIGNS:
            r = hostile(design, sql, args.budget, int(args.cap_gb * (1 << 30)))
            outcome = r["status"] + (f" ({r['error'].split(':')[0]})" if r["status"] == "error" else "")
            print(
                f"{name:<38} {design:<11} {outcome:<26} {r['wall']:7.2f} {r['caller'] / 2**20:10.0f} "
                f"{r['worker'] / 2**20:10.0f}"
            )
    print("\nmovie Q3 (BigQuery, label oracle p=0.1):")
    ref = None
    for design in DESIGNS:
        r = normal_query(design)
        same = "" if ref is None else f", same rows and calls as {DESIGNS[0]}: {(r['rows'], r['calls']) == ref}"
        ref = ref or (r["rows"], r["calls"])
        print(
            f"  {design:<11} session start {r['start']:.3f} s, cold {r['cold']:.3f} s, warm {r['warm']:.3f} s, "
            f"{r['calls']} calls{same}"
        )
    walls = {d: per_call(d, args.vectors) for d in DESIGNS}
    extra = (walls["worker"][0] - walls["in process"][0]) / args.vectors
    print(
        f"\none UDF on {args.vectors} vectors of 2,048 rows (warm memo): worker {walls['worker'][0]:.3f} s, "
        f"in process {walls['in process'][0]:.3f} s -> {extra * 1000:.2f} ms per UDF call (round trip)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
