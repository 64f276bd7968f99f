"""One way for tests to wait for something that has no event to wait on (a server coming up, a
file another process writes): poll a check until it holds, under a deadline sized for a loaded
2-core machine. The poll interval is not a guess at how long the thing takes; the deadline is."""

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


def wait_until(
    check: Callable[[], T],
    timeout_s: float,
    what: str,
    *,
    alive: Callable[[], bool] | None = None,
    interval_s: float = 0.2,
) -> T:
    """The first truthy ``check()``; fails the test naming ``what`` when ``timeout_s`` passes or
    ``alive()`` turns false (the process that should make it happen has died)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout_s:g} s")
        if alive is not None and not alive():
            pytest.fail(f"{what}: the process that should do it has exited")
        time.sleep(interval_s)  # poll interval under the deadline above
