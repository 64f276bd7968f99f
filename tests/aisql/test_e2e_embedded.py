"""The aisql job with the real embedded SmolLM2 as AI operator and judge, on two movie queries,
through a real Dagster instance. Tiny on purpose: 2 reviews of one movie, 2 pairs (a paraphrase of
each gold), EX + the autorater with its compact prompt (a full prompt is minutes per call on a
loaded 2-core machine).

The model's answers are often wrong; this asserts the plumbing (UDF → council → embedded server →
structured output → cache), that every pair gets a verdict from every method, and that a rerun is
served from the call cache.
"""

import pytest
from dagster import instance_for_test

from resources.llm import reset_councils

pytestmark = pytest.mark.e2e  # its time limit: tests/conftest.py, EMBEDDED_TIMEOUT_S

EMBEDDED_COUNCIL = """
members:
  smollm2: {model: openai/smollm2, api_base: embedded, temperature: 0.0, max_tokens: 24, seed: 0, max_in_flight: 2,
            repair: false, timeout_s: 600, max_retries: 1}
  smollm2-judge: {model: openai/smollm2, api_base: embedded, temperature: 0.0, max_tokens: 256, seed: 0,
                  max_in_flight: 2, repair: false, timeout_s: 900, max_retries: 0}
councils:
  default: [smollm2]
  ai_operator: [smollm2]
  judges: [smollm2-judge]
"""


def test_aisql_job_with_embedded_operator_and_judge(sembench_root, tmp_path, monkeypatch):
    cfg_path = tmp_path / "council.yaml"
    cfg_path.write_text(EMBEDDED_COUNCIL)  # embedded SmolLM2: short operator answers, a judge that can finish its JSON
    monkeypatch.setenv("QUANDARY_COUNCIL_CONFIG", str(cfg_path))
    reset_councils()
    from dagster import AssetKey  # lazy: after the setup above it (environment, monkeypatch or sys.path)

    from assets.aisql.assets import AISQL_ASSETS
    from assets.definitions import defs
    from storage.artifacts import read_latest
    from storage.audit import open_audit

    cfg = {
        "data_root": str(sembench_root),
        "backend": "council",
        "sample": 2,
        "sample_groups": ["taken_3"],
        "question_ids": ["Q2", "Q3"],
        "dialects": ["bigquery"],
        "methods": ["ex", "ours"],
        "variant_types": ["paraphrase"],
        "correct_share": None,
        "probe_n": 10,
        "compact_judge": True,
    }
    keys = [a.key for a in AISQL_ASSETS if a.key != AssetKey("aisql_sweep")]
    job = defs.resolve_job_def("aisql_job")
    (tmp_path / "dh").mkdir()
    with instance_for_test(temp_dir=str(tmp_path / "dh")) as instance:

        def run():
            return job.execute_in_process(
                instance=instance,
                partition_key="movie",
                asset_selection=keys,
                run_config={"resources": {"aisql": {"config": cfg}}},
            )

        assert run().success
        pairs = read_latest("aisql_pairs", "movie")
        verdicts = read_latest("aisql_verdicts", "movie")
        execs = read_latest("aisql_executions", "movie")
        assert pairs.height == 2
        assert sorted(verdicts["method"].to_list()) == ["ex"] * 2 + ["ours"] * 2
        assert set(execs["operator_backend"]) == {"council(ai_operator:smollm2)"}
        assert (execs["gold_status"] == "ok").all() and execs["calls_made"].sum() > 0
        # a judge that timed out or answered garbage is an error verdict (a rejection), never a gap
        ours = verdicts.filter(verdicts["method"] == "ours")
        assert (ours.filter(ours["status"] == "error")["accepted"] == False).all()  # noqa: E712
        con = open_audit()
        stages = dict(con.execute("SELECT tag_stage, count(*) FROM llm_calls GROUP BY 1").fetchall())
        assert stages.get("aisql_operator", 0) >= 4 and stages.get("aisql_judge", 0) >= 2
        n_calls = con.execute("SELECT count(*) FROM llm_calls").fetchall()[0][0]
        # a rerun shares every operator and judge call through the cache
        assert run().success
        assert open_audit().execute("SELECT count(*) FROM llm_calls").fetchall()[0][0] == n_calls
        assert read_latest("aisql_executions", "movie")["calls_made"].sum() == 0
    reset_councils()
