"""An interrupted run with LLM calls in flight exits promptly (it used to hang at exit while the
embedded server waited for requests nobody would read)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


def test_sigterm_during_llm_calls_exits(tmp_path, isolated_home):
    home = tmp_path / "dh"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    proc = subprocess.Popen([str(Path(sys.executable).parent / "quandary"), "demo"], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        log = isolated_home / "llm_calls.sqlite"
        deadline = time.time() + 240
        while not log.exists():  # the council opens its call log just before its first request
            if time.time() > deadline or proc.poll() is not None:
                pytest.fail("the demo never reached its first LLM call")
            time.sleep(0.5)
        time.sleep(10)  # the embedded server is up and the first generation requests are in flight
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)  # hangs forever without cancelling in-flight calls at exit
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode is not None
