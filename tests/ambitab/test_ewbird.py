"""AmbiTab-EW-Bird: hint splitting, the structural dev build, superhero execution, the LLM filter."""

import json

import pytest

from pipelines.ambitab import ewbird
from resources.llm.council import Council
from resources.llm.registry import call_log
from tests.llm_fakes import json_reply, scripted_member


@pytest.fixture(scope="module")
def built(shared_data):
    return ewbird.build(shared_data)


def test_full_dev_builds_structurally_and_superhero_executes(built):
    assert len(built.records) == 1386
    hints = sum(len(r.oracle_context.withheld_evidence) for r in built.records)
    assert hints == 2680  # the [L] count; four records repeat a term ("Status"): merged into one ambiguity
    assert sum(len(r.ambiguities) for r in built.records) == hints - built.stats["duplicate_terms_merged"] == 2676
    executable = [r for r in built.records if r.verifier.executable]
    assert len(executable) == 126 and {r.db_id for r in executable} == {"superhero"}
    assert sum(len(r.ambiguities) for r in executable) == 236
    structural = [r for r in built.records if not r.verifier.executable]
    assert all(r.verifier.skip_reason and r.db_path is None for r in structural)
    assert {r.stage for r in built.rejects} == {"no_evidence"} and len(built.rejects) == 148
    steps = {s.step for s in built.skipped}
    assert steps == {"execute + llm filter (databases absent)", "llm keep/drop filter"}
    assert built.stats["hint_separators"]["refers_to"] == 1752


def test_hints_are_withheld_from_the_visible_spec(built):
    for rec in built.records:
        hints = rec.oracle_context.withheld_evidence
        assert rec.split == "dev" and 1 <= rec.n_ambiguities <= len(hints)
        terms = [" ".join(a.term.casefold().split()) for a in rec.ambiguities]
        assert len(terms) == len(set(terms))  # one ambiguity per distinct term
        assert all(a.kind == "knowledge" for a in rec.ambiguities)
        assert sorted(h for a in rec.ambiguities for h in a.resolution.split("; ")) == sorted(
            p for h in hints for p in h.split("; ")
        )  # every hint in exactly one resolution
        view = rec.agent_view().model_dump_json()
        for hint in rec.oracle_context.withheld_evidence:
            assert json.dumps(hint)[1:-1] not in view
    assert built.records[0].oracle_view().reference_sql  # the unfiltered oracle sees the SQL by default


@pytest.mark.parametrize(
    "hint,term,kind,concepts",
    [
        ("3-D Man refers to superhero_name = '3-D Man'", "3-D Man", "refers_to", ["3-D Man", "superhero_name"]),
        ("percentage = MULTIPLY(DIVIDE(SUM(gender = 'Female'), COUNT(id)), 100)", "percentage", "equals", ["Female"]),
        ("blue eyes means eye_colour_id = 7", "blue eyes", "means", ["eye_colour_id"]),
        ("heaviest superhero", "heaviest superhero", "other", []),
    ],
)
def test_parse_hint(hint, term, kind, concepts):
    idents = {"superhero_name", "eye_colour_id", "gender", "id"}
    t, k, c = ewbird.parse_hint(hint, idents)
    assert (t, k) == (term, kind)
    assert [x for x in c if x != "id" and x != "gender"] == concepts


def test_split_evidence_drops_empty_pieces():
    assert ewbird.split_evidence(" a refers to b ;; ; c = 1;") == ["a refers to b", "c = 1"]
    assert ewbird.split_evidence("") == [] and ewbird.split_evidence(None) == []


def test_llm_filter_keeps_rows_the_evidence_helps(shared_data, scripted):
    rows = [r for r in json.loads((shared_data / ewbird.DEV).read_text()) if r["db_id"] == "superhero"][:8]
    gold_by_question = {r["question"]: r["sql"] for r in rows}
    helped = {r["question"] for r in rows[::2]}  # evidence lets member "a" solve every other row

    def responder(req):
        prompt = req.messages[-1]["content"]
        question = prompt.split("## Text-to-SQL Question:\n", 1)[1].split("\n\n", 1)[0]
        if req.model.split("/")[-1] == "a" and "## External Knowledge:" in prompt and question in helped:
            return json_reply({"reasoning": "r", "output": gold_by_question[question]})
        return json_reply({"reasoning": "r", "output": "SELECT 'nope'"})

    scripted.responder = responder
    council = Council(
        "solvers", [scripted_member("a", max_tokens=400), scripted_member("b", max_tokens=400)], call_log()
    )

    def factory(role):
        if role != "solvers":
            raise KeyError(role)
        return council

    res = ewbird.build(shared_data, council_factory=factory, db_ids=["superhero"], max_rows=8)
    kept = {r.spec.user_query for r in res.records}
    with_evidence = {r["question"] for r in rows}
    assert kept == helped & with_evidence
    assert all(r.provenance.filter_outcomes["benefit_members"] == ["a"] for r in res.records)
    dropped = [r for r in res.rejects if r.stage == "llm_filter"]
    assert len(dropped) == len(with_evidence - helped)
    assert res.stats["filter_calls"] == 4 * res.stats["executable_rows"]
    again = ewbird.build(shared_data, council_factory=factory, db_ids=["superhero"], max_rows=8)
    assert again.stats["filter_cached"] == again.stats["filter_calls"]  # the council cache answers reruns


def test_missing_solvers_role_is_reported_not_silent(shared_data):
    def factory(role):
        raise KeyError(role)

    res = ewbird.build(shared_data, council_factory=factory, db_ids=["superhero"], max_rows=4)
    (step,) = [s for s in res.skipped if s.step == "llm keep/drop filter"]
    assert "no `solvers` role" in step.reason
    assert all(r.provenance.filter_outcomes["llm_filter"] == "not run" for r in res.records)
