"""Issue 45 item 5: `quandary aisql evaluate` killed with SIGKILL resumes without judging again the
verdicts it finished before the kill (they were journaled as they finished), and the killed run is
not left STARTED in the Dagster instance: the next command marks it failed."""

import json
import os
import re
import signal
import subprocess

import pytest
from dagster import DagsterInstance, DagsterRunStatus

from tests.aisql.conftest import movie_query
from tests.cli.conftest import QUANDARY, REPO
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


def test_evaluate_resumes_after_kill9_without_rejudging(sembench_root, tmp_path, isolated_home):
    gold = movie_query(sembench_root, "bigquery", "Q3")
    rows = [
        {
            "id": i,
            "scenario": "movie",
            "question": "q",
            "gold_sql": gold,
            "predicted_sql": gold.replace("taken_3", f"taken_{i % 7}"),
            "label": i % 7 == 3,
        }
        for i in range(200)
    ]
    path = tmp_path / "preds.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    home = tmp_path / "dagster_home"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "QUANDARY_HOME": str(isolated_home),
        "DAGSTER_HOME": str(home),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_OFFLINE_MODE": "true",
    }
    args = [QUANDARY, "aisql", "evaluate", str(path), "--data", str(sembench_root)]
    proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    journals = isolated_home / "journals" / "aisql_prediction_verdicts"

    def journaled():  # the event: a batch of finished verdicts is on disk
        files = list(journals.glob("*.jsonl")) if journals.is_dir() else []
        return sum(f.read_text().count("\n") for f in files) if files else None

    done_before = wait_until(journaled, 300, "a journaled batch of verdicts", alive=lambda: proc.poll() is None)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    finished = journaled()
    assert done_before >= 1 and finished < len(rows), "the run ended before the kill: nothing to resume"

    with DagsterInstance.from_config(str(home)) as instance:
        assert [r.status for r in instance.get_runs()] == [DagsterRunStatus.STARTED]

    again = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    m = re.search(r"reused (\d+) stored verdicts, judged (\d+)", again.stdout)
    assert m, again.stdout[-2000:]
    reused, judged = int(m.group(1)), int(m.group(2))
    assert reused >= finished and reused + judged == len(rows)
    assert not list(journals.glob("*.jsonl"))  # cleared once the rows are stored
    with DagsterInstance.from_config(str(home)) as instance:
        statuses = sorted(r.status.name for r in instance.get_runs())
    assert statuses == ["FAILURE", "SUCCESS"], statuses
