"""Issue 22, items 1–2: a failed LLM call never becomes a relevancy label or an FB verdict.

A scripted council fails chosen calls (a non-retryable HTTP error = a transport failure). The user
turn is then not produced: the conversation ends ``user_failed``, is kept out of EX/FB, the label
statistics and AIR, is counted as incomplete, and a rerun sends exactly the calls that failed."""

import polars as pl
import pytest

from pipelines.interaction import metrics as M
from pipelines.interaction import tables as T
from pipelines.interaction.agents import AgentHandle
from pipelines.interaction.dialogue import run_conversation
from pipelines.interaction.user import SimulatedUser, members_without_usable_answer
from quality.interaction import INTERACTION_SCORES, INTERACTION_TURNS
from resources.llm import Council, call_log
from tests.interaction.helpers import Script, kind_of, question_row
from tests.llm_fakes import http_error, scripted_member

AMB = question_row(
    "lexical_vagueness",
    "List the tall students.",
    sql="SELECT name FROM students WHERE height_cm > 200",
    hidden_knowledge="tall means over 200 cm",
    qid="q-amb",
)


def council(role="user_simulator", n=3, prefix="u"):
    return Council(role, [scripted_member(f"{prefix}{i}", max_retries=0) for i in range(n)], call_log())


class AskThenSql:
    """A custom agent: one clarification, then SQL."""

    name = "ask-then-sql"

    def respond(self, turn):
        return {"question": "What height counts as tall?"} if not turn.history else {"sql": "SELECT 1"}


def failing(script: Script, fail: set):
    """Wrap a Script: (kind, member) pairs in ``fail`` answer a non-retryable HTTP error."""

    def responder(req):
        kind = kind_of([m for m in req.messages if m["role"] == "user"][-1]["content"])
        if (kind, req.model.split("/")[-1]) in fail:
            script.seen.append((kind, req.model.split("/")[-1]))
            return http_error(400, "scripted transport failure")
        return script(req)

    return responder


def script(labels=("Relevant", "Relevant", "Relevant")):
    return Script(
        user_classify=lambda m, t, r: {"reasoning": "", "relevancy": labels[int(m[-1])], "node_ids": []},
        user_answer=lambda m, t, r: {"answer": "over 200 cm"},
        tournament=lambda m, t, r: {"analysis": "", "answer": "A"},
    )


@pytest.mark.parametrize(
    "fail",
    [
        {("user_classify", "u1"), ("user_classify", "u2")},  # 1 valid vote + 2 failed: was labelled Relevant
        {("user_classify", "u0"), ("user_classify", "u1"), ("user_classify", "u2")},  # no vote: was Irrelevant
        {("user_answer", "u0"), ("user_answer", "u1"), ("user_answer", "u2")},  # no answer: was the refusal text
        {("user_classify", "u2")},  # one failed voter could have changed the candidates: not the reference turn
    ],
)
def test_failed_user_calls_never_become_a_label(scripted, fail):
    s = script()
    scripted.responder = failing(s, fail)
    u = SimulatedUser(council()).answer(AMB, "schema", [], "What height counts as tall?", "conv", 0)
    assert u.failed and u.relevance is None and u.answer is None
    assert "scripted transport failure" in u.error


@pytest.mark.parametrize("garbage", ["garbage prose, no JSON", '{"answer": "Relevant"}'])
def test_an_unreadable_vote_is_a_failed_call_never_an_abstention(scripted, garbage):
    """#30 item 1: one member of three answering garbage (prose or wrong-schema JSON) used to be an
    abstention, and the tie of the other two became Irrelevant. Now the turn is not produced."""
    labels = {"u0": garbage, "u1": "Relevant", "u2": "Technical"}
    scripted.responder = script()
    scripted.responder.handlers["user_classify"] = lambda m, t, r: (
        labels[m] if m == "u0" else {"reasoning": "", "relevancy": labels[m], "node_ids": [1]}
    )
    u = SimulatedUser(council()).answer(AMB, "schema", [], "Tall?", "conv", 0)
    assert u.failed and u.relevance is None and u.answer is None and "label vote u0" in u.error
    assert [v["status"] for v in u.label_votes] == ["parse_failed", "ok", "ok"]
    # even when the two readable votes agree, the turn needs every member (fragments, answerers)
    labels["u2"] = "Relevant"
    u = SimulatedUser(council()).answer(AMB, "schema", [], "Taller?", "conv", 1)
    assert u.failed and u.relevance is None
    # the member heals: the rerun re-asks only the unreadable call (ok answers are cached)
    n_before = len(scripted.requests)
    scripted.responder.handlers["user_classify"] = lambda m, t, r: {
        "reasoning": "",
        "relevancy": "Relevant",
        "node_ids": [],
    }
    u = SimulatedUser(council()).answer(AMB, "schema", [], "Taller?", "conv", 1)
    assert not u.failed and u.relevance == "Relevant"
    classify = [r for r in scripted.requests[n_before:] if "classification engine" in r.messages[-1]["content"]]
    assert [r.model.rsplit("/", 1)[-1] for r in classify] == ["u0"]


def test_an_unreadable_answer_or_judge_fails_the_turn(scripted):
    s = script(labels=("Relevant", "Relevant", "Relevant"))
    s.handlers["user_answer"] = lambda m, t, r: "prose" if m == "u1" else {"answer": f"answer from {m}"}
    scripted.responder = s
    u = SimulatedUser(council()).answer(AMB, "schema", [], "Tall?", "conv", 0)
    assert u.failed and "answer u1" in u.error


def _conversation(user, qid="q-amb"):
    agent = AgentHandle(AskThenSql(), "ask-then-sql", "custom", "tests:AskThenSql")
    row = {**AMB, "question_id": qid}
    return run_conversation(agent, row, "taxonomy_free", None, user, "schema", "/nonexistent.sqlite")


def test_failed_user_turn_ends_the_conversation_and_is_counted_apart(scripted):
    s = script()
    scripted.responder = failing(s, {("user_classify", "u1"), ("user_classify", "u2")})
    user = SimulatedUser(council())
    conv = _conversation(user)
    assert conv["end"] == "user_failed" and conv["n_turns"] == 1
    t = conv["turns"][0]
    assert t["relevance"] is None and t["user_response"] is None and t["user_status"] == "failed"
    assert [v["status"] for v in t["label_votes"]] == ["ok", "call_failed", "call_failed"]
    assert all("scripted transport failure" in v["error"] for v in t["label_votes"][1:])

    scripted.responder = script()
    ok = _conversation(SimulatedUser(council()), qid="q-amb-2")
    assert ok["end"] == "sql"
    score = [M.score_conversation(c, AMB, "/nonexistent.sqlite") for c in (conv, ok)]
    failed = score[0]
    assert failed["solved"] is None and failed["explained"] is None and "user turn" in failed["ex_reason"]
    rows = M.metric_rows(score)
    get = {(r["table"], r["agent"], r["mode"], r["metric"]): r for r in rows}
    # only the complete conversation counts in the label statistics and AIR ...
    assert get[("table6", "ask-then-sql", "taxonomy_free", "relevant_pct")]["denominator"] == 1
    assert get[("table6", "ask-then-sql", "taxonomy_free", "air")]["denominator"] == 1
    assert get[("table6", "ask-then-sql", "taxonomy_free", "avg_turns")]["denominator"] == 1
    # ... and the failed one is counted on its own line of the report
    inc = get[("table4", "ask-then-sql", "taxonomy_free", "incomplete")]
    assert (inc["numerator"], inc["denominator"]) == (1, 2)
    assert "incomplete" in M.report_text(rows).lower()
    # #30 item 5: the tables are provisional, the share sits beside Table 4, the command is printed
    text = M.report_text(rows, "quandary interact --db uni")
    assert text.startswith("PROVISIONAL: 1 of 2 conversations (50.0 %) are incomplete")
    assert "Complete them with: `quandary interact --db uni`" in text
    t4 = text.split("Table 4")[1].splitlines()
    assert "[provisional]" in t4[0] and "Incompl. (GT)" in t4[1]
    assert t4[2].split()[0] == "ask-then-sql" and t4[2].rstrip().endswith("(–)")  # taxonomy-free run only
    heads = [line for line in text.splitlines() if line.startswith(("Table 5", "Table 6", "Appendix D"))]
    assert len(heads) == 3 and all(h.endswith("[provisional]") for h in heads)
    # no database here, so its EX is undecided, which alone marks the tables provisional (#38 item 2)
    assert score[1]["ex_status"] == "undecided" and M.is_provisional(M.metric_rows([score[1]]))
    complete = M.metric_rows([{**score[1], "ex_status": "scored", "solved": True}])
    assert not M.is_provisional(complete) and "PROVISIONAL" not in M.report_text(complete)
    turns = T.turns_frame([conv, ok], 3)
    docs = T.results_json(turns, T.scores_frame(score), pl.DataFrame(schema={"question_id": pl.String}), "u", "uni")
    doc = docs["ask-then-sql"]
    assert doc["provisional"] and doc["incomplete_conversations"] == 1
    assert sorted(c["complete"] for c in doc["conversations"]) == [False, True]


def test_rerun_retries_exactly_the_failed_calls(scripted):
    fail = {("user_classify", "u1"), ("user_answer", "u0")}
    s = script()
    scripted.responder = failing(s, fail)
    conv = _conversation(SimulatedUser(council()))
    assert conv["end"] == "user_failed"
    first = list(s.seen)
    failed_first = [x for x in first if x in fail]
    assert failed_first == [("user_classify", "u1")]  # stage 2 never ran: the label was not produced
    # the call log never caches a failed call: the rerun sends it again, and nothing that succeeded
    s2 = script()
    scripted.responder = failing(s2, {("user_answer", "u0")})
    conv = _conversation(SimulatedUser(council()))
    assert conv["end"] == "user_failed"
    assert [x for x in s2.seen if x[0] == "user_classify"] == [("user_classify", "u1")]
    assert ("user_answer", "u0") in s2.seen
    s3 = script()
    scripted.responder = s3
    conv = _conversation(SimulatedUser(council()))
    assert conv["end"] == "sql"
    assert s3.seen == [("user_answer", "u0")]  # only the call that failed last time; the rest is cached
    log = call_log()
    assert log.count("status != 'ok'") == 0  # each failed row was overwritten by its successful retry


def test_incomplete_conversations_fit_the_stored_contracts(scripted):
    scripted.responder = failing(script(), {("user_classify", "u1")})
    conv = _conversation(SimulatedUser(council()))
    turns = T.turns_frame([conv], 3)
    assert INTERACTION_TURNS.schema_problems(turns) == []
    assert turns["user_status"].to_list() == ["failed"] and turns["end"].to_list() == ["user_failed"]
    assert T.conversations_from_turns(turns)[0]["end"] == "user_failed"  # survives the round trip
    scores = T.scores_frame([M.score_conversation(conv, AMB, "/nonexistent.sqlite")])
    assert INTERACTION_SCORES.schema_problems(scores) == []
    assert scores["ex_status"].to_list() == ["incomplete"]
    ids = T.all_call_ids(turns)
    assert len(ids) == 3  # the failed vote's call id is kept for the audit trail


def test_a_member_answering_garbage_to_every_call_is_named(scripted):
    """#34 item 2 for the user council: a member none of whose answers can be read is named."""
    s = script()
    s.handlers["user_classify"] = lambda m, t, r: (
        "prose only" if m == "u2" else {"reasoning": "", "relevancy": "Relevant", "node_ids": []}
    )
    scripted.responder = s
    convs = [_conversation(SimulatedUser(council()), qid=f"q-amb-{i}") for i in range(2)]
    assert all(c["end"] == "user_failed" for c in convs)
    assert members_without_usable_answer(convs) == {"u2": "2 of 2 calls"}
