"""The interaction job on the real embedded SmolLM2 server through a real Dagster instance.

The tiny model is often wrong; this checks the plumbing (structured output, parsing, votes,
artifacts, checks, cache), not the answers: one question in the taxonomy-free mode (the shortest
prompt), final turn only — one embedded call of ~1,300 prompt tokens, which takes seconds on an
idle machine and minutes on a loaded one (hence the generous per-call timeout). The other modes,
the classification phase and the user council are covered by the scripted integration tests and
by `make demo`.
"""

import json

import pytest
from dagster import instance_for_test

from cli.runs import run_job_for_partition
from pipelines.abiss.outputs import from_abiss_records
from resources.catalog import Catalog
from storage.artifacts import write_version
from storage.audit import open_audit

pytestmark = pytest.mark.e2e

RECORDS = [
    {
        "db_id": "university",
        "question": "How many departments are there?",
        "evidence": None,
        "sql": "SELECT COUNT(*) FROM departments",
        "question_style": "formal",
        "question_difficulty": "simple",
        "category": {"name": "Answerable", "subname": "Without Evidence", "answerable": True, "solvable": True},
    },
    {
        "db_id": "university",
        "question": "List the emails of the students.",
        "evidence": None,
        "sql": "SELECT personal_email FROM students",
        "question_style": "formal",
        "question_difficulty": "simple",
        "category": {
            "name": "Semantic Mapping Ambiguity",
            "subname": "Lexical Overlap",
            "answerable": False,
            "solvable": True,
        },
        "hidden_knowledge": "emails means the personal email",
        "is_solvable": True,
    },
    {
        "db_id": "university",
        "question": "List the phone numbers of the professors.",
        "evidence": None,
        "sql": None,
        "question_style": "formal",
        "question_difficulty": "simple",
        "category": {
            "name": "Missing Schema Elements",
            "subname": "Missing Entities or Attributes",
            "answerable": False,
            "solvable": False,
        },
        "hidden_knowledge": "There is no phone number column.",
        "is_solvable": False,
    },
]


@pytest.mark.timeout(1500)  # minutes only on a heavily loaded machine; ~1 min when idle
def test_interaction_job_on_embedded_model(tmp_path, monkeypatch, demo_db_path):
    cfg_path = tmp_path / "council.yaml"
    cfg_path.write_text(
        json.dumps(
            {
                "members": {
                    "smollm2": {
                        "model": "openai/smollm2",
                        "api_base": "embedded",
                        "temperature": 0.0,
                        "max_tokens": 256,
                        "seed": 0,
                        "max_in_flight": 2,
                        "timeout_s": 1200,
                        "max_retries": 1,
                    }
                },
                "councils": {"default": ["smollm2"]},
            }
        )
    )
    monkeypatch.setenv("QUANDARY_COUNCIL_CONFIG", str(cfg_path))
    from resources.llm import reset_councils  # lazy: after the setup above it (environment, monkeypatch or sys.path)

    reset_councils()
    Catalog().register(demo_db_path, "university")
    write_version(from_abiss_records(RECORDS[:1]), "dataset", "university")
    cfg = {"ops": {"interaction_conversations": {"config": {"max_steps": 0, "modes": ["taxonomy_free"]}}}}
    home = tmp_path / "dh"
    home.mkdir()
    with instance_for_test(temp_dir=str(home)) as instance:
        result = run_job_for_partition("abiss_interaction_job", "university", instance=instance, run_config=cfg)
        assert result.success
        checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
        assert checks["within_turn_limit"] and checks["votes_join_logged_calls"] and checks["every_conversation_ends"]
        con = open_audit()
        n_conv = con.execute("SELECT count(DISTINCT conversation_id) FROM interaction_conversations").fetchall()[0][0]
        assert n_conv == 1
        stages = dict(con.execute("SELECT tag_stage, count(*) FROM llm_calls GROUP BY 1").fetchall())
        assert "interaction_classify" not in stages and stages.get("interaction_system") == 1
        assert con.execute("SELECT count(*) FROM interaction_metrics WHERE \"table\" = 'table4'").fetchall()[0][0] > 0
        n_calls = con.execute("SELECT count(*) FROM llm_calls").fetchall()[0][0]
        assert run_job_for_partition("abiss_interaction_job", "university", instance=instance, run_config=cfg).success
        assert open_audit().execute("SELECT count(*) FROM llm_calls").fetchall()[0][0] == n_calls  # all cached
    reset_councils()
