"""Every bench runs in its seconds-long smoke mode, so none rots (#44).

The convention each ``bench/bench_*.py`` follows: ``--smoke`` runs
the same code path on tiny inputs in a few seconds, writes nothing into the repository and exits 0
on success. A smoke run that lacks an input it cannot make (``../shared/data``, the embedded
model's weights) prints ``SKIP: <reason>`` as its last line and exits 0; the test then skips with
that reason. A new bench is picked up by its file name; one without ``--smoke`` fails here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

BENCH = REPO_ROOT / "bench"
# review_checks.py is a library of bench_defects.py (no entry point): its smoke run exercises it
BENCHES = sorted(BENCH.glob("bench_*.py"))
# Generous: a smoke run takes seconds idle; this bounds a hung one on a loaded 2-core machine.
SMOKE_TIMEOUT_S = 300


def _repo_files() -> set[str]:
    """Files git does not ignore (tracked or new): what a smoke run must not add or change."""
    out = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    return set(out.stdout.splitlines()) if out.returncode == 0 else set()


def test_every_bench_is_discovered():
    assert len(BENCHES) >= 10, BENCHES  # the glob found the bench folder


# Benches whose smoke run starts the embedded model (tests/conftest.py gives them the model's lane;
# bench_embedded_tokens' smoke run uses the scripted council).
STARTS_THE_MODEL = {"bench_embedded_demo.py", "bench_embedded_reproducibility.py"}


def _param(script: Path):
    return pytest.param(script, id=script.name, marks=[pytest.mark.e2e] if script.name in STARTS_THE_MODEL else [])


@pytest.mark.integration
@pytest.mark.parametrize("script", [_param(p) for p in BENCHES])
def test_bench_smoke(script: Path, tmp_path):
    source = script.read_text()
    assert "--smoke" in source, f"{script.name} has no --smoke mode (the bench convention, bench/README.md)"
    env = {
        **os.environ,
        "QUANDARY_HOME": str(tmp_path / "quandary_home"),
        "DAGSTER_HOME": str(tmp_path / "dagster_home"),
        "TMPDIR": str(tmp_path),  # a bench's scratch folders land in this test's tmp_path
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.pop("QUANDARY_COUNCIL_CONFIG", None)
    before = _repo_files()
    proc = subprocess.run(
        [sys.executable, str(script), "--smoke"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=SMOKE_TIMEOUT_S,
    )
    tail = (proc.stdout + proc.stderr)[-3000:]
    assert proc.returncode == 0, f"{script.name} --smoke exited {proc.returncode}:\n{tail}"
    assert _repo_files() == before, f"{script.name} --smoke wrote into the repository"
    last = proc.stdout.strip().splitlines()[-1:] or [""]
    if last[0].startswith("SKIP:"):
        pytest.skip(f"{script.name} --smoke: {last[0][5:].strip()}")
