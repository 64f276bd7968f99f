"""#39, held out: 40 gold/predicted pairs on movie and medical written *blind* by a second engineer
(from SQL semantics, without seeing the judge's code), each with its label and why
(tests/fixtures/aisql_blind_pairs.jsonl). Judged through the domain entry point
(:func:`pipelines.aisql.judging.judge_pairs`, the one ``quandary aisql evaluate`` uses) on the real
SemBench data, label oracle without noise: every decided verdict agrees with its label; the coverage
is printed (and kept above a floor, so a layer silently switched off shows)."""

import json
from pathlib import Path

import pytest

from pipelines.aisql.compare import ACCEPT, BOUNDED, UNDECIDED, WITNESS
from pipelines.aisql.judging import PairToJudge, judge_pairs, open_judging
from pipelines.aisql.pipeline import AisqlSettings, prepare_db

FIXTURE = Path(__file__).parents[1] / "fixtures" / "aisql_blind_pairs.jsonl"
PAIRS = [json.loads(line) for line in FIXTURE.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def judged(sembench_root, tmp_path_factory):
    home = tmp_path_factory.mktemp("blind")
    out = {}
    for scenario in ("movie", "medical"):
        pairs = [p for p in PAIRS if p["scenario"] == scenario]
        judging = open_judging(AisqlSettings(flip_rate=0.0), prepare_db(scenario, sembench_root, home))
        try:
            todo = [PairToJudge(p["id"], p["gold_sql"], p["predicted_sql"], p["dialect"]) for p in pairs]
            done = judge_pairs(judging, todo, ("ex", "layers"))
        finally:
            judging.close()
        out.update({p["id"]: (p, r) for p, (r, _) in zip(pairs, done)})
    return out


def test_the_fixture_is_the_blind_set():
    assert len(PAIRS) == 40 and len({p["id"] for p in PAIRS}) == 40
    assert sum(p["label"] for p in PAIRS) == 20
    assert all(p["why"] and "blind" in p["source"] for p in PAIRS)


def test_every_decided_verdict_agrees_with_its_label(judged):
    wrong = [
        (p["id"], r.final, r.verdict_class, r.layer("structural").reason[:200])
        for p, r in judged.values()
        if r.final != UNDECIDED and (r.final == ACCEPT) != p["label"]
    ]
    decided = [p["id"] for p, r in judged.values() if r.final != UNDECIDED]
    undecided = sorted(set(judged) - set(decided))
    print(f"\nblind set: {len(decided)}/{len(judged)} decided, {len(wrong)} wrong; undecided: {undecided}")
    assert not wrong, wrong
    assert len(decided) >= 37, undecided  # 40 when written (a solver budget may run out on a loaded machine)


@pytest.mark.parametrize(
    "pair_id,verdict_class,method",
    [
        ("blind-14", WITNESS, "verifier"),  # AI.IF over a NULL-extended row may answer TRUE
        ("blind-31", WITNESS, "verifier"),  # symptom_id is no declared key: it may be NULL
        ("blind-24", BOUNDED, "verifier"),  # COUNTIF is 0 over no rows in BigQuery, as SUM(CASE ..)
    ],
)
def test_the_three_the_first_round_got_wrong(judged, pair_id, verdict_class, method):
    _, r = judged[pair_id]
    stored = r.evidence.to_dict()["structural"]
    assert r.verdict_class == verdict_class and stored["method"] == method, r.layer("structural").reason
