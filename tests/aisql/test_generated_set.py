"""Issue 19 item 10: labelled pairs whose candidates come from a text-to-SQL generator (the council's
``generators`` role, scripted here) and whose labels come from a procedure independent of every judge
measured: execution under the label oracle at p = 0 plus the structural rules. The synthetic and
generated sets are reported separately, beside the paper's balance figures."""

import json

import polars as pl

from pipelines.aisql.evalset import balance_table, execution_labels, generator_pairs, with_set
from pipelines.aisql.metrics import metric_table
from pipelines.aisql.pipeline import council_for, prepare_db
from pipelines.aisql.scenarios import MOVIE, load_queries
from resources.llm import reset_councils
from tests.aisql.conftest import movie_query, scripted_config
from tests.llm_fakes import ScriptedLLM, install, quandary_home  # noqa: F401


def _generated(sembench_root, tmp_path, monkeypatch, answers):
    monkeypatch.setenv("QUANDARY_COUNCIL_CONFIG", str(scripted_config(tmp_path)))
    reset_councils()
    asked = []

    def responder(req):
        asked.append(req)
        return json.dumps({"sql": answers[req.model_index % len(answers)]})

    install(ScriptedLLM(responder))
    golds = [g for g in load_queries("movie", sembench_root, dialects=("bigquery",)) if g.question_id == "Q3"]
    rows = generator_pairs(
        council_for("generators"), sembench_root, MOVIE, golds, lambda d: "TABLE ...", samples=len(answers)
    )
    assert len(asked) == len(answers)
    return rows


def test_generator_candidates_are_labelled_by_execution_at_p0(sembench_root, tmp_path, monkeypatch, quandary_home):  # noqa: F811
    gold = movie_query(sembench_root, "bigquery", "Q3")
    answers = [
        gold.replace("clearly positive, review: ", "positive? Review: "),  # same rows at p = 0
        gold.replace("taken_3", "taken_4"),  # another movie
        "SELECT FROM (",  # does not run
        gold.replace("clearly positive", "clearly negative"),  # the opposite concept
        gold.replace("clearly positive", "about a heist"),
    ]  # a concept the labels cannot answer
    rows = _generated(sembench_root, tmp_path, monkeypatch, answers)
    db = prepare_db("movie", sembench_root, quandary_home)
    labelled = execution_labels(rows, db)
    got = [(r["label"], r["label_source"]) for r in labelled]
    assert got == [(True, "executed"), (False, "executed"), (False, "executed"), (False, "executed"), (None, "none")], (
        got
    )
    assert "oracle cannot decide" in labelled[-1]["notes"]
    assert all(r["variant_type"] == "generated" for r in labelled)


def test_sets_are_reported_separately_with_the_papers_balance(sembench_root):
    pairs = pl.DataFrame(
        {
            "pair_id": ["a", "b", "c", "d"],
            "dialect": ["bigquery"] * 4,
            "variant_type": ["paraphrase", "wrong_literal", "generated", "generated"],
            "label": [True, False, True, None],
        }
    )
    verdicts = pl.DataFrame(
        {
            "pair_id": ["a", "b", "c", "d"],
            "method": ["ex"] * 4,
            "accepted": [False, False, True, True],
            "status": ["ok"] * 4,
        }
    )
    m = metric_table(with_set(pairs), verdicts, by=("set", "dialect"))
    rows = {r["set"]: r for r in m.iter_rows(named=True)}
    assert (rows["synthetic"]["n"], rows["synthetic"]["tp"], rows["synthetic"]["tn"]) == (2, 0, 1)
    assert (rows["generated"]["n"], rows["generated"]["tp"]) == (1, 1)
    bal = balance_table(pairs)
    paper = bal.filter(pl.col("set") == "paper").sort("dialect")
    assert paper.select("dialect", "n", "correct", "incorrect").rows() == [
        ("bigquery", 36, 25, 11),
        ("thalamusdb", 15, 12, 3),
    ]
    gen = bal.filter((pl.col("set") == "generated") & (pl.col("dialect") == "bigquery")).row(0, named=True)
    assert (gen["n"], gen["correct"], gen["unlabelled"]) == (1, 1, 1)
