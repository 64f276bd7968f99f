"""Metric formulas on hand-built episodes (spec §6.1–§6.2), the training objective (§7)."""

import json
import math

import polars as pl
import pytest

from pipelines.ambitab.protocol.metrics import episode_scores, gain_and_gap, mean_sd, per_seed, summarise
from pipelines.ambitab.protocol.training import group_advantages, reward_f1, reward_sr, rollouts


def test_recall_precision_f1_of_one_episode():
    # |Amb| = 3; questions credit a, ∅, a (repeat), b
    s = episode_scores(3, [{"a"}, set(), {"a"}, {"b"}])
    assert s.recall == pytest.approx(2 / 3)
    assert s.precision == pytest.approx(2 / 4)
    assert s.f1 == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))


def test_no_questions_precision_undefined_recall_zero():
    s = episode_scores(2, [])
    assert s.precision is None and s.recall == 0.0 and s.f1 == 0.0


def test_controls_have_no_recall_but_keep_precision():
    s = episode_scores(0, [set(), set()])
    assert s.recall is None and s.f1 is None and s.precision == 0.0


def test_fallback_stop_is_left_out_of_recall_and_f1():
    s = episode_scores(2, [{"a"}], fallback=True)
    assert s.recall is None and s.f1 is None and s.precision == 1.0


def test_p_equals_r_equals_zero_gives_f1_zero():
    assert episode_scores(1, [set()]).f1 == 0.0


def test_mean_sd_is_the_sample_sd():
    mu, sd = mean_sd([1.0, 2.0, 3.0])
    assert mu == 2.0 and sd == pytest.approx(1.0)
    assert mean_sd([5.0]) == (5.0, None)
    assert mean_sd([None, None]) == (None, None)


def _ep(
    record,
    seed,
    asker,
    verdict,
    recall,
    precision,
    f1=None,
    oracle="det_intent",
    corpus="ambrosia",
    fallback=False,
    n_amb=1,
):
    return {
        "record_id": record,
        "corpus": corpus,
        "seed": seed,
        "asker": asker,
        "prompt": "",
        "oracle": oracle,
        "spec_donor": "",
        "verdict": verdict,
        "recall": recall,
        "precision": precision,
        "f1": f1,
        "recall_no_response": recall,
        "fallback_stop": fallback,
        "n_amb": n_amb,
        "avt_id": record,
    }


EPISODES = pl.DataFrame(
    [
        # seed 0: ask solves r1 (|Amb|=1) and control r0; seed 1 only r0
        _ep("r0", 0, "llm", 1, None, None, n_amb=0),
        _ep("r1", 0, "llm", 1, 1.0, 0.5, 2 / 3),
        _ep("r2", 0, "llm", 0, None, 1.0, fallback=True),
        _ep("r0", 1, "llm", 1, None, None, n_amb=0),
        _ep("r1", 1, "llm", 0, 0.0, 0.0, 0.0),
        _ep("r2", 1, "llm", 0, 1.0, 1.0, 1.0),
        _ep("r0", 0, "none", 1, None, None, n_amb=0),
        _ep("r1", 0, "none", 0, 0.0, None, 0.0),
        _ep("r2", 0, "none", 0, 0.0, None, 0.0),
        _ep("r0", 1, "none", 0, None, None, n_amb=0),
        _ep("r1", 1, "none", 0, 0.0, None, 0.0),
        _ep("r2", 1, "none", 0, 0.0, None, 0.0),
        _ep("r0", 0, "full", 1, None, None, n_amb=0),
        _ep("r1", 0, "full", 1, 1.0, 1.0, 1.0),
        _ep("r2", 0, "full", 1, 1.0, 1.0, 1.0),
        _ep("r0", 1, "full", 1, None, None, n_amb=0),
        _ep("r1", 1, "full", 1, 1.0, 1.0, 1.0),
        _ep("r2", 1, "full", 0, 1.0, 1.0, 1.0),
    ],
    infer_schema_length=None,
)


def test_per_seed_macro_over_records_with_eligible_denominators():
    s = per_seed(EPISODES).filter(pl.col("asker") == "llm").sort("seed")
    assert s["sr"].to_list() == pytest.approx([2 / 3, 1 / 3])  # SR over all records, controls included
    assert s["rec"].to_list() == pytest.approx([1.0, 0.5])  # the fallback stop of seed 0 is left out
    assert s["prec"].to_list() == pytest.approx([0.75, 0.5])  # n ≥ 1 only (the fallback keeps its precision)
    assert s["fallback_stops"].to_list() == [1, 0]


def test_summary_is_mean_and_sample_sd_over_seeds_in_percent():
    row = summarise(EPISODES).filter(pl.col("asker") == "llm").row(0, named=True)
    assert row["sr"] == pytest.approx(50.0)
    assert row["sr_sd"] == pytest.approx(math.sqrt(2) * 100 / 6)
    assert row["seeds"] == 2 and row["episodes"] == 6


def test_gain_and_gap_are_per_seed_differences_and_signed():
    g = gain_and_gap(EPISODES, "ambrosia", "det_intent")
    # seed 0: ask 2/3, none 1/3, full 1 ; seed 1: ask 1/3, none 0, full 2/3
    assert g["gain"] == pytest.approx(100 * (1 / 3 + 1 / 3) / 2)
    assert g["gap"] == pytest.approx(100 * (1 / 3 + 1 / 3) / 2)
    assert g["gain_sd"] == pytest.approx(0.0)


def test_gap_is_not_truncated_when_the_asker_beats_full():
    eps = EPISODES.with_columns(
        pl.when(pl.col("asker") == "full").then(0).otherwise(pl.col("verdict")).alias("verdict")
    )
    assert gain_and_gap(eps, "ambrosia", "det_intent")["gap"] < 0


def test_reward_f1_cases():
    assert reward_f1(0, []) == 1.0
    assert reward_f1(0, [set()]) == 0.0
    assert reward_f1(2, []) == 0.0
    assert reward_f1(2, [set()]) == 0.0
    assert reward_f1(2, [{"a"}, {"a"}, {"b"}]) == pytest.approx(2 * (2 / 3) * 1.0 / (2 / 3 + 1.0))
    assert reward_sr(1) == 1.0 and reward_sr(None) == 0.0


def test_group_advantages_standardise_filter_and_keep_one():
    adv = group_advantages({"g1": [1.0, 0.0, 0.0, 1.0], "g2": [0.5, 0.5]})
    assert set(adv) == {"g1"}  # zero-variance group dropped
    sd = math.sqrt(sum((r - 0.5) ** 2 for r in [1, 0, 0, 1]) / 3)
    assert adv["g1"] == pytest.approx([0.5 / (sd + 1e-6), -0.5 / (sd + 1e-6), -0.5 / (sd + 1e-6), 0.5 / (sd + 1e-6)])
    kept = group_advantages({"a": [1.0, 1.0], "b": [0.0, 0.0]})
    assert list(kept) == ["a"] and kept["a"] == [0.0, 0.0]


def test_rollouts_carry_the_trajectory_advantage_on_every_decision():
    def ep(seed, credits):
        turns = [{"turn": i + 1, "question": f"q{i}", "credited": c, "response": "r"} for i, c in enumerate(credits)]
        return {
            "episode_id": f"e{seed}",
            "record_id": "r1",
            "asker": "llm",
            "prompt": "p",
            "oracle": "det",
            "seed": seed,
            "n_amb": 1,
            "turns_json": json.dumps(turns),
            "verdict": 1,
            "skipped_clarification": False,
        }

    rows = rollouts([ep(0, [["a"]]), ep(1, [[]])])
    assert [r["reward"] for r in rows] == [1.0, 0.0]
    assert rows[0]["advantage"] > 0 > rows[1]["advantage"]
    assert all(d["advantage"] == r["advantage"] for r in rows for d in r["decisions"])
    assert json.loads(rows[0]["decisions"][-1]["output"]) == {"type": "done", "output": None}
