"""The deterministic matchers and the LLM credit scorer on hand-written cases (spec §4.1, §4.2)."""

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.ambitab.protocol.matchers import (
    REFUSAL,
    match_intent,
    match_knowledge,
    parse_action,
    score_credit,
)
from pipelines.ambitab.protocol.metrics import episode_scores
from pipelines.ambitab.protocol.oracles import DeterministicIntentOracle, is_refusal
from pipelines.ambitab.protocol.text import norm, quoted_spans
from pipelines.ambitab.record import Ambiguity
from tests.ambitab.records import amb, task


def A(term, **kw):
    return Ambiguity.model_validate(amb(term, **kw))


AGE, SALARY = A("age"), A("salary")


def test_quoted_target_beats_an_earlier_mention():
    m = match_intent('Is age relevant, and what does "salary" mean?', [AGE, SALARY])
    assert m.ambiguity.term == "salary" and m.reason == "quoted"


def test_quoted_span_may_contain_the_name():
    m = match_intent("Regarding salary: what is 'the annual age cutoff'?", [AGE, SALARY])
    assert m.ambiguity.term == "age"


def test_apostrophes_are_not_quotes():
    assert quoted_spans("what's the salary's range") == []
    assert match_intent("What's the salary and the age?", [AGE, SALARY]).ambiguity.term == "salary"


def test_earliest_mention_wins():
    assert match_intent("What about salary, and then age?", [AGE, SALARY]).ambiguity.term == "salary"
    assert match_intent("What about age, and then salary?", [AGE, SALARY]).ambiguity.term == "age"


def test_plural_and_word_boundaries():
    employee = A("employee")
    assert match_intent("Which employees count?", [employee]).ambiguity is employee
    assert match_intent("Do the EMPLOYEE_IDs matter?", [employee]).ambiguity is employee  # '_' is a separator
    assert match_intent("Is employeeship relevant?", [employee]).ambiguity is None
    assert match_intent("Which countryside?", [A("country")]).ambiguity is None
    assert match_intent("Which boxes?", [A("box")]).ambiguity.term == "box"


def test_normalisation_of_separators_and_case():
    assert norm("  Age_Group-ID\t x ") == "age group id x"
    assert match_intent("what is the AGE-GROUP?", [A("age_group")]).ambiguity.term == "age_group"


def test_longest_match_at_equal_offset():
    age_group = A("age group")
    m = match_intent("By age group do you mean decades?", [AGE, age_group])
    assert m.ambiguity is age_group
    assert match_intent("By age do you mean years?", [AGE, age_group]).ambiguity is AGE


def test_alias_counts_as_a_name():
    rate = A("rate", aliases=["ratio"])
    assert match_intent("Which ratio?", [rate]).ambiguity is rate


def test_tie_and_no_match_refuse():
    a1, a2 = A("rate", amb_id="x1"), A("rate", amb_id="x2")
    m = match_intent("What rate?", [a1, a2])
    assert m.ambiguity is None and m.reason == "tie"
    m = match_intent("Could you clarify what you want?", [AGE, SALARY])
    assert m.ambiguity is None and m.reason == "no_match"


def test_non_counted_ambiguities_are_never_credited():
    order = A("order", kind="non_critical")
    assert match_intent("In which order?", [order]).ambiguity is None


async def _ask(t, questions):
    oracle = DeterministicIntentOracle()
    resolved, replies = set(), []
    for q in questions:
        r = await oracle.reply(t, q, frozenset(resolved))
        resolved |= set(r.credited)
        replies.append(r)
    return replies


def test_repeats_get_the_same_text_and_no_new_credit():
    t = task([amb("age", "Age in whole years."), amb("salary", "Gross salary.")])
    replies = asyncio.run(_ask(t, ["What age?", "Again, which age?", "And salary?", "Hm?"]))
    assert [r.response for r in replies] == ["Age in whole years.", "Age in whole years.", "Gross salary.", REFUSAL]
    s = episode_scores(2, [r.credited for r in replies])
    assert (s.recall, s.precision, s.productive) == (1.0, 0.5, 2)


def test_repeat_variant_answers_already_answered():
    t = task([amb("age", "Age in whole years.")])

    async def go():
        o = DeterministicIntentOracle(answer_repeats=True)
        first = await o.reply(t, "age?", frozenset())
        second = await o.reply(t, "age?", frozenset(first.credited))
        return first, second

    first, second = asyncio.run(go())
    assert first.response == "Age in whole years." and second.response == "That ambiguity was already answered."


def test_knowledge_matcher_scores_terms_then_concepts_and_prefers_unresolved():
    k1 = A("eye colour", kind="knowledge", concepts=["colour id", "eye"], amb_id="k1")
    k2 = A("tall", kind="knowledge", concepts=["height cm"], amb_id="k2")
    k3 = A("hero", kind="knowledge", concepts=["eye", "colour id"], amb_id="k3")
    assert match_knowledge("What is tall?", [k1, k2, k3]).ambiguity is k2  # term hit: score 3
    # concepts only: k1 and k3 both score 2; annotation order, then unresolved first
    assert match_knowledge("Which eye, which colour id?", [k1, k2, k3]).ambiguity is k1
    assert match_knowledge("Which eye, which colour id?", [k1, k2, k3], resolved={"k1"}).ambiguity is k3
    assert match_knowledge("Which height cm and eye?", [k1, k2, k3]).reason == "score=1"
    assert match_knowledge("Anything else?", [k1, k2, k3]).ambiguity is None


def test_knowledge_matcher_restates_a_resolved_term_hit():
    k1 = A("tall", kind="knowledge", amb_id="k1")
    assert match_knowledge("tall again?", [k1], resolved={"k1"}).ambiguity is k1


def test_parse_action_forms():
    assert parse_action('labeled("age group")') == ("labeled", "age group")
    assert parse_action("**labeled('x')**") == ("labeled", "x")
    assert parse_action("unanswerable()") == ("unanswerable", "")
    assert parse_action('unlabeled("WHERE a > 1")') == ("unlabeled", "WHERE a > 1")
    assert parse_action("I think it is about age")[0] == "unknown"


def test_credit_scorer():
    ambs = [AGE, SALARY, A("order", kind="non_critical")]
    assert score_credit('labeled("salary")', ["what about age?"], ambs).ambiguity is SALARY
    assert score_credit("unanswerable()", ["what about age?"], ambs).ambiguity is None
    # no exact label: earliest substring hit in the question, then the later texts
    assert score_credit('labeled("pay")', ["salary or age?"], ambs).ambiguity is SALARY
    assert score_credit('unlabeled("x")', ["please elaborate", "It is the age in years"], ambs).ambiguity is AGE
    assert score_credit('labeled("order")', ["in which order?"], ambs).ambiguity is None


def test_refusal_detection():
    assert is_refusal(REFUSAL) and is_refusal(
        "Sorry, this question is out of scope, so I can not answer your question."
    )
    assert not is_refusal("Age in whole years.")


_words = st.sampled_from(["age", "group", "salary", "the", "of", "'", '"', "`", "s", "-", "_", "“", "”", "ages"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_words, max_size=14).map(" ".join))
def test_fuzz_intent_matcher_credits_only_named_ambiguities(question):
    ambs = [AGE, SALARY, A("age group")]
    m = match_intent(question, ambs)
    if m.ambiguity is not None:
        assert any(n in norm(question) for n in m.ambiguity.names)
    assert match_knowledge(question, ambs).ambiguity in (None, *ambs)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_fuzz_parse_action_never_raises(text):
    kind, arg = parse_action(text)
    assert kind in ("labeled", "unlabeled", "unanswerable", "unknown")
    assert score_credit(text, [text], [AGE]).ambiguity in (None, AGE)
