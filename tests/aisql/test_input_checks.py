"""#33 item 5 and #34 items 4, 7: distinct exit codes, bad input in one line before anything runs,
no internal names in messages, a per-query timeout with a stated maximum, capped prediction lines."""

import json

import pytest

from cli import main
from pipelines.aisql.checks import BadPairInput, check_pair, public_names
from pipelines.aisql.predictions import MAX_NESTING, PredictionsError, read_predictions
from tests.aisql.conftest import movie_query

BQ = "SELECT COUNT(*) FROM movie.reviews AS r WHERE AI.IF(('positive review: ', r.reviewText))"
TDB = "select count(*) from Reviews where NLfilter(reviewText, 'the review sentiment is positive')"


@pytest.mark.parametrize(
    "gold, cand, dialect, says",
    [
        ("SELEC broken FRM nowhere", BQ, "bigquery", "gold: "),
        ("SELECT 1 FROM reviews WHERE llm_filter({'m': 1}, {'prompt': 'p'})", TDB, "thalamusdb", "FlockMTL"),
        ("SELECT 1 FROM reviews WHERE AI_FILTER(PROMPT('p {0}', t))", TDB, "thalamusdb", "Snowflake"),
        (TDB, TDB.replace("positive')", "positive', 'x')"), "thalamusdb", "NLfilter takes 2 arguments"),
        (TDB, BQ, "thalamusdb", "AI.IF is BigQuery"),
        (BQ, BQ.replace("r.reviewText))", "r.reviewText), 3)"), "bigquery", "AI.IF takes 1 argument"),
        (BQ, BQ, "spark", "not supported"),
    ],
)
def test_bad_pairs_are_refused_in_one_line_naming_what_is_supported(gold, cand, dialect, says):
    with pytest.raises(BadPairInput) as info:
        check_pair(gold, cand, dialect)
    msg = str(info.value)
    assert says in msg and "\n" not in msg and "AIOP" not in msg and "ai_if" not in msg


def test_a_candidate_with_a_syntax_error_is_judged_not_refused():
    check_pair(BQ, "SELEC broken", "bigquery")  # the candidate is what is judged: a rejection, not bad input


def test_internal_names_are_mapped_back():
    assert public_names("Expecting ) near AIOP_IF(") == "Expecting ) near AI.IF("


def _compare(sembench_root, capsys, gold, cand, *extra):
    code = main(["aisql", "compare", "movie", gold, cand, "--data", str(sembench_root), "--json", *extra])
    captured = capsys.readouterr()
    return code, captured


def test_compare_exit_codes_accept_reject_bad_input_cannot_decide(sembench_root, capsys):
    gold = movie_query(sembench_root, "thalamusdb", "Q3")
    assert _compare(sembench_root, capsys, gold, gold)[0] == 0
    code, out = _compare(sembench_root, capsys, gold, "SELEC broken")
    res = json.loads(out.out)
    assert code == 1 and res["final_method"] == "execution"
    assert {v["layer"]: v["verdict"] for v in res["layers"]}["structural"] == "reject"  # never accepts what fails
    code, out = _compare(sembench_root, capsys, "SELEC broken FRM nowhere", gold)
    assert code == 2 and out.out == "" and len(out.err.strip().splitlines()) == 1 and "gold" in out.err
    undecided = gold.replace("the review sentiment is positive", "the review praises the stunts")
    code, out = _compare(sembench_root, capsys, gold, undecided)
    res = json.loads(out.out)
    assert code == 3 and res["final"] == "cannot decide" and res["final_method"] == "none"
    code, out = _compare(sembench_root, capsys, gold, gold.replace("positive')", "positive', 'x')"))
    assert code == 2 and "NLfilter takes 2 arguments" in out.err and len(out.err.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["compare", "evaluate", "run"])
@pytest.mark.parametrize("value", ["1e308", "4e9", "nan", "0"])
def test_absurd_timeouts_are_refused_in_one_line(command, value, capsys, tmp_path):
    args = {
        "compare": ["movie", "SELECT 1", "SELECT 1"],
        "evaluate": [str(tmp_path / "p.jsonl")],
        "run": ["movie", "SELECT 1"],
    }
    with pytest.raises(SystemExit) as info:
        main(["aisql", command, *args[command], "--timeout", value])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "--timeout" in err and "Traceback" not in err


def _row(**over):
    return {"id": "a", "scenario": "movie", "question": "q", "gold_sql": TDB, "predicted_sql": TDB, **over}


def test_prediction_lines_are_capped_in_size_and_nesting(tmp_path):
    big = tmp_path / "big.jsonl"
    big.write_text(json.dumps(_row(question="x" * 2_000_000)) + "\n")
    with pytest.raises(PredictionsError, match=r"big.jsonl:1: line longer than"):
        read_predictions(big)
    deep = tmp_path / "deep.jsonl"
    deep.write_text(json.dumps(_row()) + "\n" + '{"id": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    with pytest.raises(PredictionsError, match=rf"deep.jsonl:2: JSON nested \d+ deep \(at most {MAX_NESTING}\)"):
        read_predictions(deep)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(_row(gold_sql="SELECT 1 FROM reviews WHERE llm_filter({'m': 1})")) + "\n")
    with pytest.raises(PredictionsError, match=r"bad.jsonl:1: gold: llm_filter"):
        read_predictions(bad)
