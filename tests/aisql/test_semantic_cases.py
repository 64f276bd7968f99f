"""#39: the hand-labelled cases on both scenarios (pipelines/aisql/semantic_cases.py) judged by the
deterministic layers on the real SemBench data, label oracle without noise: no decided verdict is
wrong, nothing equal only on this database is accepted, and the AI layer decides on what the calls
select. Plus the pieces: keys the data satisfies, kappa, the boolean reading of AI.GENERATE."""

import pytest

from pipelines.aisql.compare import (
    ACCEPT,
    BOUNDED,
    PROOF,
    REJECT,
    UNDECIDED,
    WITNESS,
    _bool_call_verdict,
    kappa,
)
from pipelines.aisql.diffs import _as_bool, bool_stats
from pipelines.aisql.judging import PairToJudge, judge_pairs, open_judging
from pipelines.aisql.pipeline import AisqlSettings, prepare_db
from pipelines.aisql.scenarios import get_scenario, satisfied_keys
from pipelines.aisql.semantic_cases import CASES


@pytest.fixture(scope="module")
def judged(sembench_root, tmp_path_factory):
    home = tmp_path_factory.mktemp("cases")
    out = {}
    for scenario in ("movie", "medical"):
        cases = [c for c in CASES if c.scenario == scenario]
        judging = open_judging(AisqlSettings(flip_rate=0.0), prepare_db(scenario, sembench_root, home))
        try:
            done = judge_pairs(
                judging, [PairToJudge(c.id, c.gold_sql, c.candidate_sql, c.dialect) for c in cases], ("ex", "layers")
            )
        finally:
            judging.close()
        out.update({c.id: (c, r) for c, (r, _) in zip(cases, done)})
    return out


def test_no_decided_verdict_is_wrong_and_most_are_decided(judged):
    wrong = [
        (c.id, r.final, r.verdict_class)
        for c, r in judged.values()
        if r.final != UNDECIDED and (r.final == ACCEPT) != c.equivalent
    ]
    assert not wrong, wrong
    decided = sum(1 for _, r in judged.values() if r.final != UNDECIDED)
    assert decided >= 0.8 * len(judged), decided


def test_an_accept_is_a_proof_and_a_reject_has_a_witness(judged):
    import json

    for c, r in judged.values():
        stored = json.loads(json.dumps(r.evidence.to_dict(), default=str))["structural"]  # as evaluate stores it
        if stored["method"] == "verifier" and stored["verdict"] == "differ":
            assert stored["witness"]["database"] and stored["witness"]["differ"], c.id
        if stored["method"] == "verifier" and stored["verdict"] == "equal":
            assert stored["witness"]["bounded_proof"]["rows_per_table"] == 3, c.id
        if r.final == ACCEPT:
            assert r.verdict_class in (PROOF, BOUNDED), (c.id, r.verdict_class)
        if r.final == REJECT:
            assert r.verdict_class == WITNESS, (c.id, r.verdict_class)


@pytest.mark.parametrize("case_id", ["medical-drop-adult-filter", "movie-between-vs-strict"])
def test_data_blind_differences_are_rejected_with_differing_rows(judged, case_id):
    c, r = judged[case_id]
    assert r.layer("ex").verdict == ACCEPT  # equal on the shipped data: EX cannot see it
    assert r.final == REJECT and "only in" in r.layer("structural").reason, r.layer("structural").reason


@pytest.mark.parametrize("case_id", ["medical-swap-reflux-ulcer", "medical-swap-dengue-malaria"])
def test_a_disease_swap_is_rejected_on_the_rows_it_selects(judged, case_id):
    c, r = judged[case_id]
    ai = r.layer("ai")
    assert ai.verdict == REJECT and "kappa" in ai.reason and "0 in common" in ai.reason, ai.reason


def test_generate_true_is_the_boolean_call_and_false_its_negation(judged):
    assert judged["medical-generate-true"][1].final == ACCEPT
    assert "read as booleans" in judged["medical-generate-true"][1].layer("ai").reason
    assert judged["medical-generate-false"][1].final == REJECT


def test_a_repeated_call_under_another_alias_is_not_a_missing_operator(judged):
    _, r = judged["movie-same-call-two-aliases"]
    assert r.layer("ai").verdict == ACCEPT and "repeats call 0" in r.layer("ai").reason
    assert r.final != REJECT


def test_keys_are_assumed_only_when_the_data_satisfies_them(sembench_root, tmp_path):
    movie = prepare_db("movie", sembench_root, tmp_path)
    assert satisfied_keys(movie.path, get_scenario("movie").key_columns()) == {}  # reviewId, Movies.id repeat
    medical = prepare_db("medical", sembench_root, tmp_path)
    keys = satisfied_keys(medical.path, get_scenario("medical").key_columns())
    assert keys["patients"] == ("patient_id",) and keys["symptoms_texts"] == ("symptom_id",)
    # ... but a key read off the data is no assumption of a proof: SemBench declares none (blind-31)
    for scenario, db in (("movie", movie), ("medical", medical)):
        assert get_scenario(scenario).key_columns(declared=True) == {}
        judging = open_judging(AisqlSettings(flip_rate=0.0), db)
        try:
            assert judging.ctx.unique_keys == {}
        finally:
            judging.close()


def test_kappa_counts_shared_negatives_for_nothing():
    rare_swap = [0, 4, 2, 94]  # both, gold only, candidate only, neither: 94 % raw agreement
    assert kappa(rare_swap) < 0.2
    assert _bool_call_verdict({"counts": rare_swap}, False)[0] == REJECT
    assert _bool_call_verdict({"counts": [6, 0, 0, 94]}, False)[0] == ACCEPT
    assert _bool_call_verdict({"counts": [6, 0, 0, 94]}, True)[0] == REJECT  # read with opposite polarity
    assert _bool_call_verdict({"counts": [0, 0, 0, 100]}, False)[0] == UNDECIDED  # no positive: cannot tell
    assert _bool_call_verdict({"counts": [1, 1, 0, 98]}, False)[0] == UNDECIDED  # too few selected
    stats = bool_stats([(_as_bool(True, "bool"), _as_bool(" true. ", "text")), (False, _as_bool("FALSE", "text"))])
    assert stats["counts"] == [1, 0, 0, 1]
