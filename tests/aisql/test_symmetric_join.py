"""#39 item 3: "a symmetric NLjoin prompt may swap inputs only when the judge can say why". A candidate
that gives the gold's AI join call its two inputs in the other order is one call with the gold's only
when the prompt states a symmetric relation by the stated rule (pipelines/aisql/symmetry.py), and every
verdict reached so says so; otherwise they stay different calls: a witness or cannot decide, never an
accept. Real SemBench movie queries (Q5-Q7, both dialects) and self-joins on the medical data, label
oracle without noise, through the entry point `aisql compare` / `aisql evaluate` use."""

import pytest

from pipelines.aisql.compare import ACCEPT, PROOF
from pipelines.aisql.symmetry import SWAP_NOTE, symmetric_relation
from tests.aisql.conftest import judge_cases, movie_query

SAME = "these two movie reviews express the same sentiment - either both are positive or both are negative"
OPPOSITE = "these two movie reviews express opposite sentiments - one is positive and the other is negative"
ORDERED = "the first review is more positive than the second"


@pytest.mark.parametrize(
    "prompt,why",
    [
        (SAME, "the same"),
        (OPPOSITE, "opposite"),
        ("These two patients have the same disease. Patient 1: , Patient 2:", "the same"),
        ("the two symptom descriptions are similar to each other", "similar"),
        ("either both reviews are positive or both are negative", "both reviews are positive or both"),
        (ORDERED, None),  # an order: "first", "than"
        ("the second review answers the first with the same sentiment", None),  # ordered despite "the same"
        ("review A is a reply to review B", None),  # no symmetric wording: not shown symmetric
        ("patient 1 is older than patient 2 and has the same disease", None),
    ],
)
def test_the_symmetry_rule(prompt, why):
    assert symmetric_relation(prompt) == why


def _swap_t(sql: str) -> str:
    return sql.replace("NLjoin(R1.reviewText, R2.reviewText", "NLjoin(R2.reviewText, R1.reviewText")


def _swap_b(sql: str) -> str:
    return sql.replace(
        "', r1.reviewText, ', Review 2: ', r2.reviewText", "', r2.reviewText, ', Review 2: ', r1.reviewText"
    )


ST = "FROM medical_dataset.symptoms_texts AS s1 JOIN medical_dataset.symptoms_texts AS s2 ON s1.patient_id < s2.patient_id"


def _med(prompt: str, first: str, second: str) -> str:
    return (
        f"SELECT s1.patient_id, s2.patient_id {ST} WHERE "
        f"AI.IF(('{prompt} Patient 1: ', {first}.symptoms, ', Patient 2: ', {second}.symptoms))"
    )


MED_SAME = "These two patients have the same disease."
MED_OLDER = "Patient 1 is older than patient 2."


@pytest.fixture(scope="module")
def movie_cases(sembench_root):
    q = {(d, n): movie_query(sembench_root, d, n) for d in ("thalamusdb", "bigquery") for n in ("Q5", "Q6", "Q7")}
    ordered_t = q["thalamusdb", "Q7"].replace(OPPOSITE, ORDERED)
    # (id, gold, candidate, dialect, symmetric swap)
    return [
        ("Q5-thalamusdb", q["thalamusdb", "Q5"], _swap_t(q["thalamusdb", "Q5"]), "thalamusdb", True),
        ("Q6-thalamusdb", q["thalamusdb", "Q6"], _swap_t(q["thalamusdb", "Q6"]), "thalamusdb", True),
        ("Q7-thalamusdb", q["thalamusdb", "Q7"], _swap_t(q["thalamusdb", "Q7"]), "thalamusdb", True),
        ("Q7-bigquery", q["bigquery", "Q7"], _swap_b(q["bigquery", "Q7"]), "bigquery", True),
        ("Q5-bigquery", q["bigquery", "Q5"], _swap_b(q["bigquery", "Q5"]), "bigquery", True),
        ("Q7-ordered-prompt", ordered_t, _swap_t(ordered_t), "thalamusdb", False),
    ]


def _judge(scenario, root, tmp, cases):
    return list(judge_cases(scenario, root, tmp, cases).values())


def _check(case, r):
    structural, ai = r.layer("structural").reason, r.layer("ai").reason
    if case[-1]:  # symmetric: one call, and the proof names the rule
        assert r.final == ACCEPT and r.verdict_class == PROOF, structural
        assert SWAP_NOTE in structural and "symmetric relation" in structural, structural
        assert "two inputs swapped" in ai and "symmetric relation" in ai, ai
    else:  # not shown symmetric: different calls, never an accept
        assert r.final != ACCEPT, structural
        assert r.layer("ai").verdict != ACCEPT and "cannot show the prompt symmetric" in ai, ai
        assert SWAP_NOTE not in structural


def test_movie_join_swaps(sembench_root, tmp_path_factory, movie_cases):
    results = _judge("movie", sembench_root, tmp_path_factory.mktemp("swap-movie"), movie_cases)
    for case, r in zip(movie_cases, results):
        _check(case, r)
    # the ordered prompt read as written: an AI behaviour with f(a, b) != f(b, a) tells them apart
    assert results[-1].final == "reject" and "only in gold" in results[-1].layer("structural").reason


def test_medical_self_join_swaps(sembench_root, tmp_path_factory):
    cases = [
        ("same-disease", _med(MED_SAME, "s1", "s2"), _med(MED_SAME, "s2", "s1"), "bigquery", True),
        ("older-than", _med(MED_OLDER, "s1", "s2"), _med(MED_OLDER, "s2", "s1"), "bigquery", False),
    ]
    for case, r in zip(cases, _judge("medical", sembench_root, tmp_path_factory.mktemp("swap-med"), cases)):
        _check(case, r)


def test_aliases_renamed_throughout_are_no_swap(sembench_root, tmp_path_factory):
    """R1 and R2 exchanged everywhere: the call binds the same rows; the structural layer proves it
    without the symmetric rule, so even an ordered prompt is the same call."""
    gold = movie_query(sembench_root, "thalamusdb", "Q7").replace(OPPOSITE, ORDERED)
    cand = gold.replace("R1", "Rx").replace("R2", "R1").replace("Rx", "R2")
    (r,) = _judge("movie", sembench_root, tmp_path_factory.mktemp("swap-alias"), [("alias", gold, cand, "thalamusdb")])
    assert r.final == ACCEPT and SWAP_NOTE not in r.layer("structural").reason, r.layer("structural").reason
