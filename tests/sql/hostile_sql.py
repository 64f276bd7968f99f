"""The hostile-SQL corpus (issue #13 item 1), shared by tests/sql and bench/bench_hostile_sql.py.

Each entry is (name, engine, sql, allowed failure kinds). Every one of them, unbounded, allocates
gigabytes or runs forever; bounded, it must end as a typed failure within 1.5x its budget.
"""

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import duckdb

REPO_ROOT = Path(__file__).resolve().parents[2]

_C20 = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<20)"
_C1000 = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<1000)"
# Either bound may trip first for queries that do real work before growing (on a loaded machine the
# deadline often wins); queries that allocate at once must always be too_large.
BOUNDED = ("too_large", "timeout")

CORPUS = [
    ("sqlite_zeroblob_x3", "sqlite", "SELECT zeroblob(999999999) FROM (VALUES(1),(2),(3))", ("too_large",)),
    ("sqlite_zeroblob_cte20", "sqlite", f"{_C20} SELECT zeroblob(999999999) FROM c", ("too_large",)),
    ("sqlite_group_concat", "sqlite", f"{_C1000} SELECT group_concat(zeroblob(10000000)) FROM c", BOUNDED),
    (
        "sqlite_printf_huge",
        "sqlite",
        "SELECT printf('%.*c', 2000000000, 'x')",
        BOUNDED,
    ),  # no check inside printf: killed
    ("sqlite_many_blobs", "sqlite", f"{_C1000} SELECT zeroblob(10000000) FROM c", BOUNDED),
    ("sqlite_sort_blobs", "sqlite", f"{_C1000} SELECT randomblob(1000000) AS b FROM c ORDER BY b", BOUNDED),
    (
        "sqlite_endless_cte",
        "sqlite",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c",
        ("timeout",),
    ),
    ("duckdb_repeat_x10", "duckdb", "SELECT " + ", ".join(["length(repeat('x', 1000000000))"] * 10), ("too_large",)),
    ("duckdb_string_agg", "duckdb", "SELECT string_agg(repeat('x', 10000000), '') FROM range(1000)", BOUNDED),
    ("duckdb_many_strings", "duckdb", "SELECT repeat('x', 10000000) FROM range(1000)", BOUNDED),
    ("duckdb_list_agg", "duckdb", "SELECT list(repeat('x', 1000000)) FROM range(100000)", BOUNDED),
    ("duckdb_endless_range", "duckdb", "SELECT count(*) FROM range(1000000000000) a", ("timeout",)),
]


def make_databases(folder: Path) -> dict[str, Path]:
    """One tiny database per engine (the corpus needs no data, only a file to open)."""

    folder.mkdir(parents=True, exist_ok=True)
    sq = folder / "hostile.sqlite"
    if not sq.exists():
        con = sqlite3.connect(sq)
        con.execute("CREATE TABLE t(a INTEGER)")
        con.execute("INSERT INTO t VALUES (1)")
        con.commit()
        con.close()
    dd = folder / "hostile.duckdb"
    if not dd.exists():
        con = duckdb.connect(str(dd))
        con.execute("CREATE TABLE t AS SELECT 1 AS a")
        con.close()
    return {"sqlite": sq, "duckdb": dd}


# A child process per query: its memory figures are its own, and a run-away query (before the
# bounds existed) dies inside its address-space cap instead of taking the machine down.
CHILD = r"""
import json, resource, sys, time
cap = int(sys.argv[4])
if cap:
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
from resources.sql import pool as sql_executor
from resources.sql.worker import proc_status_bytes
db, sql, budget = sys.argv[1], sys.argv[2], float(sys.argv[3])
sql_executor.execute_sql(db, "SELECT 1", timeout_s=30)  # start the sandbox before measuring
pool = getattr(sql_executor, "_POOL", None)
worker_base = pool._idle[0].baseline_rss if pool is not None and pool._idle else 0
base = proc_status_bytes("VmHWM")
t0 = time.perf_counter()
try:
    r = sql_executor.execute_sql(db, sql, timeout_s=budget)
    kind = None if r.ok else r.kind.value
    msg = "" if r.ok else r.message[:200]
except BaseException as exc:
    kind, msg = "crash", f"{type(exc).__name__}: {exc}"[:200]
elapsed = time.perf_counter() - t0
parent_extra = max(0, proc_status_bytes("VmHWM") - base)
if hasattr(sql_executor, "close_workers"):
    sql_executor.close_workers()
worker_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps({"kind": kind, "message": msg, "elapsed_s": elapsed, "parent_extra": parent_extra,
                  "worker_extra": max(0, worker_peak - worker_base) if worker_base else 0}))
"""


def run_in_child(db: Path, sql: str, budget_s: float, address_cap: int = 3 << 30, wall_limit_s: float = 120) -> dict:
    try:
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, str(db), sql, str(budget_s), str(address_cap)],
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
            timeout=wall_limit_s,
        )
    except subprocess.TimeoutExpired:
        return {"kind": "hung", "message": f"no answer within {wall_limit_s} s", "elapsed_s": wall_limit_s}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"kind": "crash", "message": (proc.stderr or "")[-300:], "elapsed_s": None}
    return json.loads(lines[-1])
