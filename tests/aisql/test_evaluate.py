"""Issue 19 item 9 (second half): `quandary aisql evaluate PREDICTIONS.jsonl` judges a file of a
user's predictions with the engine of `aisql compare`, as a Dagster asset; bad input fails before
any run exists; a second file never drops the first's rows."""

import csv
import json
import os
from pathlib import Path

import polars as pl
import pytest

from cli import main
from pipelines.aisql.predictions import read_predictions
from storage.artifacts import read_latest
from tests.aisql.conftest import movie_query


def _write(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _row(i, gold, pred, **extra):
    return {
        "id": i,
        "scenario": "movie",
        "question": "Count of positive reviews for taken_3",
        "gold_sql": gold,
        "predicted_sql": pred,
        **extra,
    }


def _runs() -> int:
    """Dagster runs recorded so far (no instance folder yet: none)."""

    from dagster import DagsterInstance  # lazy: dagster is slow to import (~1 s); only the tests that need it pay

    if not Path(os.environ["DAGSTER_HOME"]).is_dir():
        return 0
    return len(DagsterInstance.get().get_runs())


@pytest.mark.parametrize(
    "lines, needle",
    [
        ([{"id": 1, "scenario": "movie", "question": "q", "gold_sql": "SELECT 1"}], ":1: missing key 'predicted_sql'"),
        (
            [
                '{"id": 1, "scenario": "movie", "question": "q", "gold_sql": "SELECT 1", "predicted_sql": "SELECT 1"}',
                '{"id": 2, "scenario": "movie", "question": "q", "gold_sql": "SEL',
            ],
            ":2: not valid JSON",
        ),
        (["[1, 2]"], ":1: expected a JSON object"),
        (
            [{"id": 1, "scenario": "cinema", "question": "q", "gold_sql": "SELECT 1", "predicted_sql": "SELECT 1"}],
            ":1: unknown scenario 'cinema'",
        ),
        ([_row(1, "SELECT 1", "SELECT 1"), _row(1, "SELECT 2", "SELECT 2")], ":2: duplicate id '1' (first on line 1)"),
        ([_row(1, "SELECT 1", "SELECT 1", label="maybe")], ":1: label 'maybe' is not true/false"),
        ([_row(1, "", "SELECT 1")], ":1: gold_sql is empty"),
        ([_row(1, "SELECT 1", 7)], ":1: predicted_sql must be a string"),
        ([], ": no predictions"),
    ],
)
def test_bad_input_is_one_line_naming_file_and_line_before_any_run(tmp_path, capsys, lines, needle):
    path = _write(tmp_path / "preds.jsonl", lines)
    assert main(["aisql", "evaluate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {path}") and needle in err, err
    assert "Traceback" not in err
    assert _runs() == 0


def test_missing_file_and_bad_methods(tmp_path, capsys):
    assert main(["aisql", "evaluate", str(tmp_path / "nope.jsonl")]) == 2
    assert "nope.jsonl: not found" in capsys.readouterr().err
    path = _write(tmp_path / "p.jsonl", [_row(1, "SELECT 1", "SELECT 1")])
    assert main(["aisql", "evaluate", str(path), "--methods", "ex,magic"]) == 2
    assert "magic" in capsys.readouterr().err
    assert _runs() == 0


def test_read_predictions_accepts_labels_and_dialects(tmp_path):
    path = _write(
        tmp_path / "p.jsonl",
        [
            _row(7, "SELECT AI.IF(('x', a)) FROM t", "SELECT 1", label="yes"),
            "",
            _row("b", "select NLfilter(a, 'x') from t", "SELECT 1", label=False),
        ],
    )
    preds, digest = read_predictions(path)
    assert [(p.id, p.label, p.dialect, p.line) for p in preds] == [
        ("7", True, "bigquery", 1),
        ("b", False, "thalamusdb", 3),
    ]
    assert len(digest) == 64
    same, digest2 = read_predictions(
        _write(
            tmp_path / "q.jsonl",
            [json.loads(path.read_text().splitlines()[0]), "", json.loads(path.read_text().splitlines()[2])],
        )
    )
    assert digest2 == digest  # the content, not the file name, keys stored results


@pytest.mark.integration
def test_evaluate_two_files_keeps_both_and_exports(sembench_root, tmp_path, capsys):
    gold = movie_query(sembench_root, "bigquery", "Q3")
    tgold = movie_query(sembench_root, "thalamusdb", "Q3")
    a = _write(
        tmp_path / "a.jsonl",
        [
            _row("para", gold, gold.replace("clearly positive, review: ", "positive? Review: "), label=True),
            _row("lit", gold, gold.replace("taken_3", "taken_4"), label=False),
            _row("neg", gold, gold.replace("clearly positive", "negative"), label=False),
            _row("t1", tgold, tgold, label=True),
        ],
    )
    b = _write(tmp_path / "b.jsonl", [_row("para", gold, gold)])  # same id as in a: another file, another key
    out_csv = tmp_path / "a.csv"
    assert main(["aisql", "evaluate", str(a), "--data", str(sembench_root), "--export", str(out_csv)]) == 0
    out = capsys.readouterr().out
    assert "4 predictions" in out and "| Deterministic layers (stand-in) |" in out
    verdicts = read_latest("aisql_prediction_verdicts")
    assert verdicts.height == 4
    by_id = {r["prediction_id"]: r for r in verdicts.iter_rows(named=True)}
    # flip rate 0.1 on taken_3's rare positives: the paraphrase's kappa (~0.4) decides nothing (#39)
    assert by_id["para"]["final"] == "cannot decide" and by_id["para"]["ex"] == "reject"
    assert "kappa" in by_id["para"]["ai_reason"] and by_id["para"]["verdict_class"] == "cannot decide"
    assert by_id["lit"]["verdict_class"] == "differ (witness)" and by_id["t1"]["verdict_class"] == "equivalent (proof)"
    assert by_id["lit"]["structural"] == "reject" and by_id["neg"]["ai"] == "reject"
    assert by_id["t1"]["dialect"] == "thalamusdb" and by_id["t1"]["final"] == "accept"
    rows = list(csv.DictReader(out_csv.open()))
    assert sorted(r["prediction_id"] for r in rows) == ["lit", "neg", "para", "t1"]
    metrics = read_latest("aisql_prediction_metrics")
    lay = metrics.filter((pl.col("method") == "layers") & (pl.col("dialect") == "bigquery")).row(0, named=True)
    assert (lay["tp"], lay["fn"], lay["tn"], lay["fp"]) == (0, 1, 2, 0) and lay["decided"] == 2
    assert (lay["n_witness"], lay["wrong_witness"], lay["n_open"]) == (2, 0, 1)

    out_jsonl = tmp_path / "b.jsonl.out.jsonl"
    assert main(["aisql", "evaluate", str(b), "--data", str(sembench_root), "--export", str(out_jsonl)]) == 0
    capsys.readouterr()
    verdicts = read_latest("aisql_prediction_verdicts")
    assert verdicts.height == 5 and verdicts["predictions_sha256"].n_unique() == 2
    assert [json.loads(x)["prediction_id"] for x in out_jsonl.read_text().splitlines()] == ["para"]

    # the same file again: every verdict is reused from the store, nothing is dropped
    assert main(["aisql", "evaluate", str(a), "--data", str(sembench_root)]) == 0
    assert "reused 4 stored verdicts, judged 0" in capsys.readouterr().out
    assert read_latest("aisql_prediction_verdicts").height == 5
