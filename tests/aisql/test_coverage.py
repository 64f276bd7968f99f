"""#33 item 6: coverage, accuracy on decided pairs and the score under each policy for undecided
pairs, in Table 1 (judge asset) and in `aisql evaluate`'s summary."""

import polars as pl

from pipelines.aisql.metrics import coverage, metric_table
from pipelines.aisql.predictions import summary_markdown, summary_table, verdicts_frame


def test_coverage_counts_each_policy():
    labels = [True, True, False, False]
    layers = [True, None, False, None]  # two undecided
    ex = [False, True, True, False]
    c = coverage(labels, layers, ex, None)
    assert c["decided"] == 2 and c["coverage"] == 0.5 and c["acc_decided"] == 1.0
    assert c["acc_undecided_reject"] == 0.75  # pair 2 (label True) wrong, pair 4 right
    assert c["acc_undecided_ex"] == 1.0  # EX says accept for 2, reject for 4
    assert c["acc_undecided_ours"] is None  # the autorater did not run: no score is invented


def test_judge_table1_has_coverage_with_errors_undecided():
    pairs = pl.DataFrame({"pair_id": ["a", "b", "c"], "dialect": ["bigquery"] * 3, "label": [True, False, True]})
    verdicts = pl.DataFrame(
        {
            "pair_id": ["a", "b", "c", "a", "b", "c"],
            "method": ["ex"] * 3 + ["ours"] * 3,
            "accepted": [False, False, True, True, False, False],
            "status": ["ok", "ok", "ok", "ok", "ok", "error"],
        }
    )
    m = metric_table(pairs, verdicts).filter(pl.col("method") == "ours").row(0, named=True)
    assert m["decided"] == 2 and m["acc_decided"] == 1.0
    assert abs(m["acc_undecided_reject"] - 2 / 3) < 1e-9 and m["acc_undecided_ex"] == 1.0


def test_evaluate_summary_shows_coverage_and_test_suite_count():
    rows = []
    for i, (label, layers, ex, reason, cls) in enumerate(
        [
            (True, "accept", "reject", "x", "equivalent (proof)"),
            (True, "cannot decide", "accept", "…; equal on the test suite (12 …)", "equal on the test suite"),
            (False, "cannot decide", "accept", "equal on this database", "equal on this database"),
        ]
    ):
        rows.append(
            {
                "predictions_sha256": "h",
                "settings_key": "s",
                "prediction_id": str(i),
                "dialect": "bigquery",
                "label": label,
                "layers": layers,
                "ex": ex,
                "structural_reason": reason,
                "verdict_class": cls,
                "accepted": layers == "accept",
            }
        )
    m = summary_table(verdicts_frame(rows))
    layers = m.filter(pl.col("method") == "layers").row(0, named=True)
    assert layers["decided"] == 1 and layers["test_suite_equal"] == 1
    assert abs(layers["acc_undecided_ex"] - 2 / 3) < 1e-9
    # per verdict class (#39): the evidence on this database was wrong once (the pair is not equivalent)
    assert (layers["n_proof"], layers["wrong_proof"]) == (1, 0)
    assert (layers["n_equal_on_database"], layers["wrong_equal_on_database"]) == (1, 1)
    assert (layers["n_equal_on_test_suite"], layers["wrong_equal_on_test_suite"]) == (1, 0)
    assert m.filter(pl.col("method") == "ex").row(0, named=True)["n_proof"] is None  # classes: the final method
    text = summary_markdown(m)
    assert "undecided = reject" in text
    assert "| Deterministic layers (stand-in) | bigquery | equal on the test suite | 1 | 33.3 | 0 |" in text
    assert "| Deterministic layers (stand-in) | bigquery | equal on this database | 1 | 33.3 | 1 |" in text
