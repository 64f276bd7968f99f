"""Issue 22, item 7: leakage diagnostics on dialogues — the share of simulated-user answers that
contain a gold-only SQL value or the hidden knowledge verbatim, per member and per label, with
cluster-bootstrap intervals from the shared core AmbiTab uses (pipelines.core.stats), not a copy."""

from hypothesis import given, settings
from hypothesis import strategies as st

import pipelines.core.stats as stats
from pipelines.ambitab.protocol import diagnostics
from pipelines.interaction import leakage as L
from pipelines.interaction import metrics as M

SQL = "SELECT s.name FROM students s WHERE s.city = 'Alameda' AND s.age > 20 AND s.year = 2024 LIMIT 1"
Q = {
    "question_id": "q1",
    "db_id": "u",
    "question": "List the students of my city older than 20.",
    "evidence": None,
    "sql": SQL,
    "hidden_knowledge": "The user lives in Alameda.",
    "subcategory": "missing_user_knowledge",
}


def test_gold_only_values_are_the_literals_the_question_does_not_say():
    assert L.gold_only_values(SQL, Q["question"], None) == ["2024", "alameda"]  # 20 is in the question; 1 too short
    assert L.gold_only_values(None, "q", None) == [] and L.gold_only_values("SELEC ((", "q", None) == []


def test_answer_flags():
    values = L.gold_only_values(SQL, Q["question"], None)
    assert L.answer_leaks("I live in Alameda.", values, Q["hidden_knowledge"]) == (True, False)
    assert L.answer_leaks("Sure — the user lives in  Alameda", values, Q["hidden_knowledge"]) == (True, True)
    assert L.answer_leaks("The ones in my town, please.", values, Q["hidden_knowledge"]) == (False, False)
    assert L.answer_leaks("In 20245 maybe", ["2024"], None) == (False, False)  # whole values only


def turn(member_answers, label, winner, qid="q1", status="ok"):
    return {
        "question_id": qid,
        "relevance": label,
        "user_status": status,
        "winner_member": winner,
        "user_response": dict(member_answers).get(winner),
        "candidates": [{"member": m, "answer": a} for m, a in member_answers],
    }


def test_observations_per_member_and_per_label():
    turns = [
        turn([("u1", "I live in Alameda."), ("u2", "In my town.")], "Relevant", "u1"),
        turn([("u1", "No preference.")], "Technical", "u1"),
        turn([("u1", "That's not relevant.")], "Irrelevant", "u1", status="failed"),  # not produced: skipped
        {**turn([], "Irrelevant", None), "user_status": "short_circuit"},
    ]
    obs = L.observations(turns, {"q1": Q})
    assert [(o["member"], o["label"], o["selected"], o["leak"]) for o in obs] == [
        ("u1", "Relevant", True, True),
        ("u2", "Relevant", False, False),
        ("u1", "Technical", True, False),
    ]
    rows = L.leakage_rows(obs, n_resamples=200)
    get = {(r["slice"], r["metric"]): r for r in rows}
    assert get[("member=u1", "leak_pct")]["numerator"] == 1 and get[("member=u1", "leak_pct")]["denominator"] == 2
    assert get[("label=Relevant", "leak_pct")]["denominator"] == 1  # selected answers only
    assert get[("all", "leak_hidden_pct")]["value"] == 0.0
    text = "\n".join(L.leakage_lines(rows))
    assert "member=u1" in text and "label=Relevant" in text


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["u1", "u2"]), st.booleans()), min_size=1, max_size=30))
def test_rates_are_the_counts_and_the_interval_brackets_them(items):
    obs = [
        {
            "cluster": f"q{c}",
            "member": m,
            "label": "Relevant",
            "selected": True,
            "leak": x,
            "leak_value": x,
            "leak_hidden": False,
        }
        for c, m, x in items
    ]
    for r in L.leakage_rows(obs, n_resamples=200):
        if r["metric"] != "leak_pct":
            continue
        sel = [
            o
            for o in obs
            if r["slice"] == "all" or r["slice"] == f"member={o['member']}" or r["slice"] == "label=Relevant"
        ]
        assert r["denominator"] == len(sel) and r["numerator"] == sum(o["leak"] for o in sel)
        assert r["value"] == r["numerator"] / r["denominator"]
        assert r["low"] - 1e-9 <= r["value"] <= r["high"] + 1e-9


def test_bootstrap_is_the_shared_core_ambitab_uses():
    assert L.cluster_bootstrap is stats.cluster_bootstrap is diagnostics.cluster_bootstrap


def test_report_has_a_leakage_section():
    obs = L.observations([turn([("u1", "I live in Alameda.")], "Relevant", "u1")], {"q1": Q})
    assert "Leakage" in M.report_text(L.leakage_rows(obs, n_resamples=50))
