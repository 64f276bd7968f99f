"""The ABISS pipeline on a real Dagster instance with a scripted council: shared by the pipeline test
and the CLI run-output test."""

import json
import re

import pytest

from pipelines.abiss.prompts import PROMPT_OPENINGS as OPEN
from pipelines.abiss.taxonomy import SUBCATEGORIES
from tests.llm_fakes import ScriptedLLM, install, json_reply

SUBS = ["answerable", "lexical_overlap", "missing_entity"]


GRID = {
    "generators": ["programmatic", "gen"],
    "subcategories": SUBS,
    "styles": ["formal"],
    "difficulties": ["moderate"],
    "n": 1,
    "seed": 7,
}


NAME_TO_ID = {s.name: s.id for s in SUBCATEGORIES}


def _last_user(messages) -> str:
    return next(m["content"] for m in reversed(messages) if m["role"] == "user")


def healthy(req):
    """A council that plays along: generates, grounds, approves, never solves unanswerables."""
    text = _last_user(req.messages)
    if text.startswith(OPEN["generate_question"]):
        sub = re.search(r"Category: .+? / (.+?) \(", text).group(1)
        sid = NAME_TO_ID[sub]
        if sid == "lexical_overlap":
            return json_reply(
                {
                    "question": "Show the emails of the students who enrolled after 2023.",
                    "interpretations": [
                        {"hidden_knowledge": "personal email"},
                        {"hidden_knowledge": "institutional email"},
                    ],
                }
            )
        if sid == "missing_entity":
            return json_reply(
                {
                    "question": "List the phone numbers of the professors.",
                    "feedback": "No phone number column exists; ask the database administrator.",
                }
            )
        return json_reply({"question": "How many departments are there?"})
    if text.startswith(OPEN["ground_sql"]):
        if "personal email" in text:
            return json_reply(
                {
                    "sql": "SELECT s.personal_email FROM students s JOIN student_courses sc USING (student_id) "
                    "JOIN courses c USING (course_id) WHERE c.title = 'Database'"
                }
            )
        if "institutional email" in text:
            return json_reply(
                {
                    "sql": "SELECT s.institutional_email FROM students s JOIN student_courses sc USING (student_id) "
                    "JOIN courses c USING (course_id) WHERE c.title = 'Database'"
                }
            )
        return json_reply({"sql": "SELECT COUNT(*) FROM departments"})
    if text.startswith(OPEN["write_sql"]):  # stage 6 without hidden knowledge
        return json_reply({"sql": "SELECT 'nothing like the gold'"})
    if text.startswith(OPEN["solve"]):
        return json_reply({"answerable": False, "sql": ""})
    if text.startswith(OPEN["consistency"]):
        q = re.search(r"Question: (.*)", text).group(1)
        a = re.search(r"A: (.+?) — ", text).group(1)
        wanted = "Lexical Overlap" if "emails" in q else ("Missing Entities or Attributes" if "phone" in q else None)
        return json_reply({"choice": "A" if a == wanted else "B"})
    if text.startswith(OPEN["style"]):
        return json_reply({"style": "formal"})
    return json_reply({"verdict": "yes", "reason": "looks right"})


@pytest.fixture
def scripted_council(tmp_path, monkeypatch):
    cfg = tmp_path / "council.yaml"
    member = {
        "temperature": 0.0,
        "max_tokens": 64,
        "seed": 0,
        "max_in_flight": 4,
        "timeout_s": 120.0,  # scripted answers are instant; 5 s could be missed beside other load
        "max_retries": 0,
        "backoff_base_s": 0.0,
        "backoff_max_s": 0.0,
    }
    cfg.write_text(
        json.dumps(
            {
                "members": {n: {"model": f"scripted/{n}", **member} for n in ("gen", "a", "b", "c")},
                "councils": {
                    "generators": ["gen"],
                    "validators": ["a", "b", "c"],
                    "user_simulator": ["gen"],
                    "system_agents": ["gen"],
                },
            }
        )
    )
    monkeypatch.setenv("QUANDARY_COUNCIL_CONFIG", str(cfg))
    from resources.llm import reset_councils  # lazy: after the setup above it (environment, monkeypatch or sys.path)

    reset_councils()
    handler = ScriptedLLM(healthy)
    install(handler)
    yield handler
    reset_councils()
