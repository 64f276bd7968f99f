"""The trainer's bench in its seconds-long smoke mode (a tiny random model): it trains, validates,
evaluates base vs trained on held-in and held-out records with paired intervals, and writes its
report and figures."""

import json

import pytest

from tests.bench.smoke import run_smoke


def _smoke(script: str, tmp_path, home) -> dict:
    # its only smoke run in the suite (tests/bench/test_bench_smoke.py: OWN_SMOKE_TEST)
    run_smoke(script, tmp_path, "--out", str(tmp_path), env={"QUANDARY_HOME": str(home), "HF_HUB_OFFLINE": "1"})
    for png in ("learning_curve.png", "gain.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return json.loads((tmp_path / "report.json").read_text())


@pytest.mark.integration
def test_bench_smoke_writes_a_report_and_figures(shared_data, tmp_path, isolated_home):
    report = _smoke("bench_ambitab_train.py", tmp_path, isolated_home)
    assert report["updates"] == 2 and [r["update"] for r in report["curve"]] == [1, 2]
    assert [v["update"] for v in report["validation"]] == [0, 2]  # before training and at the end
    for where in ("held_in", "held_out"):
        gain = report[where]["question_f1_gain"]
        assert gain["lo"] <= gain["mean"] <= gain["hi"]
        assert report[where]["base"]["question_f1"]["text"] and report[where]["trained"]["question_f1"]["text"]
    assert report["s_per_update"] > 0 and report["peak_rss_mib"] > 0


@pytest.mark.integration
def test_gpu_bench_smoke_runs_the_paper_preset_path_on_the_cpu(shared_data, tmp_path, isolated_home):
    """The GPU bench's smoke mode: the paper preset (gradient checkpointing on) on a tiny model."""
    report = _smoke("bench_ambitab_train_gpu.py", tmp_path, isolated_home)
    assert report["preset"] == "paper" and report["device"] == "cpu" and report["updates"] == 2
