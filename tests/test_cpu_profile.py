"""The suite's CPU profile plugin (tests/cpu_profile.py, #44): a run's log holds that run's test
phases only. It appended to the file of an earlier run with the same folder, so the summary
counted every earlier run's CPU as this one's."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.integration  # pytest runs in processes of their own


def test_a_run_logs_its_own_test_phases_only(tmp_path):
    (tmp_path / "test_some.py").write_text("def test_a():\n    assert sum(range(1000)) == 499500\n")
    log = tmp_path / "log"
    env = {**os.environ, "QUANDARY_TEST_CPU_LOG": str(log), "PYTHONPATH": str(REPO_ROOT)}
    env.pop("PYTEST_XDIST_WORKER", None)
    for _ in range(2):  # the same folder twice, as a second profiling run would
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-c",
                os.devnull,
                "-p",
                "tests.cpu_profile",
            ]
            + ["--rootdir", str(tmp_path), str(tmp_path / "test_some.py")],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = [json.loads(line) for line in (log / "main.jsonl").read_text().splitlines()]
    assert sorted(r["phase"] for r in rows) == ["call", "session", "setup", "teardown"], rows
