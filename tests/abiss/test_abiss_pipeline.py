"""The ABISS job end to end on a real Dagster instance with a scripted (deterministic) council.

Covers: generation (programmatic + an LLM generator) → grounding → ten stages → dataset,
council_votes, rejection_report; an injected provider outage at stage 6 for one partition,
re-executed from failure with zero repeated LLM calls; ABISS JSON export → import round trip.
"""

import json
import sqlite3

import pytest
from dagster import instance_for_test

from assets.abiss.card import config as abiss_config
from assets.definitions import MAIN_JOB
from cli import main
from cli.runs import run_job_for_partition
from pipelines.abiss import prompts
from pipelines.abiss.prompts import PROMPT_OPENINGS as OPEN
from resources.catalog import Catalog
from storage.audit import list_views, open_audit
from tests.abiss.pipeline_helpers import GRID, _last_user, healthy
from tests.llm_fakes import http_error

pytestmark = pytest.mark.integration


@pytest.fixture
def instance(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    with instance_for_test(temp_dir=str(home)) as inst:
        yield inst


def _register(demo_db_path):
    Catalog().register(demo_db_path, "university")


def _run_with_outage(handler, instance, prompt_prefix: str):
    """Run the job while every prompt starting with ``prompt_prefix`` gets HTTP 503."""

    def outage(req):
        if _last_user(req.messages).startswith(prompt_prefix):
            raise http_error(503, "endpoint down")
        return healthy(req)

    handler.responder = outage
    failed = run_job_for_partition(MAIN_JOB, "university", instance=instance, run_config=abiss_config(grid=GRID))
    assert not failed.success
    handler.responder = healthy
    return failed


def test_full_cascade_builds_dataset_votes_and_report(scripted_council, instance, demo_db_path, tmp_path, capsys):
    """The whole cascade, then its dataset's export / import round trip (one run of the job for both:
    a second identical run cost ~9 s of CPU, #44)."""
    _register(demo_db_path)
    result = run_job_for_partition(MAIN_JOB, "university", instance=instance, run_config=abiss_config(grid=GRID))
    assert result.success
    con = open_audit()
    assert {"dataset", "council_votes", "rejection_report", "llm_calls", "candidates"} <= set(list_views(con))
    gens = dict(con.execute("SELECT generator, count(*) FROM candidates GROUP BY 1").fetchall())
    assert gens.get("gen") == 4 and gens.get("programmatic", 0) >= 3  # 1 + 2 readings + 1 LLM objects
    # the LLM ambiguous pair survives every stage with both readings (stage 6 council never matches)
    pair = con.execute(
        "SELECT interpretation_index FROM dataset WHERE generator = 'gen' AND subcategory = "
        "'lexical_overlap' ORDER BY 1"
    ).fetchall()
    assert pair == [(0,), (1,)]
    # every vote points at a logged call
    orphans = con.execute(
        "SELECT count(*) FROM council_votes v LEFT JOIN llm_calls c ON c.call_id = v.llm_call_id "
        "WHERE c.call_id IS NULL"
    ).fetchall()[0][0]
    assert orphans == 0
    stages = [r[0] for r in con.execute("SELECT DISTINCT stage FROM rejection_report ORDER BY stage_no").fetchall()]
    assert (
        stages[0] == "s00_wellformedness"
        and stages[1] == "s01_duplicate_removal"
        and stages[-1] == "s10_style_conformance"
    )
    # the answerable LLM question is not ambiguous, so stage 6 never applies to it
    applies = con.execute(
        "SELECT d.applies FROM s06_ambiguity_verification d JOIN candidates c USING (candidate_id) "
        "WHERE c.generator = 'gen' AND c.subcategory = 'answerable'"
    ).fetchall()
    assert applies == [(False,)]
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert "rejection_rates_within_bounds" in checks
    _export_import_round_trip(instance, tmp_path, capsys)


def test_stage6_outage_reexecuted_from_failure_repeats_no_call(scripted_council, instance, demo_db_path):
    _register(demo_db_path)
    failed = _run_with_outage(scripted_council, instance, OPEN["write_sql"])
    failed_steps = {e.step_key for e in failed.get_step_failure_events()}
    assert failed_steps == {"s06_ambiguity_verification"}
    first_run = [(r.model, json.dumps(r.messages)) for r in scripted_council.requests]
    ok_first = {
        k
        for k, r in zip(first_run, scripted_council.requests)
        if not _last_user(r.messages).startswith(OPEN["write_sql"])
    }

    before = len(scripted_council.requests)
    # the CLI equivalent of the UI's "re-execute from failure": finds the latest failed run
    assert main(["rerun", "--db", "university"]) == 0
    reexecutions = [r for r in instance.get_runs() if r.parent_run_id == failed.run_id]
    assert len(reexecutions) == 1
    result = instance.get_run_by_id(reexecutions[0].run_id)
    assert result.is_success
    rerun = [(r.model, json.dumps(r.messages)) for r in scripted_council.requests[before:]]
    assert rerun, "stage 6 and its downstream must ask the council again"
    assert not (set(rerun) & ok_first), "a call that succeeded in the failed run was repeated"
    ran = {
        e.step_key for e in instance.all_logs(result.run_id) if e.is_dagster_event and e.dagster_event.is_step_success
    }
    assert "s06_ambiguity_verification" in ran and "dataset" in ran
    assert "nlq_objects" not in ran and "s03_category_conformance" not in ran
    con = open_audit()
    assert con.execute("SELECT count(*) FROM dataset").fetchall()[0][0] > 0
    # the failure is fixed: a second rerun finds nothing to re-execute
    assert main(["rerun", "--db", "university"]) == 1
    assert main(["rerun", "--run-id", result.run_id]) == 1  # a successful run is not re-executed


def _export_import_round_trip(instance, tmp_path, capsys):
    """The run's dataset exported as ABISS JSON and imported back is the same dataset."""
    out = tmp_path / "abiss.json"
    assert main(["export", "--format", "abiss-json", str(out)]) == 0
    records = json.loads(out.read_text())
    assert records and all(
        {"db_id", "question", "evidence", "sql", "category", "question_style", "question_difficulty"} <= set(r)
        for r in records
    )
    # the reference layout: only non-answerable records carry hidden_knowledge / is_solvable
    assert all(("hidden_knowledge" in r) == (not r["category"]["answerable"]) for r in records)
    assert main(["import", str(out), "--asset", "imported_dataset"]) == 0
    from dagster import AssetKey  # lazy: dagster is slow to import (~1 s); only the tests that need it pay

    event = instance.get_latest_materialization_event(AssetKey("imported_dataset"))
    assert event is not None and event.asset_materialization.partition == "university"
    con = open_audit()
    cols = (
        "db_id, question, coalesce(sql, '') AS sql, subcategory, style, difficulty, is_solvable, "
        "coalesce(hidden_knowledge, feedback, '') AS hk"
    )
    original = con.execute(f"SELECT {cols} FROM dataset ORDER BY ALL").fetchall()
    imported = con.execute(f"SELECT {cols} FROM imported_dataset ORDER BY ALL").fetchall()
    assert original == imported
    capsys.readouterr()
    cid = con.execute("SELECT candidate_id FROM dataset LIMIT 1").fetchall()[0][0]
    assert main(["audit", "question", cid[:12]]) == 0
    trail = capsys.readouterr().out
    assert "s10_style_conformance" in trail and "council votes" in trail


def test_stage_code_versions_are_prompt_hashes():
    """Editing a stage's prompt changes its code version, so the UI marks it and downstream stale."""
    from dagster import AssetKey  # lazy: dagster is slow to import (~1 s); only the tests that need it pay

    from assets.definitions import defs  # lazy: imports dagster (~1 s); only the tests that need it pay

    for stage, name in (("s03", "s03_category_conformance"), ("s09", "s09_category_consistency")):
        key = AssetKey(name)
        assert defs.get_assets_def(key).code_versions_by_key[key] == prompts.PROMPT_VERSIONS[stage]
    assert prompts._version(prompts.CONFORMANCE) != prompts._version(prompts.CONFORMANCE + " Be strict.")
    assert len(set(prompts.PROMPT_VERSIONS.values())) >= 8  # stages with distinct prompts differ


def test_generation_outage_fails_the_step_and_reexecutes(scripted_council, instance, demo_db_path):
    """An LLM endpoint down during generation fails nlq_objects (not a silent empty dataset)."""
    _register(demo_db_path)
    failed = _run_with_outage(scripted_council, instance, OPEN["generate_question"])
    assert {e.step_key for e in failed.get_step_failure_events()} == {"nlq_objects"}
    assert main(["rerun", "--db", "university"]) == 0
    con = open_audit()
    assert con.execute("SELECT count(*) FROM candidates WHERE generator = 'gen'").fetchall()[0][0] == 4


def test_partition_with_no_candidates_still_completes(scripted_council, instance, tmp_path):
    """A database where the grid yields nothing gives empty, well-typed artifacts, not a crash."""

    db = tmp_path / "tiny.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t(a INTEGER)")
    con.execute("INSERT INTO t VALUES (1)")
    con.commit()
    con.close()
    Catalog().register(db, "tiny")
    grid = {
        "generators": ["programmatic"],
        "subcategories": ["entity_ambiguity"],
        "styles": ["formal"],
        "difficulties": ["simple"],
        "n": 1,
    }
    result = run_job_for_partition(MAIN_JOB, "tiny", instance=instance, run_config=abiss_config(grid=grid))
    assert result.success
    assert not scripted_council.requests
    con = open_audit()
    assert con.execute("SELECT count(*) FROM candidates").fetchall() == [(0,)]
    assert con.execute("SELECT count(*) FROM dataset").fetchall() == [(0,)]
    assert con.execute("SELECT count(*) FROM rejection_report").fetchall() == [(0,)]
    mats = {
        e.asset_key.to_user_string(): e.event_specific_data.materialization
        for e in result.get_asset_materialization_events()
    }
    assert "entity_ambiguity" in mats["nlq_objects"].metadata["programmatic_skipped"].value
