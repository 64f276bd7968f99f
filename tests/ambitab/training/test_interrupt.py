"""Ctrl-C during `quandary ambitab train` (#40 item 4, #45 item 4): one line and exit 130 (never
"terminate called without an active exception"), every finished update kept as a checkpoint
(saved at the interrupt, not only every ``checkpoint_every``), the checkpoint asset recorded, and
`--resume` continues from it."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.waiting import wait_until

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
QUANDARY = str(Path(sys.executable).with_name("quandary"))


def test_ctrl_c_keeps_every_finished_update_and_resumes(stored_corpus, tiny_model, tokenizer, tmp_path, isolated_home):
    env = {
        **os.environ,
        "QUANDARY_HOME": str(isolated_home),
        "DAGSTER_HOME": str(tmp_path / "dagster_home"),
        "PYTHONPATH": str(REPO),
        "HF_HUB_OFFLINE": "1",
        "QUANDARY_PROGRESS": "0",
    }
    (tmp_path / "dagster_home").mkdir()
    tiny = tmp_path / "tiny"
    tiny_model.save_pretrained(tiny)
    tokenizer.save_pretrained(tiny)
    stored_corpus("ambrosia")  # what `quandary ambitab build` stores, built once per session
    train = [QUANDARY, "ambitab", "train", "--corpus", "ambrosia", "--model", str(tiny), "--limit", "2"]
    proc = subprocess.Popen(
        [*train, "--requests", "1", "--trajectories", "2", "--max-updates", "30"],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    root = isolated_home / "ambitab" / "checkpoints"
    try:

        def one_update() -> bool:
            curves = list(root.glob("*/curve.jsonl")) if root.is_dir() else []
            return bool(curves) and bool(curves[0].read_text().strip())

        wait_until(one_update, 300, "the first update")
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole process group
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, out[-2000:] + err[-2000:]
    assert "terminate called" not in err and "Traceback" not in err, err[-3000:]
    assert "resume from the last checkpoint with: quandary ambitab train" in err
    (run_dir,) = list(root.iterdir())
    state = json.loads((run_dir / "state.json").read_text())
    done = [json.loads(line)["update"] for line in (run_dir / "curve.jsonl").read_text().splitlines()]
    assert state["update"] == done[-1] >= 1  # saved at the interrupt (cpu-small checkpoints every 2)
    resumed = subprocess.run(
        [QUANDARY, "ambitab", "train", "--corpus", "ambrosia", "--resume", run_dir.name, "--max-updates", "1"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"{state['update'] + 1}/40 updates on 2 slice_train records" in resumed.stdout
