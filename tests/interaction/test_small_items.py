"""Issue 22, item 6: the `multiple` status survives for the council agent, agents without a
classification phase run only the taxonomy-only / taxonomy-free modes (§5.1), progress counts
conversations as they finish, and the audit trail shows a failed vote's error."""

import threading

from cli.commands.audit import vote_outcome
from pipelines.interaction.agents import AgentHandle, CouncilSystemAgent, Turn, load_agent
from pipelines.interaction.dialogue import run_benchmark, to_question
from pipelines.interaction.modes import MODES
from resources.llm import Council, call_log
from tests.interaction.helpers import question_row
from tests.llm_fakes import json_reply, scripted_member

ANS = question_row("answerable", "How many students are there?", sql="SELECT COUNT(*) FROM students", qid="q1")


def test_multiple_status_survives_for_the_council_agent(scripted):
    scripted.responder = lambda req: json_reply(
        {"system_question": None, "system_sql": "SELECT 1", "system_feedback": "also feedback"}
    )
    system = Council("system_agents", [scripted_member("sys")], call_log())
    agent = load_agent("sys", system)
    assert isinstance(agent.agent, CouncilSystemAgent)
    q = to_question(ANS, "schema", "db")
    r = agent.respond(Turn(q, (), "taxonomy_free", None, 0, 3))
    assert r.sql == "SELECT 1" and r.status == "multiple"  # was re-normalised to "ok"


class NoClassifier:
    name = "e2e"

    def respond(self, turn):
        return {"sql": "SELECT 1"}


def test_agent_without_classification_runs_only_the_label_free_modes():
    agent = AgentHandle(NoClassifier(), "e2e", "custom", "tests:NoClassifier")
    convs, skipped = run_benchmark([agent], [ANS], list(MODES), user=None, schema_context="s", db_path="db", workers=1)
    assert sorted(c["mode"] for c in convs) == ["taxonomy_free", "taxonomy_only"]
    assert sorted(s["mode"] for s in skipped) == ["ground_truth", "predicted"]


class Blocking:
    """q0's conversation waits until progress has reported another conversation as done."""

    name = "blocking"

    def __init__(self):
        self.progressed = threading.Event()
        self.released_by_progress = None

    def classify(self, q):
        return "answerable"

    def respond(self, turn):
        if turn.question.question_id == "q0":
            self.released_by_progress = self.progressed.wait(timeout=30)
        return {"sql": "SELECT 1"}


def test_progress_counts_conversations_as_they_finish():
    agent_obj = Blocking()
    agent = AgentHandle(agent_obj, "blocking", "custom", "tests:Blocking")
    rows = [{**ANS, "question_id": f"q{i}"} for i in range(3)]
    seen = []

    def progress(done, total):
        seen.append(done)
        agent_obj.progressed.set()

    convs, _ = run_benchmark(
        [agent], rows, ["taxonomy_free"], user=None, schema_context="s", db_path="db", workers=2, progress=progress
    )
    assert agent_obj.released_by_progress is True  # job order would have held every report behind q0
    assert seen == [1, 2, 3] and [c["question_id"] for c in convs] == ["q0", "q1", "q2"]


def test_audit_conversation_shows_a_failed_votes_error():
    failed = vote_outcome(None, {"status": "call_failed", "error": "Timeout after 600 s", "llm_call_id": "abc"})
    assert "call_failed" in failed and "Timeout after 600 s" in failed and "None" not in failed
    assert vote_outcome("Relevant", {"status": "ok", "error": None}) == "→ Relevant"
