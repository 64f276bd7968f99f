"""LLM asker, solver and oracles through a real Council over the scripted provider (unit level)."""

import asyncio
import json

import pytest

from pipelines.ambitab.protocol.askers import AskerInput, LLMAsker, make_asker
from pipelines.ambitab.protocol.diagnostics import hybrid_name
from pipelines.ambitab.protocol.episode import arun_episode
from pipelines.ambitab.protocol.oracles import LLMOracle, make_oracle
from pipelines.ambitab.protocol.runs import plan_conditions
from pipelines.ambitab.protocol.solver import LLMSolver, ScriptedSolver
from pipelines.ambitab.protocol.verifier import Verifier
from resources.llm.council import Council
from resources.llm.failures import ProviderUnavailable
from resources.llm.registry import call_log
from tests.ambitab.records import amb, task
from tests.llm_fakes import http_error, scripted_member

REF = "SELECT name FROM people WHERE age > 30"
T = task(
    [amb("age", "Age in whole years.", frozen_intent="List people older than 30 years."), amb("salary")],
    query="List the senior people.",
    reference_sql=REF,
)


def kind_of(text: str) -> str:
    if "Action Chosen" in text:
        return "responder"
    if "Action Choices" in text:
        return "matcher"
    if "Clarification Summary" in text:
        return "solver"
    return "asker"


class Script:
    def __init__(self, **handlers):
        self.handlers = handlers
        self.prompts: dict[str, list[str]] = {}

    def __call__(self, req):
        text = "\n".join(m["content"] for m in req.messages)
        kind = kind_of(text)
        self.prompts.setdefault(kind, []).append(text)
        out = self.handlers[kind](text) if kind in self.handlers else "not json"
        return json.dumps(out) if isinstance(out, dict) else out


def council(role="oracles"):
    return Council(role, [scripted_member("m", max_tokens=256, max_retries=0)], call_log())


MATCH_AGE = {"action": 'labeled("age")', "cot": "about the age"}


def reply(oracle_kind, script, scripted, question="Which age?", corpus="ambrosia", **kw):
    scripted.responder = script
    oracle = make_oracle(oracle_kind, corpus, council(), **kw)
    return asyncio.run(oracle.reply(T, question, frozenset())), oracle


def test_scoped_oracle_hides_the_sql_and_reads_the_frozen_intent(scripted):
    script = Script(matcher=lambda t: MATCH_AGE, responder=lambda t: {"type": "labeled", "output": "Older than 30."})
    r, oracle = reply("llm", script, scripted)
    assert oracle.name == "llm_scoped"
    assert r.credited == ("amb-age",) and r.response == "Older than 30." and len(r.call_ids) == 2
    assert REF not in script.prompts["matcher"][0] and REF not in script.prompts["responder"][0]
    assert "Ground-truth SQL" not in script.prompts["responder"][0]
    assert "List people older than 30 years." in script.prompts["responder"][0]
    assert "Which age?" in script.prompts["matcher"][0]


def test_sql_grounding_and_unfiltered_show_segments(scripted):
    script = Script(matcher=lambda t: MATCH_AGE, responder=lambda t: {"type": "labeled", "output": "x"})
    reply("llm", script, scripted, sql_grounding=True)
    assert "WHERE age > 30" in script.prompts["matcher"][0]
    assert REF in script.prompts["responder"][0] and "CREATE TABLE t" in script.prompts["responder"][0]


def test_stress_test_shows_the_sql_to_the_responder_only(scripted):
    script = Script(matcher=lambda t: MATCH_AGE, responder=lambda t: {"type": "labeled", "output": "x"})
    _, oracle = reply("stress", script, scripted)
    assert oracle.name == "llm_scoped+stress_sql_shown"
    assert REF not in script.prompts["matcher"][0] and "WHERE age > 30" not in script.prompts["matcher"][0]
    assert REF in script.prompts["responder"][0]


def test_credit_scorer_scans_the_response_but_not_for_rec_none(scripted):
    script = Script(
        matcher=lambda t: {"action": 'unlabeled("x")', "cot": "hm"},
        responder=lambda t: {"type": "unlabeled", "output": "I mean the salary before tax."},
    )
    r, _ = reply("llm", script, scripted, question="Please elaborate.")
    assert r.credited == ("amb-salary",)  # the responder volunteered a resolution
    assert r.credited_no_response == ()  # ΔRecnone credits come from action, question and cot only


def test_hybrid_oracle_returns_the_stored_resolution(scripted):
    script = Script(matcher=lambda t: MATCH_AGE)
    r, oracle = reply("hybrid", script, scripted)
    assert oracle.name == "hybrid_scoped" and "responder" not in script.prompts
    assert r.response == "Age in whole years." and r.credited == ("amb-age",)
    script = Script(matcher=lambda t: {"action": "unanswerable()", "cot": ""})
    r, _ = reply("hybrid", script, scripted, question="What else?")  # a new prompt (not the cached one)
    assert r.refused and r.credited == ()


def test_provider_failure_fails_the_step_never_a_refusal(scripted):
    scripted.responder = lambda req: http_error(500, "upstream down")
    with pytest.raises(ProviderUnavailable, match="upstream down|failed"):
        asyncio.run(
            arun_episode(
                T, make_asker("full"), make_oracle("llm", "ambrosia", council()), ScriptedSolver("SELECT 1"), Verifier()
            )
        )


def test_ledger_prompt_splits_resolved_and_unanswered_and_stops_on_the_last_turn(scripted):
    script = Script(asker=lambda t: {"type": "clarification", "output": "What do you mean by senior?"})
    scripted.responder = script
    asker = LLMAsker(council("askers"), "checklist_ledger")
    inp = AskerInput(
        spec=T.spec,
        history=(("Which age?", "Older than 30.", False), ("Which salary?", "Sorry, I can't help with that.", True)),
        turn=3,
        max_turns=5,
        seed=7,
    )
    d = asyncio.run(asker.decide(inp))
    assert d.kind == "question" and d.question == "What do you mean by senior?"
    prompt = script.prompts["asker"][0]
    resolved, unanswered = prompt.split("### Already asked but NOT answered")
    assert "You asked: Which age? User answered: Older than 30." in resolved.split("### Already asked and RESOLVED")[1]
    assert "Which salary?" in unanswered and "Which salary?" not in resolved
    assert "### Turn 3 (3 turns left)" in prompt
    asyncio.run(asker.decide(AskerInput(spec=T.spec, history=(), turn=5, max_turns=5)))
    assert "LAST turn" in script.prompts["asker"][-1]


def test_chat_prompt_sends_history_as_turns(scripted):
    script = Script(asker=lambda t: {"type": "done", "output": None})
    scripted.responder = script
    captured = []
    scripted.responder = lambda req: captured.append(req.messages) or json.dumps({"type": "done", "output": None})
    d = asyncio.run(
        LLMAsker(council("askers"), "checklist_chat").decide(
            AskerInput(spec=T.spec, history=(("Which age?", "Older than 30.", False),), turn=2, max_turns=5)
        )
    )
    assert d.kind == "stop"
    roles = [m["role"] for m in captured[0]]
    assert roles == ["user", "assistant", "user"] and "Older than 30." in captured[0][2]["content"]


def test_unparseable_asker_answer_is_a_fallback_stop(scripted):
    scripted.responder = lambda req: "I would like to ask about age"
    row = asyncio.run(
        arun_episode(
            T, LLMAsker(council("askers")), make_oracle("det", "ambrosia"), ScriptedSolver("SELECT 1"), Verifier()
        )
    )
    assert row["fallback_stop"] and row["n_questions"] == 0 and row["recall"] is None
    assert row["asker_call_ids"]  # the call behind the fallback is kept for the audit


def test_llm_solver_reads_the_clarification_summary(scripted):
    seen = []
    scripted.responder = lambda req: (
        seen.append(req.messages[0]["content"])
        or json.dumps({"reasoning": "r", "type": "final_sql", "output": "SELECT 2"})
    )
    s = asyncio.run(LLMSolver(council("solvers")).solve(T.spec, [("Which age?", "Older than 30.", False)], seed=3))
    assert s.sql == "SELECT 2" and s.call_id
    assert "Q1: Which age?" in seen[0] and "A1: Older than 30." in seen[0] and "single SQLite statement" in seen[0]
    assert "Age in whole years." not in seen[0]  # resolutions are never handed to the solver
    scripted.responder = lambda req: http_error(503, "busy")
    with pytest.raises(ProviderUnavailable):
        asyncio.run(LLMSolver(council("solvers")).solve(T.spec, [], seed=4))


def test_context_overflow_ends_the_episode_before_the_first_question(scripted):
    scripted.responder = lambda req: pytest.fail("no call may be made for an overflowing episode")
    oracle = LLMOracle(council(), context_tokens=50)
    row = asyncio.run(arun_episode(T, make_asker("full"), oracle, ScriptedSolver("SELECT 1"), Verifier()))
    assert row["status"] == "context_overflow" and row["verdict"] == 0 and row["n_questions"] == 0
    assert row["recall"] == 0.0  # counted, with zero credit
    assert not LLMOracle(council()).overflows(T)  # the paper's 16k tokens


def test_episode_ids_change_with_the_model_behind_a_role(scripted):
    scripted.responder = lambda req: json.dumps({"type": "done", "output": None})

    def eid(model):
        c = Council("askers", [scripted_member("m", model=f"scripted/{model}", max_retries=0)], call_log())
        row = asyncio.run(
            arun_episode(T, LLMAsker(c), make_oracle("det", "ambrosia"), ScriptedSolver("SELECT 1"), Verifier())
        )
        return row["episode_id"], row["asker"]

    (a, name_a), (b, name_b) = eid("one"), eid("two")
    assert a != b and name_a == name_b == "llm"


def test_an_oracle_member_can_be_named_so_two_models_are_two_oracles(scripted):
    seen = []
    scripted.responder = lambda req: seen.append(req.model) or json.dumps(MATCH_AGE)
    two = Council("oracles", [scripted_member("qwen"), scripted_member("gemma")], call_log())
    oracle = make_oracle("llm@gemma", "ambrosia", two)
    assert oracle.name == "llm_scoped@gemma" and make_oracle("llm", "ambrosia", two).name == "llm_scoped"
    asyncio.run(make_oracle("hybrid@gemma", "ambrosia", two).reply(T, "Which age?", frozenset()))
    assert seen and all("gemma" in m for m in seen)
    hybrids = {
        c.oracle for c in plan_conditions(["llm"], ["llm@gemma"], diagnostics=True) if c.oracle.startswith("hybrid")
    }
    assert hybrids == {"hybrid@gemma"}
    assert make_oracle("hybrid@gemma", "ambrosia", two).name == hybrid_name(oracle.name) == "hybrid_scoped@gemma"
    with pytest.raises(KeyError, match="no member 'llama'"):
        make_oracle("llm@llama", "ambrosia", two)
