"""AmbiTab-Bird: the LLM-built conversion against scripted council fixtures (superhero DB)."""

import json
import re

import pytest

from pipelines.ambitab import bird
from resources.llm.council import Council
from resources.llm.registry import call_log
from tests.llm_fakes import json_reply, scripted_member

N = 6


@pytest.fixture
def superhero_rows(shared_data):
    rows = [r for r in json.loads((shared_data / bird.DEV).read_text()) if r["db_id"] == "superhero"]
    return rows[:N]


def _responder(rows):
    by_question = {r["question"]: r for r in rows}
    control_q = rows[1]["question"]  # the rewrite finds nothing ambiguous: a control
    no_alt_q = rows[2]["question"]  # no alternative reading survives
    probe_fail_q = rows[3]["question"]  # the solver matches even without clarification
    judged_clear_q = rows[4]["question"]  # the judges find the rewrite clear

    def responder(req):
        prompt = req.messages[-1]["content"]
        if "List up to 3 OTHER" in prompt:
            q = prompt.split("## Question:\n", 1)[1].split("\n\n", 1)[0]
            sql = by_question[q]["sql"] if q == no_alt_q else "SELECT 'other reading'"
            return json_reply(
                {"readings": [{"description": "alt", "sql": sql}, {"description": "bad", "sql": "SELEC"}]}
            )
        if "Rewrite the question" in prompt:
            q = prompt.split("## Question:\n", 1)[1].split("\n\n", 1)[0]
            qid = by_question[q]["question_id"]
            ambs = (
                []
                if q == control_q
                else [
                    {
                        "term": "the hero",
                        "kind": "knowledge",
                        "resolution": f"I mean the one in the evidence [QID={qid}]",
                    }
                ]
            )
            return json_reply({"user_query": f"Tell me about the hero ({qid})", "ambiguities": ambs})
        if "Generate the final SQLite statement" in prompt:
            qid = int(re.search(r"\((\d+)\)", prompt.split("## Text-to-SQL Question:\n", 1)[1]).group(1))
            row = next(r for r in rows if r["question_id"] == qid)
            resolved = "Clarification summary" in prompt
            sql = row["sql"] if resolved or row["question"] == probe_fail_q else "SELECT 'guess'"
            return json_reply({"reasoning": "r", "output": sql})
        if "Can the intended SQL be written" in prompt:
            qid = int(re.search(r"\((\d+)\)", prompt.split("## Request:\n", 1)[1]).group(1))
            row = next(r for r in rows if r["question_id"] == qid)
            return json_reply({"necessary": row["question"] != judged_clear_q, "reason": "r"})
        raise AssertionError(f"unexpected prompt: {prompt[:80]}")

    return responder


@pytest.fixture
def factory(scripted, superhero_rows):
    scripted.responder = _responder(superhero_rows)
    members = [scripted_member(n, max_tokens=600) for n in ("a", "b", "c")]
    councils = {
        "generators": Council("generators", members[:1], call_log()),
        "solvers": Council("solvers", members[:1], call_log()),
        "judges": Council("judges", members, call_log()),
    }

    def get(role):
        return councils[role]

    return get


def test_scripted_build_applies_every_filter(shared_data, factory, superhero_rows, scripted):
    res = bird.build(shared_data, council_factory=factory, max_rows=N)
    stages = {r.source_id: r.stage for r in res.rejects}
    qid = [str(r["question_id"]) for r in superhero_rows]
    assert stages == {qid[2]: "readings", qid[3]: "probe", qid[4]: "necessity"}
    by_id = {r.interpretation_id: r for r in res.records}
    assert set(by_id) == {qid[0], qid[1], qid[5]}
    kept = by_id[qid[0]]
    assert kept.n_ambiguities == 1 and kept.spec.user_query.startswith("Tell me about the hero")
    assert kept.provenance.filter_outcomes["probes"] == {
        "miss_without_clarification": True,
        "match_with_resolutions": True,
    }
    assert kept.oracle_context.withheld_evidence and kept.spec.external_knowledge is None
    assert [a["differs"] for a in kept.provenance.alternatives] == [True, False]
    control = by_id[qid[1]]
    assert control.is_control and control.spec.user_query == superhero_rows[1]["question"]
    assert res.stats["controls"] == 1
    assert any(s.step == "llm authoring (databases absent)" for s in res.skipped)
    calls = scripted.count
    again = bird.build(shared_data, council_factory=factory, max_rows=N)
    assert scripted.count == calls  # every LLM step is cached by the council layer
    assert [r.to_json_line() for r in again.records] == [r.to_json_line() for r in res.records]


def test_without_llm_the_build_reports_the_skip(shared_data):
    res = bird.build(shared_data, council_factory=None, max_rows=3)
    assert not res.records
    assert any("LLM steps off" in s.reason for s in res.skipped)


def test_missing_role_is_named(shared_data):
    def factory(role):
        raise KeyError(role)

    res = bird.build(shared_data, council_factory=factory, max_rows=2)
    assert any("generators" in s.reason and "judges" in s.reason for s in res.skipped)
