"""The simulated user council with a scripted 3-member council: votes, ties, constraints, short-circuit,
stage-2 candidate filter, tournament (ties → lowest index, identical answers skip it)."""

import pytest

from pipelines.interaction.fragments import Fragment
from pipelines.interaction.user import REFUSAL, SimulatedUser, technical_fragments, tournament, winning_label
from resources.llm import Council, call_log
from tests.interaction.helpers import Script, question_row
from tests.llm_fakes import scripted_member

AMB = question_row(
    "lexical_overlap",
    "List the emails of the students of the 'Database' course.",
    sql="SELECT s.institutional_email FROM students s JOIN student_courses sc ON s.id = sc.student_id "
    "WHERE sc.course = 'Database' ORDER BY s.institutional_email LIMIT 5",
    hidden_knowledge="'emails' means the institutional email.",
    style="colloquial",
)
ANS = question_row("answerable", "How many students are there?", sql="SELECT COUNT(*) FROM students")
UNANS = question_row("missing_entity", "List the staff.", feedback="No staff table.")


def council(n=3):
    return Council("user_simulator", [scripted_member(f"m{i}") for i in range(n)], call_log())


def labels_script(labels, node_ids=None, answers=None, judge=None):
    node_ids = node_ids or {}
    answers = answers or {}

    def label(member, text, req):
        lab = labels[member]
        return {"reasoning": "r", "relevancy": lab, "node_ids": node_ids.get(member, [])} if lab else "garbage"

    return Script(
        user_classify=label,
        user_answer=lambda m, t, r: {"answer": answers.get(m, f"answer from {m}")},
        tournament=judge or (lambda m, t, r: {"analysis": "", "answer": "A"}),
    )


@pytest.mark.parametrize(
    "labels, winner",
    [
        (["Relevant", "Relevant", "Technical"], "Relevant"),
        (["Technical", "Irrelevant", "Technical"], "Technical"),
        (["Relevant", "Technical", "Irrelevant"], "Irrelevant"),  # 1-1-1 tie
        (["Relevant", "Technical"], "Irrelevant"),  # even tie, nobody voted Irrelevant
        (["Relevant", None, None], "Relevant"),  # abstentions do not count
        ([None, None, None], "Irrelevant"),
    ],
)
def test_vote_rule(labels, winner):
    assert winning_label(labels) == winner


def test_technical_union_only_from_technical_voters_and_invalid_ids_dropped():
    frags = [Fragment(i, "WHERE", f"f{i}") for i in range(1, 6)]
    votes = [
        {"label": "Technical", "node_ids": [3, 1]},
        {"label": "Technical", "node_ids": [3, 99]},
        {"label": "Relevant", "node_ids": [5]},
    ]
    chosen, invalid, held = technical_fragments(votes, frags)
    assert [f.id for f in chosen] == [1, 3] and invalid == [99] and held == []


def test_tournament_tie_goes_to_lowest_index():
    assert tournament(3, [1, 2]) == (1, [0, 1, 1])
    assert tournament(3, [2, 2, 0]) == (2, [1, 0, 2])


def test_short_circuit_makes_no_call(scripted):
    scripted.responder = Script()
    u = SimulatedUser(council()).answer(UNANS, "schema", [], "Which staff?", "conv", 0)
    assert u.short_circuit and u.relevance == "Irrelevant" and u.answer == REFUSAL
    assert scripted.count == 0


def test_relevant_majority_only_matching_voters_answer_then_tournament(scripted):
    s = labels_script({"m0": "Relevant", "m1": "Relevant", "m2": "Technical"}, judge=lambda m, t, r: {"answer": "B"})
    scripted.responder = s
    u = SimulatedUser(council()).answer(AMB, "schema", [], "Personal or institutional email?", "conv", 0)
    assert u.relevance == "Relevant" and u.unanimous is False
    assert [c["member"] for c in u.candidates] == ["m0", "m1"]  # the paper's label filter
    assert s.count("tournament") == 3  # one pair, every member judges
    assert u.answer in ("answer from m0", "answer from m1") and u.margin == 3
    assert all(v["llm_call_id"] for v in u.label_votes + u.candidates + u.tournament)
    # the judge sees the clarification question being answered (the reference judge does not)
    judge_prompts = [
        r.messages[-1]["content"] for r in scripted.requests if "expert evaluator" in r.messages[-1]["content"]
    ]
    assert all("Personal or institutional email?" in p for p in judge_prompts)
    # hidden knowledge goes to the Relevant answer prompt
    answer_prompts = [
        r.messages[-1]["content"] for r in scripted.requests if "non-technical user who" in r.messages[-1]["content"]
    ]
    assert all("institutional email." in p and "colloquial" in p for p in answer_prompts)


def test_candidate_filter_all_asks_everyone(scripted):
    scripted.responder = labels_script(
        {"m0": "Relevant", "m1": "Relevant", "m2": "Technical"}, answers={"m0": "same", "m1": "same", "m2": "same"}
    )
    u = SimulatedUser(council(), candidate_filter="all").answer(AMB, "schema", [], "Which email?", "conv", 0)
    assert len(u.candidates) == 3 and u.answer == "same" and not u.tournament  # identical answers skip the tournament


def test_tie_becomes_irrelevant_and_everyone_answers_the_refusal_prompt(scripted):
    s = labels_script({"m0": "Relevant", "m1": "Technical", "m2": "Irrelevant"})
    scripted.responder = s
    u = SimulatedUser(council()).answer(AMB, "schema", [], "Sort?", "conv", 0)
    assert u.relevance == "Irrelevant"
    assert [c["member"] for c in u.candidates] == ["m2"]  # the one Irrelevant voter
    s2 = labels_script({"m0": "Relevant", "m1": "Technical"})
    scripted.responder = s2
    u2 = SimulatedUser(council(2)).answer(AMB, "schema", [], "Sort?", "conv2", 0)
    assert u2.relevance == "Irrelevant" and len(u2.candidates) == 2  # nobody voted Irrelevant: all answer
    refusal_prompts = [
        r.messages[-1]["content"]
        for r in scripted.requests
        if "Politely but firmly refuse" in r.messages[-1]["content"]
    ]
    assert refusal_prompts and all("**Evidence:**" not in p for p in refusal_prompts)


def test_technical_answer_grounded_on_voters_fragments(scripted):
    s = labels_script(
        {"m0": "Technical", "m1": "Technical", "m2": "Irrelevant"}, node_ids={"m0": [5], "m1": [4, 5], "m2": [1]}
    )
    scripted.responder = s
    u = SimulatedUser(council()).answer(AMB, "schema", [], "How should I sort and how many?", "conv", 0)
    assert u.relevance == "Technical"
    assert u.fragments == ["sc.course = 'Database'", "s.institutional_email"]  # ids 4 and 5, by id
    prompts = [
        r.messages[-1]["content"] for r in scripted.requests if "What You Want (Reference)" in r.messages[-1]["content"]
    ]
    assert prompts and all("- sc.course = 'Database'" in p for p in prompts)


def test_answerable_questions_cannot_be_labelled_relevant(scripted):
    # "Relevant" violates the answerable schema: unreadable (after the repair call), so no vote and
    # no turn (#30 item 1: never an abstention that lets the third member decide)
    s = labels_script({"m0": "Relevant", "m1": "Relevant", "m2": "Technical"})
    scripted.responder = s
    u = SimulatedUser(council()).answer(ANS, "schema", [], "Which table?", "conv", 0)
    assert [v["label"] for v in u.label_votes] == [None, None, "Technical"]
    assert u.failed and u.relevance is None and "label vote m0" in u.error
    classify_prompt = next(
        r.messages[-1]["content"] for r in scripted.requests if "classification engine" in r.messages[-1]["content"]
    )
    assert "Hidden Knowledge" not in classify_prompt and "\nRELEVANT:" not in classify_prompt
