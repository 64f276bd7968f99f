"""The audit's bench in its smoke mode (seconds): it runs, and reports precision against people."""

from pathlib import Path

from tests.bench.smoke import run_smoke

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"  # absent outside the workplace: the bench says so and passes


def test_bench_smoke_runs_and_measures_against_people(tmp_path):
    # its only smoke run in the suite (tests/bench/test_bench_smoke.py: OWN_SMOKE_TEST)
    done = run_smoke("bench_benchmark_audit.py", tmp_path)
    if (SHARED / "spider" / "dev.json").is_file():
        assert "**any deterministic flag** (items)" in done.stdout
        assert "weak items: people called" in done.stdout
    else:
        assert "skipping Spider dev" in done.stdout
