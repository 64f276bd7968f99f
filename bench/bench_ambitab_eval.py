"""Benchmark the AmbiTab evaluation protocol (no LLM).

    .venv/bin/python bench/bench_ambitab_eval.py [--seeds 3] [--records 3000] [--resamples 2000] [--smoke]

1. Episodes per second with the deterministic oracle and a zero-latency scripted solver (it
   submits the reference reading's SQL through the real verifier, so execution is included) on
   every Ambrosia record of ``../shared/data`` (skipped when absent), for the four scripted
   policies.
2. Bootstrap time: a paired AVT-cluster percentile bootstrap (2,000 resamples) over ``--records``
   synthetic records × seeds (target: under 2 s on 2 cores), and the recall bootstrap with
   ineligible episodes.

``--smoke``: the same on 5 Ambrosia records, 1 seed, 200 records and 50 resamples (seconds; ``make
test`` runs it).
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from pipelines.ambitab import ambrosia  # noqa: E402
from pipelines.ambitab.protocol.askers import make_asker  # noqa: E402
from pipelines.ambitab.protocol.episode import run_episodes  # noqa: E402
from pipelines.ambitab.protocol.oracles import make_oracle  # noqa: E402
from pipelines.ambitab.protocol.solver import ScriptedSolver  # noqa: E402
from pipelines.ambitab.protocol.task import Task  # noqa: E402
from pipelines.ambitab.protocol.verifier import Verifier  # noqa: E402
from pipelines.core.stats import cluster_bootstrap  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"


def bench_episodes(seeds: int, limit: int | None = None) -> None:
    if not (SHARED / "ambrosia").is_dir():
        print(f"episodes: skipped ({SHARED / 'ambrosia'} not found)")
        return

    tasks = [Task.from_record(r) for r in ambrosia.build(SHARED, limit=limit).records]
    sql_of = {t.spec.user_query: t.verifier.reference_sql[0] for t in tasks}
    solver = ScriptedSolver(lambda spec, history: sql_of[spec.user_query], name="reference-reading")
    verifier = Verifier()
    print(f"episodes: {len(tasks)} Ambrosia records × {seeds} seeds, deterministic intent oracle")
    print(f"  {'asker':<10} {'episodes':>8} {'seconds':>8} {'episodes/s':>11}")
    for asker in ("none", "full", "full_adv", "generic"):
        t0 = time.perf_counter()
        rows = run_episodes(
            tasks,
            lambda a=asker: make_asker(a),
            make_oracle("det", "ambrosia"),
            solver,
            verifier,
            list(range(seeds)),
            concurrency=16,
        )
        dt = time.perf_counter() - t0
        print(f"  {asker:<10} {len(rows):>8} {dt:>8.2f} {len(rows) / dt:>11.0f}")


def bench_bootstrap(records: int, seeds: int, resamples: int, repeat: int = 3) -> None:
    rng = np.random.default_rng(0)
    avts = [f"avt{i // 2}" for i in range(records)]  # two readings per AVT
    clusters = [a for a in avts for _ in range(seeds)]
    a = rng.integers(0, 2, size=len(clusters)).astype(float).tolist()
    b = rng.integers(0, 2, size=len(clusters)).astype(float).tolist()
    rec = [None if x < 0.05 else x for x in rng.random(len(clusters))]
    for label, args in (
        ("paired SR difference", (clusters, a, clusters, b)),
        ("recall (5% ineligible)", (clusters, rec)),
    ):
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            ci = cluster_bootstrap(*args, n_resamples=resamples)
            times.append(time.perf_counter() - t0)
        print(
            f"bootstrap {label}: {records} records × {seeds} seeds, {ci.clusters} AVT clusters, {resamples} "
            f"resamples: median {statistics.median(times):.3f} s (interval {ci.fmt(3)})"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--records", type=int, default=3000)
    p.add_argument("--resamples", type=int, default=2000)
    p.add_argument("--smoke", action="store_true", help="tiny inputs, seconds (make test)")
    args = p.parse_args()
    if args.smoke:
        args.seeds, args.records, args.resamples = 1, 200, 50
    bench_episodes(args.seeds, limit=5 if args.smoke else None)
    bench_bootstrap(args.records, args.seeds, args.resamples, repeat=1 if args.smoke else 3)


if __name__ == "__main__":
    main()
