"""How a test runs a bench in its smoke mode (#44): its own process, its own state folders and
scratch space under the test's ``tmp_path``, and nothing written into the repository. Used by the
bench-wide smoke test and by the tests that check one bench's report more closely (each bench's
smoke run happens once per suite)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT

BENCH = REPO_ROOT / "bench"
# Generous: a smoke run takes seconds idle; this bounds a hung one on a loaded 2-core machine.
SMOKE_TIMEOUT_S = 600


def _repo_files() -> set[str]:
    """Files git does not ignore (tracked or new): what a smoke run must not add or change."""
    if not (REPO_ROOT / ".git").exists():
        return set()  # not a git checkout (an unpacked archive): nothing to compare with
    out = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    # a failing git must fail the check, never switch it off
    assert out.returncode == 0, f"git status in {REPO_ROOT} failed: {out.stderr.strip()}"
    return set(out.stdout.splitlines())


def run_smoke(script: str | Path, tmp_path: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``bench/<script> --smoke *args``, asserted to exit 0 and to leave the repository as it was."""
    script = BENCH / script
    assert "--smoke" in script.read_text(), f"{script.name} has no --smoke mode (the bench convention, bench/README.md)"
    full_env = {
        **os.environ,
        "QUANDARY_HOME": str(tmp_path / "quandary_home"),
        "DAGSTER_HOME": str(tmp_path / "dagster_home"),
        "TMPDIR": str(tmp_path),  # a bench's scratch folders land in this test's tmp_path
        **(env or {}),
    }
    full_env.pop("QUANDARY_COUNCIL_CONFIG", None)
    before = _repo_files()
    proc = subprocess.run(
        [sys.executable, str(script), "--smoke", *args],
        cwd=tmp_path,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=SMOKE_TIMEOUT_S,
    )
    tail = (proc.stdout + proc.stderr)[-3000:]
    assert proc.returncode == 0, f"{script.name} --smoke exited {proc.returncode}:\n{tail}"
    assert _repo_files() == before, f"{script.name} --smoke wrote into the repository"
    return proc
