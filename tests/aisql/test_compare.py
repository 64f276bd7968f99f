"""Issue 19 items 8 and 9: `quandary aisql compare` judges a user's own pair layer by layer, and the
LLM splitter fallback is reachable from the resource and the settings."""

import json

import polars as pl

from cli import main
from pipelines.aisql.pipeline import make_runtime, prepare_db, run_executions
from resources.llm import get_council, reset_councils
from tests.aisql.conftest import JUDGE_ACCEPT, movie_query, scripted_config
from tests.llm_fakes import ScriptedLLM, install, quandary_home  # noqa: F401


def _compare(sembench_root, capsys, gold, cand, *extra):
    code = main(["aisql", "compare", "movie", gold, cand, "--data", str(sembench_root), "--json", *extra])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else None


def test_compare_prints_every_layer_and_exits_by_the_final_verdict(sembench_root, capsys):
    gold = movie_query(sembench_root, "bigquery", "Q3")
    para = gold.replace("clearly positive, review: ", "positive? Review: ")
    # an oracle without noise: the paraphrase selects the same reviews (kappa 1); with 10 % flips on
    # taken_3's 11 % positives two honest raters reach kappa ~0.4 and the AI layer cannot decide (#39)
    code, res = _compare(sembench_root, capsys, gold, para, "--flip-rate", "0")
    layers = {v["layer"]: v["verdict"] for v in res["layers"]}
    assert code == 0 and res["final"] == "accept" and res["final_method"] == "layers"
    assert res["verdict_class"] == "equivalent (proof)"
    assert layers["structural"] == "accept" and layers["ai"] == "accept" and layers["ex"] == "accept"
    code, res = _compare(sembench_root, capsys, gold, para)
    layers = {v["layer"]: v for v in res["layers"]}
    assert code == 3 and res["verdict_class"] == "cannot decide" and "kappa" in layers["ai"]["reason"]
    assert layers["ex"]["verdict"] == "reject"  # the noise moved the count
    code, res = _compare(sembench_root, capsys, gold, gold.replace("taken_3", "taken_4"))
    layers = {v["layer"]: v["verdict"] for v in res["layers"]}
    assert code == 1 and layers["structural"] == "reject" and res["final"] == "reject"
    assert res["verdict_class"] == "differ (witness)"
    code, res = _compare(sembench_root, capsys, gold, gold.replace("clearly positive", "negative"))
    layers = {v["layer"]: v["verdict"] for v in res["layers"]}
    assert code == 1 and layers["structural"] == "accept" and layers["ai"] == "reject"


def test_compare_with_the_autorater_and_bad_methods(sembench_root, capsys, tmp_path, monkeypatch, quandary_home):  # noqa: F811
    """The relational gate (#33 item 4): an autorater answering 5 to everything decides only what
    the deterministic layers leave open; a proven difference stays a rejection (exit 1)."""
    gold = movie_query(sembench_root, "thalamusdb", "Q3")
    assert main(["aisql", "compare", "movie", gold, gold, "--methods", "ex,magic", "--data", str(sembench_root)]) == 2
    assert "magic" in capsys.readouterr().err
    monkeypatch.setenv("QUANDARY_COUNCIL_CONFIG", str(scripted_config(tmp_path)))
    reset_councils()
    asked = []
    install(ScriptedLLM(lambda req: asked.append(req) or json.dumps(JUDGE_ACCEPT)))
    code, res = _compare(sembench_root, capsys, gold, gold.replace("taken_3", "taken_4"), "--methods", "ex,ours")
    layers = {v["layer"]: v for v in res["layers"]}
    assert code == 1 and res["final"] == "reject" and res["final_method"] == "structural"
    assert layers["ours"]["verdict"] == "reject" and "not asked" in layers["ours"]["reason"] and not asked
    code, res = _compare(sembench_root, capsys, gold, gold, "--methods", "ex,ours")
    assert code == 0 and res["final_method"] == "layers" and not asked
    # the oracle cannot read this concept: the AI layer cannot decide, so the autorater is asked
    open_pair = gold.replace("the review sentiment is positive", "the review praises the stunts")
    code, res = _compare(sembench_root, capsys, gold, open_pair, "--methods", "ex,ours")
    assert code == 0 and res["final_method"] == "ours" and res["final"] == "accept" and len(asked) == 1
    assert res["verdict_class"] == "judged by the autorater"  # an LLM's judgement: neither proof nor witness
    assert [v["layer"] for v in res["layers"]] == ["structural", "ai", "ex", "ours"]
    reset_councils()


def test_llm_split_fallback_is_wired(sembench_root, tmp_path, monkeypatch, quandary_home):  # noqa: F811
    from assets.aisql.assets import AisqlResource  # lazy: imports dagster (~1 s); only the tests that need it pay

    assert AisqlResource(llm_split_fallback=True).settings().llm_split_fallback is True
    monkeypatch.setenv("QUANDARY_COUNCIL_CONFIG", str(scripted_config(tmp_path)))
    reset_councils()
    asked = []

    def responder(req):
        asked.append(req)
        return json.dumps({"structural_sql": "SELECT 1", "ai_parts": ["SELECT 1"]})

    install(ScriptedLLM(responder))
    settings = AisqlResource(data_root=str(sembench_root), llm_split_fallback=True).settings()
    db = prepare_db("movie", sembench_root, quandary_home)
    pairs = pl.DataFrame(
        [
            {
                "pair_id": "p",
                "dialect": "thalamusdb",
                "question": "q",
                "gold_sql": movie_query(sembench_root, "thalamusdb", "Q3"),
                "candidate_sql": "SELECT FROM WHERE NLfilter(reviewText, 'positive')",
            }
        ]
    )
    rt = make_runtime(settings, db)
    try:
        _, evidence = run_executions(pairs, db, rt, settings, getter=get_council)
    finally:
        rt.close()
    assert asked and evidence["p"]["cand_split"]["method"] == "llm"
    assert evidence["p"]["gold_split"]["method"] == "ast"
    reset_councils()
