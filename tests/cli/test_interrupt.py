"""An interrupted run with LLM calls in flight exits promptly (it used to hang at exit while the
embedded server waited for requests nobody would read), and says so in one line.

Every wait is on an event (the call log has a finished call, the process exited) with budgets
sized for a loaded 2-core machine, not on fixed sleeps."""

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.waiting import wait_until

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


def _finished_calls(log: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{log}?mode=ro", uri=True, timeout=1)
        try:
            return con.execute("SELECT count(*) FROM llm_calls").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:  # not created yet, or mid-creation
        return 0


def test_sigterm_during_llm_calls_exits(tmp_path, isolated_home):
    home = tmp_path / "dh"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "quandary"), "demo"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        log = isolated_home / "llm_calls.sqlite"
        # the first generation call has finished: the embedded server is up and the next
        # generation requests (16, two in flight) are being served
        wait_until(
            lambda: _finished_calls(log) >= 1, 900, "the demo's first LLM call", alive=lambda: proc.poll() is None
        )
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=300)  # hangs forever without cancelling in-flight calls at exit
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err[-2000:]
    assert [line for line in err.splitlines() if line.strip()][-1].startswith("interrupted: run ")
