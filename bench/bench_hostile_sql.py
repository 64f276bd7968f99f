"""Deadline ratio and extra memory of untrusted SQL over the hostile corpus (issue #13 item 1).

    .venv/bin/python bench/bench_hostile_sql.py [--budget 1.0] [--repeat 1] [--smoke]

Every query of ``tests/sql/hostile_sql.py`` runs in a fresh child process (so its memory
figures are its own): the child starts the sandbox with a warm-up query, then runs the hostile
query under ``--budget`` seconds and reports

* ``ratio``: wall time of ``execute_sql`` / budget (goal: <= 1.5);
* ``caller MB``: growth of the calling process's peak RSS (VmHWM) during the query;
* ``sandbox MB``: peak RSS of the sandbox worker above its warmed-up baseline (from
  ``getrusage(RUSAGE_CHILDREN)`` after the worker has exited or been killed).

Goal: every query ends within 1.5x its budget with under 512 MB extra RSS (caller + sandbox).
``--smoke`` (``make test``): the first query of each engine once; it fails on a wrong outcome, while
the time and memory goals are printed, not enforced (speed is measured here, never asserted in a test run).
"""

import argparse
import os
import platform
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.sql.hostile_sql import CORPUS, make_databases, run_in_child  # noqa: E402


def machine() -> str:
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs ({cpu}), load average {load}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--smoke", action="store_true", help="one query per engine, goals not enforced (make test)")
    args = ap.parse_args()
    corpus = CORPUS
    if args.smoke:
        first = {}
        for item in CORPUS:
            first.setdefault(item[1], item)
        corpus, args.repeat = list(first.values()), 1
    dbs = make_databases(Path(tempfile.mkdtemp(prefix="hostile-bench-")))
    print(f"machine: {machine()}")
    print(f"budget {args.budget:g} s per query; {len(corpus)} queries x {args.repeat}")
    print(f"{'query':<24} {'outcome':<10} {'seconds':>8} {'ratio':>6} {'caller MB':>10} {'sandbox MB':>11}")
    worst_ratio, worst_mb, failures, wrong = 0.0, 0.0, 0, 0
    for name, engine, sql, kinds in corpus:
        for _ in range(args.repeat):
            out = run_in_child(dbs[engine], sql, args.budget, address_cap=0)
            elapsed = out.get("elapsed_s") or float("nan")
            ratio = elapsed / args.budget
            caller = (out.get("parent_extra") or 0) / 2**20
            sandbox = (out.get("worker_extra") or 0) / 2**20
            ok = out["kind"] in kinds and ratio <= 1.5 and caller + sandbox < 512
            failures += not ok
            wrong += out["kind"] not in kinds  # the sandbox's verdict, whatever the load
            worst_ratio, worst_mb = max(worst_ratio, ratio), max(worst_mb, caller + sandbox)
            print(
                f"{name:<24} {str(out['kind']):<10} {elapsed:8.2f} {ratio:6.2f} {caller:10.0f} {sandbox:11.0f}"
                + ("" if ok else "   <-- MISSED")
            )
    print(f"worst deadline ratio {worst_ratio:.2f} (goal <= 1.5); worst extra RSS {worst_mb:.0f} MB (goal < 512)")
    print(f"machine after: load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 1 if (wrong if args.smoke else failures) else 0


if __name__ == "__main__":
    sys.exit(main())
