"""Wall time of N partitions of the ABISS cascade on 1 vs 2 worker processes (issue 21), as nodes
would run them, against the loopback OpenAI stub with a fixed latency.

    .venv/bin/python bench/bench_workers.py [--partitions 4] [--latency 0.2] [--n 1] [--smoke]

A partition is the cascade's council stages (2..10, ``run_stage`` exactly as the assets call it) on
the programmatic candidates of the demo database; partitions differ by a line in the schema context,
so every partition's requests are its own (no cache hit across partitions). Each worker process runs
its share of the partitions one after another with a 3-member validator council (``max_in_flight``
8 each) at the stub (``tests/llm_fakes.py`` in its own process), which answers every request after
``latency`` seconds with one JSON object that fits every stage's schema. Three modes:

- 1 worker: every partition in one process;
- 2 workers, one QUANDARY_HOME: two processes of one node sharing one call log;
- 2 workers, two QUANDARY_HOMEs: two nodes, each with its own call log.

Workers import and set up first, then start together; the wall time runs from that start to the last
worker's end. speedup = wall(1 worker) / wall(2 workers); 2.0 is the most two workers can give.
``--smoke`` (``make test``): 2 partitions of 12 candidates at 10 ms, every mode.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipelines.abiss.demo_db import write_demo_db  # noqa: E402
from pipelines.abiss.generation import generate_nlq_objects, ground_sql  # noqa: E402
from pipelines.abiss.grid import GridSpec, expand_grid  # noqa: E402

# One answer for every cascade prompt: a yes verdict, a SQL query, an answerability, a category
# choice and a style (each stage's model reads its own keys and ignores the rest).
REPLY = json.dumps(
    {
        "verdict": "yes",
        "reason": "",
        "sql": "SELECT COUNT(*) FROM students",
        "answerable": False,
        "choice": "A",
        "style": "formal",
    }
)


def make_candidates(home: Path, n: int, limit: int | None = None) -> Path:
    """The demo database and its programmatic candidates (generated once, read by every worker;
    the first ``limit`` of them when given)."""

    db_path = str(write_demo_db(home / "university.sqlite"))
    grid = expand_grid(
        GridSpec(("programmatic",), styles=("formal", "colloquial", "interrogative"), difficulties=("moderate",), n=n),
        "university",
    )
    objects, _ = generate_nlq_objects(grid, "", db_path)
    path = home / "candidates.json"
    candidates = ground_sql(objects, "")[:limit]
    path.write_text(json.dumps({"db_path": db_path, "candidates": candidates}, default=str))
    return path


def worker(args) -> int:
    """One node: set up, say ready, wait for go, run the partitions, report."""
    os.environ["QUANDARY_HOME"] = args.home
    import polars as pl  # lazy: after the setup above it (environment, monkeypatch or sys.path)

    from pipelines.abiss import outputs
    from pipelines.abiss.stages import STAGES, StageContext, run_stage
    from pipelines.sqltools.schema_context import render_schema_context
    from resources.catalog import inspect_database
    from resources.llm import Council, call_log
    from resources.llm.config import Member

    data = json.loads(Path(args.candidates).read_text())
    db_path = data["db_path"]
    cands = pl.DataFrame(data["candidates"], infer_schema_length=None)
    schema = render_schema_context(inspect_database(db_path))
    members = [
        Member(
            name=name,
            model="openai/stub",
            api_base=f"http://127.0.0.1:{args.port}/v1",
            seed=i,
            max_in_flight=8,
            max_retries=0,
            timeout_s=60,
        )
        for i, name in enumerate("abc")
    ]
    council = Council("validators", members, call_log())
    print("ready", flush=True)
    sys.stdin.readline()  # go
    t0 = time.perf_counter()
    calls = accepted = 0
    for part in [int(p) for p in args.worker_partitions.split(",")]:
        context = schema + f"\n/* partition {part} */"  # a partition's prompts are its own
        previous = None
        for spec in STAGES:
            entering = outputs.survivors(cands, previous)
            ctx = StageContext(db_path, context, council) if spec.no >= 2 else None
            previous = outputs.decisions_frame(run_stage(spec.no, entering.to_dicts(), ctx))
            calls += ctx.stats["calls"] if ctx is not None else 0
        accepted += outputs.survivors(cands, previous).height
    print(json.dumps({"wall_s": time.perf_counter() - t0, "calls": calls, "accepted": accepted}), flush=True)
    return 0


def run_mode(n_workers: int, shared_home: bool, partitions: int, port: int, candidates: Path, root: Path) -> dict:
    homes = (
        [root / f"home-{n_workers}-{'shared' if shared_home else 'own'}"] * n_workers
        if shared_home
        else [root / f"home-{n_workers}-own-{w}" for w in range(n_workers)]
    )
    procs = []
    for w in range(n_workers):
        share = ",".join(str(p) for p in range(w, partitions, n_workers))
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--worker",
                    "--home",
                    str(homes[w]),
                    "--port",
                    str(port),
                    "--candidates",
                    str(candidates),
                    "--worker-partitions",
                    share,
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                cwd=REPO,
            )
        )
    for p in procs:
        line = p.stdout.readline().strip()
        if line != "ready":
            raise SystemExit(f"a worker failed to start (said {line!r}); run it alone to see why")
    t0 = time.perf_counter()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    reports = [json.loads(p.stdout.readline()) for p in procs]
    wall = time.perf_counter() - t0
    for p in procs:
        p.wait(60)
    return {"wall_s": wall, "calls": sum(r["calls"] for r in reports), "accepted": sum(r["accepted"] for r in reports)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--n", type=int, default=1, help="samples per grid cell of a partition")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--home", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--candidates", help=argparse.SUPPRESS)
    ap.add_argument("--worker-partitions", help=argparse.SUPPRESS)
    ap.add_argument("--smoke", action="store_true", help="2 partitions of 12 candidates at 10 ms (make test)")
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    if args.smoke:
        args.partitions, args.latency, args.n = 2, 0.01, 1

    root = Path(tempfile.mkdtemp(prefix="quandary-bench-workers-"))
    os.environ["QUANDARY_HOME"] = str(root / "setup")
    candidates = make_candidates(root, args.n, limit=12 if args.smoke else None)
    n_cands = len(json.loads(candidates.read_text())["candidates"])
    stub = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "llm_fakes.py"), "--latency", str(args.latency), "--content", REPLY],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    port = int(stub.stdout.readline())
    try:
        rows = [
            (label, run_mode(w, shared, args.partitions, port, candidates, root))
            for label, w, shared in (
                ("1 worker", 1, True),
                ("2 workers, one QUANDARY_HOME", 2, True),
                ("2 workers, two QUANDARY_HOMEs", 2, False),
            )
        ]
    finally:
        stub.stdin.close()
        requests = json.loads(stub.stdout.readline() or "{}").get("requests")
        stub.wait(10)
    base = rows[0][1]["wall_s"]
    print(
        f"ABISS cascade (stages 2-10), {args.partitions} partitions of {n_cands} demo candidates, stub latency "
        f"{args.latency * 1000:.0f} ms, 3 members x max_in_flight 8, {os.cpu_count()} CPUs, "
        f"load {os.getloadavg()[0]:.1f}; {requests} requests at the stub in all\n"
    )
    print("| workers | wall s | council calls | accepted | speedup vs 1 worker |")
    print("|---|---:|---:|---:|---:|")
    for label, r in rows:
        print(f"| {label} | {r['wall_s']:.2f} | {r['calls']} | {r['accepted']} | {base / r['wall_s']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
