"""Rewards, group advantages and which decisions carry loss (Appendix D.1), on episode rows."""

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.ambitab.training.decisions import Decision, build_batch, trajectory_reward


def row(eid, rid, n_amb, credits, fallback=False):
    turns = [{"turn": i + 1, "question": f"q{i}", "credited": c, "response": "r"} for i, c in enumerate(credits)]
    return {
        "episode_id": eid,
        "record_id": rid,
        "n_amb": n_amb,
        "fallback_stop": fallback,
        "turns_json": json.dumps(turns),
        "verdict": None,
    }


def test_rewards_follow_eq2_and_the_stop_only_decision():
    assert trajectory_reward(row("a", "r", 2, [["x"], ["y"]])) == 1.0
    assert trajectory_reward(row("a", "r", 2, [["x"], []])) == 2 * 0.5 * 0.5 / 1.0  # p = 1/2, r = 1/2
    assert trajectory_reward(row("a", "r", 2, [])) == 0.0  # stopping at once with ambiguities left
    assert trajectory_reward(row("a", "r", 0, [])) == 1.0  # abstaining on a clear request
    # a clear request's single decision is for stopping: a question there ends as a fallback stop
    # with no turn recorded, and scores 0, not 1
    assert trajectory_reward(row("a", "r", 0, [], fallback=True)) == 0.0


def _log(eid, turns):
    return [Decision(eid, t, (1, 2, t), (100 + t,)) for t in range(1, turns + 1)]


def test_every_decision_of_a_retained_trajectory_carries_its_advantage():
    rows = [row("e1", "A", 1, [["x"]]), row("e2", "A", 1, [[], []]), row("e3", "B", 1, [[]]), row("e4", "B", 1, [[]])]
    log = _log("e1", 2) + _log("e2", 3) + _log("e3", 2) + _log("e4", 2)
    b = build_batch(rows, list(reversed(log)))
    # group A rewards (1, 0): A = (±0.5)/(sd 0.7071 + 1e-6); group B constant -> dropped
    assert (b.groups, b.groups_kept, b.groups_signal) == (2, 1, 1)
    a = 0.5 / (math.sqrt(0.5) + 1e-6)
    assert [(d.episode_id, d.turn) for d in b.decisions] == [("e1", 1), ("e1", 2), ("e2", 1), ("e2", 2), ("e2", 3)]
    assert [round(d.advantage, 9) for d in b.decisions] == [round(x, 9) for x in (a, a, -a, -a, -a)]
    # the trained tokens are exactly what the asker emitted (responses live only in later prompts)
    assert all(d.completion_ids == (100 + d.turn,) for d in b.decisions)


def test_all_zero_groups_keep_one():
    rows = [row("e1", "A", 1, [[]]), row("e2", "A", 1, [[]]), row("e3", "B", 1, [["x"]]), row("e4", "B", 1, [["x"]])]
    b = build_batch(rows, _log("e1", 1) + _log("e2", 1) + _log("e3", 2) + _log("e4", 2))
    assert (b.groups_kept, b.groups_signal) == (1, 0)  # kept, but nothing in it differs
    assert {d.episode_id for d in b.decisions} == {"e1", "e2"} and all(d.advantage == 0 for d in b.decisions)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2), min_size=2, max_size=5), min_size=1, max_size=4))
def test_advantages_match_a_brute_force_standardisation(groups):
    # each trajectory: n_amb 2, credits drawn so rewards take the values 0, 2/3 and 1
    creds = {0: [], 1: [["x"], []], 2: [["x"], ["y"]]}
    rows, log = [], []
    for g, ks in enumerate(groups):
        for k, c in enumerate(ks):
            eid = f"{g}-{k}"
            rows.append(row(eid, f"R{g}", 2, creds[c]))
            log += _log(eid, 1)
    b = build_batch(rows, log)
    kept = []
    for g in range(len(groups)):
        r = [trajectory_reward(x) for x in rows if x["record_id"] == f"R{g}"]
        mean = sum(r) / len(r)
        sd = math.sqrt(sum((x - mean) ** 2 for x in r) / (len(r) - 1))
        if sd > 1e-6:
            kept += [(x - mean) / (sd + 1e-6) for x in r]
    if not kept:  # all constant: the first group, zero advantages
        kept = [0.0] * len(groups[0])
    assert [d.advantage for d in b.decisions] == kept
    signal = sum(len({trajectory_reward(x) for x in rows if x["record_id"] == f"R{g}"}) > 1 for g in range(len(groups)))
    assert b.groups_signal == signal
