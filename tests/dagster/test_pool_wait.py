"""A run waiting for a pool slot sleeps until its next claim check (assets/shared/pool_wait.py)
instead of Dagster 1.13's spin, which returned a non-positive interval whatever the timeouts."""

import time
from types import SimpleNamespace

from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext


def _context(pending, timeouts):
    return SimpleNamespace(_pending_claims=set(pending), _pending_timeouts=dict(timeouts))


def test_the_definitions_install_the_sleeping_interval():
    import assets.definitions  # noqa: F401 - installs it

    # lazy: imports dagster (~1 s); only the tests that need it pay
    from assets.shared.pool_wait import interval_to_next_pending_claim_check

    assert InstanceConcurrencyContext.interval_to_next_pending_claim_check is interval_to_next_pending_claim_check


def test_it_sleeps_until_the_earliest_pending_claim_and_never_past_a_due_one():
    # lazy: imports dagster (~1 s); only the tests that need it pay
    from assets.shared.pool_wait import interval_to_next_pending_claim_check as interval

    now = time.time()
    assert 4.0 < interval(_context({"a", "b"}, {"a": now + 5, "b": now + 9})) <= 5.0
    assert interval(_context({"a", "b"}, {"a": now - 1, "b": now + 9})) == 0.0  # one is due: claim it now
    assert interval(_context({"a", "b"}, {"a": now + 5})) == 0.0  # "b" not tried yet
    assert interval(_context(set(), {})) == 0.0
