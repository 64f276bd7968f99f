"""Issue 21 item 6: the call log's operations run on its own thread, and what queues up while one
batch runs goes in one transaction; an operation that fails gets its own error and the others
their own results (the batch is rolled back and run one by one)."""

import asyncio
import sqlite3
import threading

import pytest

from resources.llm.log_thread import run_in_log_thread
from storage.llm_log import CallLog, CallRecord


def _record(i: int) -> CallRecord:
    return CallRecord(
        call_id=f"k{i}",
        status="ok",
        member="m",
        model="openai/stub",
        request={"i": i},
        raw_response='{"verdict": "yes"}',
        parsed={"verdict": "yes"},
    )


def _fail():
    raise sqlite3.OperationalError("scripted failure")


def _run_batch(log, ops):
    """Run ``ops`` ((fn, *args) tuples) on the log's thread while it is busy with a first
    operation, so they queue up and form one batch. Returns their outcomes (errors as values)."""
    started, gate = threading.Event(), threading.Event()

    def hold():
        started.set()
        assert gate.wait(60), "the test never released the log thread"

    async def main():
        loop = asyncio.get_running_loop()
        first = asyncio.ensure_future(run_in_log_thread(log, hold))
        assert await loop.run_in_executor(None, started.wait, 60)
        queued = [asyncio.ensure_future(run_in_log_thread(log, fn, *args)) for fn, *args in ops]
        await asyncio.sleep(0)  # every operation is queued before the thread is let go
        gate.set()
        await first
        return await asyncio.gather(*queued, return_exceptions=True)

    return asyncio.run(main())


@pytest.fixture
def counted_log(tmp_path):
    log = CallLog(tmp_path / "calls.sqlite")
    real = log.transaction
    log.transactions = 0

    def counted():
        log.transactions += 1
        return real()

    log.transaction = counted
    return log


def test_operations_queued_together_share_one_transaction(counted_log):
    log = counted_log
    ops = [(log.claim, f"k{i}", "m", "openai/stub", 60.0) for i in range(5)] + [
        (log.record, _record(i)) for i in range(5)
    ]
    outcomes = _run_batch(log, ops)
    assert outcomes[:5] == ["claimed"] * 5 and outcomes[5:] == [None] * 5
    assert log.transactions == 1
    assert [log.get(f"k{i}").status for i in range(5)] == ["ok"] * 5


def test_a_failing_operation_gets_its_error_and_the_others_their_results(counted_log):
    log = counted_log
    ops = [(log.record, _record(1)), (_fail,), (log.record, _record(2)), (log.lookup, "k1")]
    outcomes = _run_batch(log, ops)
    assert outcomes[0] is None and outcomes[2] is None
    assert isinstance(outcomes[1], sqlite3.OperationalError) and "scripted failure" in str(outcomes[1])
    assert outcomes[3] is not None and outcomes[3].call_id == "k1"  # saw the record before it in the batch
    assert log.get("k1").status == "ok" and log.get("k2").status == "ok"  # written, though the batch rolled back
    assert log.get("k1").cache_hits == 1  # the lookup counted once, not once per try


def test_a_log_without_transactions_runs_operations_one_by_one():
    class PlainLog:  # another backend: no transaction()
        def __init__(self):
            self.seen = []

        def op(self, x):
            self.seen.append(x)
            return x * 2

    log = PlainLog()
    assert _run_batch(log, [(log.op, i) for i in range(4)]) == [0, 2, 4, 6]
    assert log.seen == [0, 1, 2, 3]
