"""The ABISS job on the real embedded SmolLM2 server: every stage runs, every vote is logged.

The tiny model's answers are often wrong; what this asserts is the plumbing a real model goes
through (HTTP, structured output, parsing, cache, votes, artifacts), not the answers.
"""

import pytest
from dagster import instance_for_test

from assets.abiss.card import config as abiss_config
from assets.definitions import MAIN_JOB
from cli.commands.run import DEMO_COUNCIL
from cli.runs import run_job_for_partition
from resources.catalog import Catalog
from storage.audit import open_audit

pytestmark = pytest.mark.e2e  # its time limit: tests/conftest.py, EMBEDDED_TIMEOUT_S

GRID = {
    "generators": ["programmatic", "smollm2"],
    "subcategories": ["answerable", "lexical_overlap", "missing_entity"],
    "llm_subcategories": ["answerable"],
    "styles": ["formal"],
    "difficulties": ["simple"],
    "n": 1,
    "seed": 3,
}


def test_abiss_job_on_embedded_model(tmp_path, monkeypatch, demo_db_path):
    monkeypatch.setenv("QUANDARY_COUNCIL_CONFIG", str(DEMO_COUNCIL))
    from resources.llm import reset_councils  # lazy: after the setup above it (environment, monkeypatch or sys.path)

    reset_councils()
    Catalog().register(demo_db_path, "university")
    home = tmp_path / "dh"
    home.mkdir()
    with instance_for_test(temp_dir=str(home)) as instance:
        result = run_job_for_partition(MAIN_JOB, "university", instance=instance, run_config=abiss_config(grid=GRID))
        assert result.success
        con = open_audit()
        calls = dict(con.execute("SELECT tag_stage, count(*) FROM llm_calls GROUP BY 1").fetchall())
        assert calls.get("generation") == 1
        assert calls.get("s03_category_conformance", 0) >= 1
        # every council vote points at a logged call whose raw answer is kept
        missing = con.execute(
            "SELECT count(*) FROM council_votes v LEFT JOIN llm_calls c ON c.call_id = v.llm_call_id "
            "WHERE c.raw_response IS NULL"
        ).fetchall()[0][0]
        assert missing == 0
        funnel = con.execute("SELECT count(DISTINCT stage) FROM rejection_report").fetchall()[0][0]
        assert funnel >= 3
        # a second run of the same grid is served entirely from the call cache
        before = con.execute("SELECT sum(cache_hits) FROM llm_calls").fetchall()[0][0] or 0
        n_calls = con.execute("SELECT count(*) FROM llm_calls").fetchall()[0][0]
        assert run_job_for_partition(
            MAIN_JOB, "university", instance=instance, run_config=abiss_config(grid=GRID)
        ).success
        con = open_audit()
        assert con.execute("SELECT count(*) FROM llm_calls").fetchall()[0][0] == n_calls
        assert con.execute("SELECT sum(cache_hits) FROM llm_calls").fetchall()[0][0] > before
    reset_councils()
