"""Issue 45 item 5: a call log written once (no reopen since) and then emptied to 0 bytes or
deleted is noticed: opening it warns that the cached answers are gone, and `quandary audit sql`
still has an ``llm_calls`` view (empty) with the same warning instead of the view vanishing."""

import os
import subprocess

import pytest

from storage.llm_log import CallLog
from tests.cli.conftest import QUANDARY, REPO
from tests.storage.test_corrupt_state import _rec

pytestmark = pytest.mark.integration


def _audit(home, tmp_path, query):
    env = {**os.environ, "PYTHONPATH": str(REPO), "QUANDARY_HOME": str(home)}
    env["DAGSTER_HOME"] = str(tmp_path / "dagster_home")
    return subprocess.run(
        [QUANDARY, "audit", "sql", query], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("how", ["zero_bytes", "deleted"])
def test_a_call_log_emptied_after_one_run_warns_and_keeps_the_view(isolated_home, tmp_path, how):
    path = isolated_home / "llm_calls.sqlite"
    log = CallLog(path)  # one run's log: opened empty, then one call recorded
    log.record(_rec("k1"))
    log.close()
    done = _audit(isolated_home, tmp_path, "SELECT count(*) AS n FROM llm_calls")
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr

    for suffix in ("-wal", "-shm"):
        if os.path.exists(f"{path}{suffix}"):
            os.unlink(f"{path}{suffix}")
    if how == "zero_bytes":
        path.write_bytes(b"")
    else:
        path.unlink()
    done = _audit(isolated_home, tmp_path, "SELECT count(*) AS n, count(status) AS s FROM llm_calls")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-2:] == ["0", "0"], done.stdout
    word = "empty" if how == "zero_bytes" else "gone"
    assert f"held 1 calls and is now {word}" in done.stderr and "llm_calls view is empty" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    with pytest.warns(UserWarning, match=r"held 1 calls .* every cached answer is lost"):
        CallLog(path).close()
