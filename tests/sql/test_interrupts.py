"""Interrupts stay interrupts wherever they land: in a thread pool waiting on council calls, and
inside a DuckDB UDF (which DuckDB would turn into an ordinary query error)."""

import asyncio
import threading

import duckdb
import pytest

from resources.llm import runtime
from resources.sql import keeps_interrupts, run_duckdb_statement

pytestmark = pytest.mark.integration  # real processes, servers or files under stress


def test_call_threads_unwinds_waiting_threads_on_interrupt():
    """Eight threads wait on calls that would take an hour; an interrupt in the body ends the pool
    at once, and the waiting threads see CallsStopped (not an Exception a stage could swallow)."""
    started = threading.Barrier(9)
    seen: list[str] = []

    async def hour_long_call():
        await asyncio.sleep(3600)

    def worker(_):
        started.wait(60)
        try:
            runtime.run_sync(hour_long_call())
        except runtime.CallsStopped:
            seen.append("stopped")
            raise
        except Exception:  # noqa: BLE001 - what a stage would do with an ordinary error
            seen.append("swallowed")

    done = threading.Event()

    def body():
        with pytest.raises(KeyboardInterrupt):
            with runtime.call_threads(8) as pool:
                futures = [pool.submit(worker, i) for i in range(8)]
                started.wait(60)
                raise KeyboardInterrupt
        done.set()
        assert all(f.done() for f in futures)

    t = threading.Thread(target=body)
    t.start()
    assert done.wait(60), "the pool waited for the hour-long calls"
    t.join(60)
    assert seen == ["stopped"] * 8
    assert runtime.run_sync(asyncio.sleep(0, result=7)) == 7  # the next run's calls are served again


def test_a_failing_body_stops_the_other_threads_too():
    async def slow():
        await asyncio.sleep(3600)

    with pytest.raises(ValueError):
        with runtime.call_threads(2) as pool:
            pool.submit(runtime.run_sync, slow())
            raise ValueError("one conversation failed")


def test_interrupt_inside_a_duckdb_udf_is_reraised_not_a_failed_query():
    con = duckdb.connect()

    def stop(x):
        raise KeyboardInterrupt

    con.create_function("stop_here", keeps_interrupts(stop), ["BIGINT"], "BIGINT")
    with pytest.raises(KeyboardInterrupt):
        run_duckdb_statement(con, "SELECT stop_here(i) FROM range(3) t(i)", 10, 100, 10**6)
    # an ordinary UDF error is still one failed query
    con.create_function("fail_here", keeps_interrupts(lambda x: 1 // 0), ["BIGINT"], "BIGINT")
    outcome = run_duckdb_statement(con, "SELECT fail_here(1)", 10, 100, 10**6)
    assert not outcome.ok and "ZeroDivisionError" in outcome.message
