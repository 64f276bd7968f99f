"""A step's failure message reads the same whatever order its calls finished in (the council's
calls run concurrently; a message naming members in completion order differed between runs)."""

from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from resources.llm.failures import FailureClass, FailureTally


def outcome(member: str, failure: FailureClass | None):
    return SimpleNamespace(
        member=member,
        ok=failure is None,
        failure=failure.value if failure else None,
        error=f"{failure.value} at {member}" if failure else None,
        status="parse_failed" if failure is FailureClass.UNPARSEABLE else "error",
    )


CALLS = [
    outcome("b", FailureClass.UNPARSEABLE),
    outcome("a", FailureClass.UNPARSEABLE),
    outcome("c", FailureClass.TIMEOUT),
    outcome("c", None),
    outcome("d", FailureClass.UNPARSEABLE),
    outcome("d", FailureClass.TIMEOUT),
]


def tally(calls) -> FailureTally:
    t = FailureTally()
    for c in calls:
        t.add(c)
    return t


def test_members_with_no_usable_answer_are_named_by_name_not_by_finish_order():
    t = tally(CALLS)
    assert t.broken_members() == ["a", "b", "d"]
    assert "Members with no usable answer: a (1 of 1), b (1 of 1), d (2 of 2)." in t.message("s", unreadable=True)


@given(st.permutations(CALLS))
def test_the_message_does_not_depend_on_the_order_the_calls_finished(order):
    # the class's example line too: the least of its lines, not the first to finish
    assert tally(order).message("s", unreadable=True) == tally(CALLS).message("s", unreadable=True)
    assert tally(order).message("s") == tally(CALLS).message("s")
