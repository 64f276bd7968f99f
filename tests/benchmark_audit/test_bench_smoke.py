"""The audit's bench in its smoke mode (seconds): it runs, and reports precision against people."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"  # absent outside the workplace: the bench says so and passes


def test_bench_smoke_runs_and_measures_against_people():
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_benchmark_audit.py"), "--smoke"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    if (SHARED / "spider" / "dev.json").is_file():
        assert "**any deterministic flag** (items)" in done.stdout
        assert "weak items: people called" in done.stdout
    else:
        assert "skipping Spider dev" in done.stdout
