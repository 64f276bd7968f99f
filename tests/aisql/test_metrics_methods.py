"""Metric formulas (Table 1 from its implied counts) and the verdict rules of every method."""

import polars as pl
import pytest

from pipelines.aisql.methods import (
    Analysis,
    JudgeSettings,
    JudgeVerdict,
    Scores,
    ex_verdict,
    judge_verdict_from,
    parse_equivalence,
)
from pipelines.aisql.metrics import confusion, metric_table, table1_markdown

# (TP, TN) per method and dialect implied by Table 1; BigQuery 25 correct / 11 incorrect, ThalamusDB 12 / 3
TABLE1_COUNTS = {
    "ex": ((9, 10), (3, 1)),
    "mm": ((17, 11), (8, 3)),
    "mm_exec": ((14, 10), (7, 3)),
    "ec": ((19, 10), (11, 2)),
    "ec_exec": ((21, 9), (11, 2)),
    "ours": ((25, 10), (11, 3)),
}
TABLE1_PCT = {  # the paper's numbers, with M&M w/ Exec TNR corrected from the typo 90.0 to 90.9
    "ex": (36.0, 90.9, 52.8, 25.0, 33.3, 26.7),
    "mm": (68.0, 100.0, 77.8, 66.7, 100.0, 73.3),
    "mm_exec": (56.0, 90.9, 66.7, 58.3, 100.0, 66.7),
    "ec": (76.0, 90.9, 80.6, 91.7, 66.7, 86.7),
    "ec_exec": (84.0, 81.8, 83.3, 91.7, 66.7, 86.7),
    "ours": (100.0, 90.9, 97.2, 91.7, 100.0, 93.3),
}


def _synthetic(counts):
    pairs, verdicts = [], []
    for dialect, (n_pos, n_neg), idx in (("bigquery", (25, 11), 0), ("thalamusdb", (12, 3), 1)):
        ids = [f"{dialect}-{i}" for i in range(n_pos + n_neg)]
        pairs += [{"pair_id": p, "dialect": dialect, "label": i < n_pos} for i, p in enumerate(ids)]
        for method, c in counts.items():
            tp, tn = c[idx]
            for i, p in enumerate(ids):
                accepted = i < tp if i < n_pos else not (i - n_pos < tn)
                verdicts.append({"pair_id": p, "method": method, "accepted": accepted, "status": "ok"})
    return pl.DataFrame(pairs), pl.DataFrame(verdicts)


def test_metric_table_reproduces_table1():
    pairs, verdicts = _synthetic(TABLE1_COUNTS)
    m = metric_table(pairs, verdicts)
    for method, pct in TABLE1_PCT.items():
        got = []
        for d in ("bigquery", "thalamusdb"):
            r = m.filter((pl.col("method") == method) & (pl.col("dialect") == d)).row(0, named=True)
            got += [round(100 * r["tpr"], 1), round(100 * r["tnr"], 1), round(100 * r["accuracy"], 1)]
        assert tuple(got) == pct, method
    md = table1_markdown(m)
    assert "| Multilayered Eval Framework (Ours) | 100.0 (25/25) | 90.9 (10/11) | 97.2 (35/36)" in md


def test_confusion_and_unlabelled_pairs_are_not_counted():
    c = confusion([True, True, False, False], [True, False, False, True])
    assert (c.tp, c.fn, c.tn, c.fp, c.tpr, c.tnr, c.accuracy) == (1, 1, 1, 1, 0.5, 0.5, 0.5)
    pairs = pl.DataFrame({"pair_id": ["a", "b"], "dialect": ["bigquery"] * 2, "label": [True, None]})
    verdicts = pl.DataFrame(
        {"pair_id": ["a", "b"], "method": ["ex"] * 2, "accepted": [True, False], "status": ["ok", "error"]}
    )
    r = metric_table(pairs, verdicts).row(0, named=True)
    assert (r["n"], r["tp"], r["errors"]) == (1, 1, 0)


def test_solver_answer_parsing_checks_not_equivalent_first():
    assert parse_equivalence("They are NOT EQUIVALENT.") is False
    assert parse_equivalence("not_equivalent") is False
    assert parse_equivalence("EQUIVALENT") is True
    assert parse_equivalence("I cannot tell") is None


def _verdict(o, r, a):
    return JudgeVerdict(
        scores=Scores(overall_similarity=o, relational_similarity=r, ai_similarity=a),
        analysis=Analysis(primary_error_source="relational", justification="x"),
    )


def test_judge_decision_rules():
    v = judge_verdict_from("p", _verdict(4, 3, 5), JudgeSettings())
    assert v.accepted and v.accepted_all is False and v.inconsistent
    assert not judge_verdict_from("p", _verdict(4, 3, 5), JudgeSettings(decision="all")).accepted
    assert not judge_verdict_from("p", _verdict(3, 5, 5), JudgeSettings()).accepted
    assert judge_verdict_from("p", _verdict(3, 5, 5), JudgeSettings(threshold=2)).accepted
    gated = judge_verdict_from(
        "p", _verdict(5, 5, 5), JudgeSettings(relational_gate=True), {"structural": {"verdict": "differ"}}
    )
    assert not gated.accepted and "relational gate" in gated.reason
    undecided = judge_verdict_from(
        "p", _verdict(5, 5, 5), JudgeSettings(relational_gate=True), {"structural": {"verdict": "cannot_decide"}}
    )
    assert undecided.accepted  # the gate only rejects what the structural layer proved different
    with pytest.raises(ValueError):
        Scores(overall_similarity=6, relational_similarity=1, ai_similarity=1)


def test_ex_verdicts():
    assert ex_verdict("p", "ok", "ok", True).accepted
    assert not ex_verdict("p", "ok", "budget_exceeded", False).accepted
    v = ex_verdict("p", "error", "ok", True)
    assert not v.accepted and v.status == "error"
