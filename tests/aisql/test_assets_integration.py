"""The aisql assets on a real Dagster instance (scripted judges; label-oracle operator)."""

import json

import polars as pl
import pytest
from dagster import AssetKey, instance_for_test

from resources.llm import reset_councils
from tests.aisql.conftest import JUDGE_ACCEPT, scripted_config
from tests.llm_fakes import ScriptedLLM, install

pytestmark = pytest.mark.integration


GENERATED = {  # what the scripted generator writes for movie Q3, per dialect
    "Write BigQuery": "SELECT COUNT(*) AS positive_review_cnt FROM movie.reviews AS r WHERE r.id = 'taken_3' AND "
    "AI.IF(('Is this review positive? Review: ', r.reviewText), connection_id => 'c')",
    "Write ThalamusDB": "SELECT COUNT(*) AS positive_review_cnt FROM Reviews WHERE NLfilter(reviewText, "
    "'the review is positive')",  # forgets the movie filter
}


def _responder(req):
    system = req.messages[0]["content"]
    user = req.messages[-1]["content"]
    for marker, sql in GENERATED.items():
        if marker in system:
            return json.dumps({"sql": sql})
    if system.startswith("You are an expert judge"):
        if "criticName" in user.split("S_c (candidate structural part)")[0]:
            return "the candidate reads criticName, so... no JSON here"  # unusable -> error verdict
        return json.dumps(JUDGE_ACCEPT)
    return json.dumps({"reasoning": "compared", "answer": "NOT EQUIVALENT"})


def test_aisql_job_materializes_every_asset_with_checks(sembench_root, tmp_path, monkeypatch):
    monkeypatch.setenv("QUANDARY_COUNCIL_CONFIG", str(scripted_config(tmp_path)))
    reset_councils()
    handler = ScriptedLLM(_responder)
    install(handler)
    from assets.definitions import defs  # lazy: after the setup above it (environment, monkeypatch or sys.path)

    job = defs.resolve_job_def("aisql_job")
    cfg = {
        "data_root": str(sembench_root),
        "question_ids": ["Q3"],
        "sweep_rates": [0.0, 0.3],
        "flip_rate": 0.2,
        "variant_types": ["paraphrase", "count_key", "conjunct_order", "wrong_column", "dropped_filter"],
        "correct_share": None,
        "generator_samples": 1,
    }
    (tmp_path / "dh").mkdir()
    with instance_for_test(temp_dir=str(tmp_path / "dh")) as instance:
        result = job.execute_in_process(
            instance=instance,
            partition_key="movie",
            raise_on_error=False,
            run_config={"resources": {"aisql": {"config": cfg}}},
        )
        assert result.success
        checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
        assert checks["no_hidden_label_column"] and checks["every_pair_every_method"]
        assert all(checks.values()), checks
        assert instance.get_latest_materialization_event(AssetKey("aisql_metrics")) is not None

    from storage.artifacts import read_latest  # lazy: after the setup above it (environment, monkeypatch or sys.path)

    pairs = read_latest("aisql_pairs", "movie")
    verdicts = read_latest("aisql_verdicts", "movie")
    metrics = read_latest("aisql_metrics", "movie")
    assert set(pairs["dialect"]) == {"bigquery", "thalamusdb"}
    assert verdicts.height == pairs.height * 7
    # generator candidates, labelled independently of the judges (label oracle at p = 0 + structural rules)
    gen = {r["dialect"]: r for r in pairs.filter(pl.col("variant_type") == "generated").iter_rows(named=True)}
    assert gen["bigquery"]["label"] is True and gen["bigquery"]["label_source"] == "executed"
    assert gen["thalamusdb"]["label"] is False and gen["thalamusdb"]["label_source"] == "executed"
    assert set(metrics["set"]) == {"synthetic", "generated"}
    ex_gen = metrics.filter((pl.col("set") == "generated") & (pl.col("method") == "ex"))
    assert ex_gen["n"].sum() == 2
    # an unparseable judge answer is an error verdict, counted as a rejection
    wrong_col = pairs.filter(pl.col("variant_type") == "wrong_column")["pair_id"].to_list()
    ours = verdicts.filter((pl.col("method") == "ours") & pl.col("pair_id").is_in(wrong_col))
    assert ours.height and set(ours["status"]) == {"error"} and not ours["accepted"].any()
    assert ours["raw"].str.contains("no JSON").all()
    # the scripted judge accepts everything else; the solvers reject everything
    assert set(metrics["method"]) == {"ex", "layers", "mm", "mm_exec", "ec", "ec_exec", "ours"}
    # every stored verdict says what it claims (#39 item 1); Table 1 counts them per class
    assert verdicts["verdict_class"].null_count() == 0
    layers = metrics.filter(pl.col("method") == "layers")
    classes = [c for c in layers.columns if c.startswith("n_")]
    assert (layers.select(pl.sum_horizontal(classes)).to_series() == layers["n"]).all()
    assert (layers["wrong_proof"] == 0).all() and layers["wrong_witness"].null_count() == 0
    ex_rows = metrics.filter(pl.col("method") == "ex")
    assert (ex_rows["n_equal_on_database"] == ex_rows["tp"] + ex_rows["fp"]).all()  # EX accepts: evidence only
    mm = metrics.filter(pl.col("method") == "mm")
    assert (mm["tp"] == 0).all() and (mm["fp"] == 0).all()
    sweep = read_latest("aisql_sweep", "movie")
    assert sorted(set(sweep["flip_rate"])) == [0.0, 0.3]
    ex0 = sweep.filter((pl.col("method") == "ex") & (pl.col("flip_rate") == 0.0))
    assert (ex0["tpr"] == 1.0).all()  # no noise: every equivalent variant returns the gold rows
    from storage.paths import artifacts_dir  # lazy: after the setup above it (environment, monkeypatch or sys.path)

    assert (artifacts_dir() / "aisql_sweep" / "movie" / "sweep.png").stat().st_size > 1000
    reset_councils()
