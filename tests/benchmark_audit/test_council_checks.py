"""The council's checks reuse the cascade's stages on a real SQLite file with a scripted council; a
failed or unreadable answer never becomes a flag."""

import pytest

from pipelines.abiss.stages import StageContext
from pipelines.benchmark_audit.council_checks import council_verdicts
from pipelines.benchmark_audit.records import Item
from pipelines.benchmark_audit.verdicts import FLAG, PASS, UNDECIDED
from pipelines.sqltools.schema_context import render_schema_context
from resources.catalog import inspect_database
from resources.llm.failures import ProviderUnavailable
from tests.abiss.cascade_helpers import GARBAGE, Script, council

GOLD = "SELECT count(*) FROM product WHERE category = 'Fruit'"
ITEMS = [
    Item(0, "shop", "How many fruits are there?", GOLD, "fruit refers to category = 'Fruit'"),
    Item(1, "shop", "How many products are there?", "SELECT count(*) FROM product"),
]


@pytest.fixture
def make_ctx(shop_dbs):
    db = shop_dbs / "shop" / "shop.sqlite"
    schema = render_schema_context(inspect_database(db))

    def make() -> StageContext:
        return StageContext(str(db), schema, council())

    return make


def _by(verdicts):
    return {(v.item_index, v.check): v for v in verdicts}


def test_a_majority_no_flags_the_gold(scripted, make_ctx):
    scripted.responder = Script(ground_truth=lambda m, t: {"verdict": "no", "reason": "wrong"})
    got = _by(council_verdicts(ITEMS, "d" * 64, make_ctx(), ["council_gold_unsatisfying"]))
    assert {k: v.verdict for k, v in got.items()} == {
        (0, "council_gold_unsatisfying"): FLAG,
        (1, "council_gold_unsatisfying"): FLAG,
    }
    votes = got[(0, "council_gold_unsatisfying")].votes
    assert len(votes) == 2 and all(v["vote"] == "no" and v["llm_call_id"] for v in votes)  # short-circuit: 2 of 3
    assert got[(0, "council_gold_unsatisfying")].error_type == "E1"


def test_unreadable_answers_are_never_a_flag_and_fail_the_step_naming_the_members(scripted, make_ctx):
    # member a says no, b and c answer garbage: an unreadable answer is a failed call, never a vote
    # (#34 item 2), and a member with no usable answer fails the step by name; nothing is flagged
    scripted.responder = Script(ground_truth=lambda m, t: {"verdict": "no"} if m == "a" else GARBAGE)
    ctx = make_ctx()
    ctx.max_unparseable_share = 1.0
    with pytest.raises(ProviderUnavailable, match=r"no usable answer: b \(1 of 1\), c \(1 of 1\)"):
        council_verdicts(ITEMS[:1], "d" * 64, ctx, ["council_gold_unsatisfying"])
    scripted.responder = Script(write_sql=lambda m, t: GARBAGE)
    with pytest.raises(ProviderUnavailable, match="no usable answer"):
        council_verdicts(ITEMS[:1], "d" * 64, ctx, ["council_rewrites_differ"])


def test_evidence_unneeded_only_for_items_with_evidence(scripted, make_ctx):
    scripted.responder = Script(write_sql=lambda m, t: {"sql": GOLD})
    got = council_verdicts(ITEMS, "d" * 64, make_ctx(), ["council_evidence_unneeded"])
    assert [(v.item_index, v.verdict, v.error_type) for v in got] == [(0, FLAG, "E3")]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"sql": GOLD}, PASS),
        ({"sql": "SELECT 1"}, FLAG),
        ({"sql": "SELECT nope FROM x"}, UNDECIDED),
    ],
)
def test_rewrites_that_differ_flag_only_when_they_ran(scripted, make_ctx, answer, expected):
    scripted.responder = Script(write_sql=lambda m, t: answer)
    ctx = make_ctx()
    ctx.max_unparseable_share = 1.0
    got = council_verdicts(ITEMS[:1], "d" * 64, ctx, ["council_rewrites_differ"])
    assert [(v.verdict, v.error_type) for v in got] == [(expected, "E4")]


def _verifier(text: str):
    """Probe once (the product count), then say no."""
    if "Probes so far:\nnone" in text:
        return {"verdict": "continue", "probe_sql": "SELECT count(*) FROM product"}
    return {"verdict": "no", "reason": "the count shows otherwise"}


def test_verifier_probes_before_it_votes_and_keeps_every_probe(scripted, make_ctx):
    scripted.responder = Script(other=lambda m, t: _verifier(t))
    (v,) = council_verdicts(ITEMS[:1], "d" * 64, make_ctx(), ["council_verifier"], max_probes=2)
    assert (v.verdict, v.error_type) == (FLAG, "E1")
    for vote in v.votes:
        assert vote["vote"] == "no" and len(vote["call_ids"]) == 2
        assert (
            vote["probes"][0]["sql"] == "SELECT count(*) FROM product"
            and '"first": [[5]]' in vote["probes"][0]["result"]
        )
    assert "3 probe(s)" in v.reason


@pytest.mark.parametrize(
    "answer", [{"verdict": "continue", "probe_sql": "SELECT 1"}, GARBAGE], ids=["budget spent", "unreadable"]
)
def test_verifier_without_a_verdict_is_undecided(scripted, make_ctx, answer):
    scripted.responder = Script(other=lambda m, t: answer)
    ctx = make_ctx()
    ctx.max_unparseable_share = 1.0
    (v,) = council_verdicts(ITEMS[:1], "d" * 64, ctx, ["council_verifier"], max_probes=1)
    assert v.verdict == UNDECIDED and all(vote["vote"] == "abstain" for vote in v.votes)
