"""`quandary submit` (issue 21): queues runs on the instance's run queue (Dagster's default instance
has one too: `make ui`'s daemon launches them) and nothing runs them in the calling process; the
LLM-using assets declare the endpoint's pool."""

import os

import pytest

from cli import main
from cli.runs import get_instance

pytestmark = pytest.mark.integration  # a real Dagster instance


def test_submit_queues_and_does_not_run(demo_db_path, capsys):
    assert main(["db", "register", str(demo_db_path), "--db-id", "uni"]) == 0
    assert main(["submit", "--job", "seed_databases_job", "--db", "uni"]) == 0
    assert "queued seed_databases_job for uni" in capsys.readouterr().out
    [run] = get_instance().get_runs()
    assert run.status.name == "QUEUED"  # a daemon launches it; nothing ran here
    assert run.tags["dagster/partition"] == "uni" and run.tags["quandary/llm_endpoint"].startswith("llm")


def test_submit_refuses_an_instance_without_a_queue(demo_db_path, capsys, isolated_home, tmp_path):
    (tmp_path / "dagster_home").mkdir(exist_ok=True)
    (tmp_path / "dagster_home" / "dagster.yaml").write_text(
        "telemetry: {enabled: false}\nrun_coordinator:\n  module: dagster.core.run_coordinator\n"
        "  class: DefaultRunCoordinator\n"
    )
    assert os.environ["DAGSTER_HOME"] == str(tmp_path / "dagster_home")
    assert main(["db", "register", str(demo_db_path), "--db-id", "uni"]) == 0
    assert main(["submit", "--job", "seed_databases_job", "--db", "uni"]) == 2
    err = capsys.readouterr().err
    assert "no run queue" in err and "quandary run" in err


def test_submit_checks_the_databases_first(capsys):
    assert main(["submit", "--job", "seed_databases_job", "--db", "nope"]) == 2
    assert "not registered" in capsys.readouterr().err


def test_llm_assets_declare_the_endpoint_pool(monkeypatch):
    from assets.definitions import defs  # lazy: imports dagster (~1 s); only the tests that need it pay
    from assets.shared import pools

    graph = defs.resolve_asset_graph()
    pooled = {k.to_user_string() for k in graph.get_all_asset_keys() if graph.get(k).pools}
    assert {"nlq_objects", "candidates", "interaction_conversations", "ambitab_episodes"} <= pooled
    assert "seed_databases" not in pooled and "dataset" not in pooled
    assert {p for k in graph.get_all_asset_keys() for p in (graph.get(k).pools or ())} == {pools.LLM_POOL}
    monkeypatch.setenv(pools.POOL_ENV, "gpu box/1")
    assert pools.llm_pool() == "gpu_box_1"


def test_pool_name_is_keyed_by_endpoint(tmp_path, monkeypatch):
    from assets.shared import pools  # lazy: imports dagster (~1 s); only the tests that need it pay

    cfg = tmp_path / "council.yaml"
    cfg.write_text(
        "members:\n  a: {model: openai/x, api_base: 'http://gpu1:8000/v1'}\n"
        "  b: {model: openai/y, api_base: 'http://gpu2:8001/v1'}\n"
        "councils: {default: [a, b], generators: [a], validators: [a, b], user_simulator: [a], system_agents: [b]}\n"
    )
    monkeypatch.setenv("QUANDARY_COUNCIL_CONFIG", str(cfg))
    assert pools.llm_pool() == "llm-gpu1_8000+gpu2_8001"
