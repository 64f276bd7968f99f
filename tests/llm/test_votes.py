"""Vote rules: strict majority (tie → reject), unanimous, plurality tie rules, short-circuit."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resources.llm.votes import decide, is_decided, min_more_votes


@pytest.mark.parametrize(
    "votes, abstain_as_no, expected",
    [
        ([True, True, False], False, True),
        ([True, False], False, False),  # tie rejects
        ([True, False, None], False, False),  # tie (abstention ignored) rejects
        ([True, None, None], False, True),  # abstentions ignored: 1 yes vs 0 no
        ([True, None, None], True, False),  # abstentions as No: 1 vs 2
        ([None, None, None], False, False),  # nobody voted: reject
        ([], False, False),
        ([False, False, True], False, False),
    ],
)
def test_strict_majority(votes, abstain_as_no, expected):
    t = decide(votes, "strict_majority", abstain_as_no=abstain_as_no)
    assert t.decision is expected
    assert t.abstentions == votes.count(None)
    assert t.counts[True] == votes.count(True) and t.counts[False] == votes.count(False)


def test_unanimous():
    assert decide([True, True, True], "unanimous").decision is True
    assert decide([True, False, True], "unanimous").decision is False
    assert decide([True, None], "unanimous").decision is True
    assert decide([True, None], "unanimous", abstain_as_no=True).decision is False
    assert decide([None], "unanimous").decision is False


def test_plurality_and_tie_rules():
    assert decide(["a", "b", "a"], "plurality").decision == "a"
    assert decide(["a", "b"], "plurality").decision is None  # tie → reject by default
    assert decide(["b", "a", "a", "b"], "plurality", tie="first").decision == "b"
    assert decide(["a", "b"], "plurality", tie=["b", "a"]).decision == "b"
    assert decide(["a", "b"], "plurality", tie=["c"]).decision is None
    assert decide([None, None], "plurality").decision is None
    t = decide(["a", None, "b", "b"], "plurality")
    assert t.decision == "b" and t.abstentions == 1 and t.counts == {"a": 1, "b": 2}


def test_rule_errors_are_clear():
    with pytest.raises(ValueError, match="unknown vote rule"):
        decide([True], "mostly")
    with pytest.raises(ValueError, match="True/False/None"):
        decide(["yes"], "strict_majority")
    with pytest.raises(ValueError, match="tie rule"):
        decide(["a", "b"], "plurality", tie="coin")


def test_short_circuit_three_members():
    # Two agreeing votes of three decide a strict majority; one does not.
    assert is_decided([True, True], 1)
    assert is_decided([False, False], 1)
    assert not is_decided([True], 2)
    assert not is_decided([True, False], 1)
    assert min_more_votes([], 3) == 2  # ask two members first
    assert min_more_votes([True, False], 1) == 1
    assert min_more_votes([True, True], 1) == 0
    # unanimous stops at the first "no"
    assert is_decided([False], 4, "unanimous")
    assert min_more_votes([], 4, "unanimous") == 1


def _brute_force_decided(votes, n_remaining, rule, abstain_as_no, tie, labels):
    current = decide(list(votes) + [None] * n_remaining, rule, abstain_as_no=abstain_as_no, tie=tie).decision
    options = labels + [None]
    return all(
        decide(list(votes) + list(extra), rule, abstain_as_no=abstain_as_no, tie=tie).decision == current
        for extra in itertools.product(options, repeat=n_remaining)
    )


@settings(max_examples=300, deadline=None)
@given(
    votes=st.lists(st.sampled_from([True, False, None]), max_size=5),
    n_remaining=st.integers(0, 4),
    rule=st.sampled_from(["strict_majority", "unanimous"]),
    abstain_as_no=st.booleans(),
)
def test_yes_no_short_circuit_matches_brute_force(votes, n_remaining, rule, abstain_as_no):
    expected = _brute_force_decided(votes, n_remaining, rule, abstain_as_no, "reject", [True, False])
    assert is_decided(votes, n_remaining, rule, abstain_as_no=abstain_as_no) == expected


@settings(max_examples=300, deadline=None)
@given(
    votes=st.lists(st.sampled_from(["a", "b", "c", None]), max_size=5),
    n_remaining=st.integers(0, 3),
    tie=st.sampled_from(["reject", "first", ("b", "a"), ("z",)]),
)
def test_plurality_short_circuit_matches_brute_force(votes, n_remaining, tie):
    # "d" stands for a label nobody has voted for yet.
    expected = _brute_force_decided(votes, n_remaining, "plurality", False, tie, ["a", "b", "c", "d", "z"])
    assert is_decided(votes, n_remaining, "plurality", tie=tie) == expected


@settings(max_examples=200, deadline=None)
@given(
    votes=st.lists(st.sampled_from([True, False, None]), max_size=4),
    n_remaining=st.integers(0, 4),
    abstain_as_no=st.booleans(),
)
def test_min_more_votes_is_a_tight_lower_bound(votes, n_remaining, abstain_as_no):
    k = min_more_votes(votes, n_remaining, abstain_as_no=abstain_as_no)
    # No sequence of fewer than k votes decides the outcome ...
    for j in range(k):
        for extra in itertools.product([True, False, None], repeat=j):
            assert not is_decided(list(votes) + list(extra), n_remaining - j, abstain_as_no=abstain_as_no)
    # ... and some sequence of exactly k votes does (k == n_remaining always decides).
    assert any(
        is_decided(list(votes) + list(extra), n_remaining - k, abstain_as_no=abstain_as_no)
        for extra in itertools.product([True, False, None], repeat=k)
    )
