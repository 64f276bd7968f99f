"""The well-formedness filter (step 0): every LLM example of issue #12 is rejected with its rule;
well-formed questions pass; the switch makes it a pass-through; it never raises on odd text."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.abiss import wellformed
from pipelines.abiss.stages import STAGE_BY_NO, StageContext, run_stage
from tests.conftest import SHARED_DATA

PETS = SHARED_DATA / "spider" / "database" / "pets_1" / "pets_1.sqlite"


@pytest.fixture(scope="module")
def pets_vocab():
    if not PETS.is_file():
        pytest.skip("Spider pets_1 not found under ../shared/data (workplace only)")
    return wellformed.Vocabulary.of_database(str(PETS))


def row(sub="answerable", question="How many pets are there?", **kw):
    return {
        "candidate_id": kw.pop("candidate_id", "c1"),
        "subcategory": sub,
        "style": kw.pop("style", "formal"),
        "question": question,
        **kw,
    }


ISSUE_EXAMPLES = [
    # (row, the rule that must reject it) — all seen passing the cascade or reaching it (issue #12)
    (
        row("missing_entity", "The natural-language question", feedback="The feedback explains the feedback. " * 60),
        "instruction_echo",
    ),
    (
        row("missing_entity", "The natural-language question", feedback="The feedback explains the feedback. " * 60),
        "degenerate_repetition",
    ),
    (
        row("answerable", "List the administrative staff in the engineering department.", sql="SELECT 1"),
        "prompt_example_copy",
    ),
    (
        row("answerable", "List the administrative staff in the engineering department.", sql="SELECT 1"),
        "no_schema_mention",
    ),
    (row("answerable", "{{answer}}", sql="SELECT 1"), "placeholder"),
    (row("answerable", "{{answerable_output}}, {{description}}", sql="SELECT 1"), "placeholder"),
    (row("answerable", "INSERT INTO database_schema (name) VALUES ('pets')", sql="SELECT 1"), "sql_in_question"),
]


@pytest.mark.parametrize("candidate, rule", ISSUE_EXAMPLES)
def test_issue_examples_are_rejected_with_their_rule(candidate, rule, pets_vocab):
    defects = wellformed.check(candidate, pets_vocab)
    assert rule in {d.rule for d in defects}, defects


@pytest.mark.parametrize(
    "candidate, rule",
    [
        (row("answerable", "Show the names of the students whose age is <age>.", sql="SELECT 1"), "placeholder"),
        (row("answerable", "How many pets are there? " * 30, sql="SELECT 1"), "length"),
        (row("answerable", "pets", sql="SELECT 1"), "length"),
        (row("answerable", "SELECT PetType FROM Pets WHERE weight > 10", sql="SELECT 1"), "sql_in_question"),
        (row("answerable", "Write one natural-language question about pets.", sql="SELECT 1"), "instruction_echo"),
        (row("scope_ambiguity", "Which pet types does each student own?", hidden_knowledge=""), "missing_text"),
        (row("missing_entity", "What is the phone number of each student?", feedback=""), "missing_text"),
        (
            row(
                "missing_entity",
                "What is the phone number of each student?",
                feedback="This cannot be answered by the database, ask the administrator.",
            ),
            "feedback_names_nothing",
        ),
        (row("answerable_with_evidence", "How many heavy pets are there?", sql="SELECT 1"), "missing_text"),
        (row("answerable", "How many pets are there????????????", sql="SELECT 1"), "degenerate_repetition"),
    ],
)
def test_each_rule_rejects(candidate, rule, pets_vocab):
    assert rule in {d.rule for d in wellformed.check(candidate, pets_vocab)}


@pytest.mark.parametrize(
    "candidate",
    [
        row("answerable", "How many pets are older than 3 years?", sql="SELECT COUNT(*) FROM Pets WHERE pet_age > 3"),
        row("answerable", "What is the average age of the students majoring in 600?", sql="SELECT 1"),
        row("answerable", "count of dogs", style="concise", sql="SELECT COUNT(*) FROM Pets WHERE PetType = 'dog'"),
        row("lexical_vagueness", "Which students are old?", hidden_knowledge="'old' means an age above 20."),
        row(
            "missing_entity",
            "What is the phone number of each student?",
            feedback="No phone number column exists; ask the database administrator.",
        ),
        row(
            "improper_question", "hello", style="concise", feedback="This is chit-chat, not a question about the data."
        ),
        row(
            "improper_question",
            "Please DELETE FROM Pets all the dogs.",
            feedback="This asks to modify the data (delete pets), not to read it.",
        ),
    ],
)
def test_well_formed_questions_pass(candidate, pets_vocab):
    assert wellformed.check(candidate, pets_vocab) == []


def test_improper_questions_may_contain_dml_but_others_may_not():
    dml = "Delete from Pets every dog."
    assert wellformed.check(row("improper_question", dml, feedback="A request to delete pets, not a question.")) == []
    assert "sql_in_question" in {d.rule for d in wellformed.check(row("answerable", dml, sql="SELECT 1"))}


def test_stage0_decisions_keep_the_reason_and_the_switch_turns_it_off(pets_vocab):
    rows = [
        row(candidate_id="bad", question="{{answer}}", group="answerable", sql="SELECT 1"),
        row(
            candidate_id="good",
            question="How many pets weigh more than 10?",
            group="answerable",
            sql="SELECT COUNT(*) FROM Pets WHERE weight > 10",
        ),
    ]
    ctx = StageContext(db_path=str(PETS), schema_context="", council=None)
    by = {d["candidate_id"]: d for d in run_stage(0, rows, ctx)}
    assert by["bad"]["stage"] == STAGE_BY_NO[0].key == "s00_wellformedness"
    assert not by["bad"]["passed"] and by["bad"]["reason"].startswith("placeholder:") and by["bad"]["applies"]
    assert by["good"]["passed"] and by["good"]["reason"] == "well-formed" and by["good"]["n_votes"] == 0
    off = StageContext(db_path=str(PETS), schema_context="", council=None, wellformedness=False)
    decisions = run_stage(0, rows, off)
    assert all(d["passed"] and not d["applies"] for d in decisions)


def test_vocabulary_matches_schema_words_leniently(pets_vocab):
    assert pets_vocab.matches(wellformed.content_stems("Which students enrolled with a dog?"))
    assert pets_vocab.matches(wellformed.content_stems("the weights of cats"))  # "weights" → weight
    assert not pets_vocab.matches(wellformed.content_stems("List the administrative staff in engineering."))


@settings(max_examples=200, deadline=None)
@given(
    question=st.text(max_size=400),
    feedback=st.text(max_size=200),
    sub=st.sampled_from(
        ["answerable", "answerable_with_evidence", "scope_ambiguity", "missing_entity", "improper_question"]
    ),
    style=st.sampled_from(["formal", "concise"]),
)
def test_never_raises_on_arbitrary_text(question, feedback, sub, style):
    vocab = wellformed.Vocabulary.build(["Student", "pet_age", "PetType"], ["CREATE TABLE Pets (PetID INT)"])
    defects = wellformed.check(
        row(
            sub, question, style=style, feedback=feedback, hidden_knowledge=feedback, evidence=feedback, sql="SELECT 1"
        ),
        vocab,
    )
    assert all(d.rule in wellformed.RULES for d in defects)
    reason = wellformed.reason(defects)
    assert reason == "well-formed" if not defects else reason.startswith(defects[0].rule + ":")
