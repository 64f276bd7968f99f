"""Overhead and throughput of the council layer against a loopback OpenAI-compatible stub.

    .venv/bin/python bench/bench_council.py --latency 1.0 --levels 16,64     # wall / ideal
    .venv/bin/python bench/bench_council.py --latency 0 --levels 64 --requests 3000  # requests/s
    .venv/bin/python bench/bench_council.py --latency 1.0 --levels 64 --repeat 5     # median of 5 passes
    .venv/bin/python bench/bench_council.py --smoke     # seconds: 20 requests at 1 and 4 in flight (make test)

For each level (requests in flight), sends N unique structured requests through
``Council.ask_many`` (cache lookup and claim, HTTP, parsing, SQLite log write) to a stub that answers
every request after exactly ``latency`` seconds, and compares the wall time with the ideal
``N × latency / in_flight``. A ratio of 1.00 means zero overhead. With ``--latency 0`` the stub
answers at once and requests/s is the client's throughput. ``client CPU ms/req`` is this process's
CPU time per request (the stub runs in its own process so it does not compete for the GIL). A second
pass re-sends the same requests and measures the cache-hit path. ``--transport litellm`` sends
through litellm instead of the direct OpenAI-compatible client (docs/council.md). ``floor`` is the
same requests sent by the bare HTTP client alone (no council, cache, log or parsing): what this
machine and the stub allow; on a shared, busy machine read the ratio against it.
"""

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Literal

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


from pydantic import BaseModel  # noqa: E402

from resources.llm import openai_http  # noqa: E402


class Verdict(BaseModel):
    answer: Literal["ok"]


async def _bare_http(api_base: str, prompts: list, level: int) -> float:
    """Wall time of the same requests through the bare pooled HTTP client, ``level`` at a time."""

    gate = asyncio.Semaphore(level)
    url = api_base + "/chat/completions"

    async def one(msgs):
        async with gate:
            await openai_http.complete(url, None, {"model": "stub", "messages": msgs}, timeout_s=30, answer_cap=1 << 20)

    await asyncio.gather(*(one([{"role": "user", "content": f"warmup {i}"}]) for i in range(level)))
    t0 = time.perf_counter()
    await asyncio.gather(*(one([{"role": "user", "content": f"floor {m[0]['content']}"}]) for m in prompts))
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--seconds", type=float, default=2.0, help="ideal duration of each level")
    ap.add_argument("--requests", type=int, default=0, help="requests per level (default: from --seconds)")
    ap.add_argument("--levels", default="1,4,16")
    ap.add_argument("--transport", default="auto", choices=("auto", "litellm"))
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="measured passes per level (fresh requests each): "
        "the median is shown, the spread of a shared machine's load",
    )
    ap.add_argument("--smoke", action="store_true", help="20 requests at 1 and 4 in flight, 10 ms (make test)")
    args = ap.parse_args()
    if args.smoke:
        args.latency, args.requests, args.levels, args.repeat = 0.01, 20, "1,4", 1
    if not args.requests and args.latency <= 0:
        ap.error("--latency 0 needs --requests")

    os.environ["QUANDARY_HOME"] = tempfile.mkdtemp(prefix="quandary-bench-")
    from resources.llm import Council  # lazy: after the setup above it (environment, monkeypatch or sys.path)
    from resources.llm.config import Member
    from resources.llm.registry import call_log
    from resources.llm.runtime import run_sync

    stub = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "llm_fakes.py"), "--latency", str(args.latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    port = int(stub.stdout.readline())
    rows = []
    try:
        for level in [int(x) for x in args.levels.split(",")]:
            extra = {} if args.transport == "auto" else {"transport": args.transport}
            member = Member(
                name=f"stub{level}",
                model="openai/stub",
                api_base=f"http://127.0.0.1:{port}/v1",
                max_in_flight=level,
                max_retries=0,
                timeout_s=30,
                **extra,
            )
            council = Council("bench", [member], call_log())
            n = args.requests or max(level, int(round(args.seconds / args.latency * level)))
            council.ask_many(
                member.name, [[{"role": "user", "content": f"warmup {level} {i}"}] for i in range(level)], Verdict
            )
            walls, floors, cpu = [], [], 0.0
            for p in range(args.repeat):
                prompts = [[{"role": "user", "content": f"level {level} pass {p} request {i}"}] for i in range(n)]
                t0, c0 = time.perf_counter(), time.process_time()
                results = council.ask_many(member.name, prompts, Verdict)
                walls.append(time.perf_counter() - t0)
                cpu += time.process_time() - c0
                assert all(r.ok for r in results), results[0].error
                floors.append(run_sync(_bare_http(member.api_base, prompts, level)))
            wall, floor, cpu = statistics.median(walls), statistics.median(floors), cpu / args.repeat
            t1 = time.perf_counter()
            cached = council.ask_many(member.name, prompts, Verdict)
            cached_wall = time.perf_counter() - t1
            assert all(r.cached for r in cached)
            ideal = n * args.latency / level
            rows.append((level, n, ideal, wall, n / wall, cpu / n * 1000, cached_wall / n * 1000, floor))
    finally:
        stub.stdin.close()
        stub.wait(10)

    print(
        f"council layer vs loopback stub ({args.latency * 1000:.0f} ms per request), {os.cpu_count()} CPUs, "
        f"load {os.getloadavg()[0]:.1f}, transport {args.transport}"
        + (f", median of {args.repeat} passes" if args.repeat > 1 else "")
    )
    print(
        f"{'in flight':>9} {'requests':>8} {'ideal s':>8} {'wall s':>8} {'ratio':>6} {'req/s':>7} "
        f"{'client CPU ms/req':>18} {'cache hit ms':>13} {'floor: wall s':>14} {'ratio':>6} {'req/s':>7}"
    )
    for level, n, ideal, wall, rate, cpu, hit, floor in rows:
        ratio = f"{wall / ideal:>6.2f}" if ideal else f"{'-':>6}"
        floor_ratio = f"{floor / ideal:>6.2f}" if ideal else f"{'-':>6}"
        print(
            f"{level:>9} {n:>8} {ideal:>8.2f} {wall:>8.2f} {ratio} {rate:>7.0f} {cpu:>18.2f} {hit:>13.2f} "
            f"{floor:>14.2f} {floor_ratio} {n / floor:>7.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
