"""The call log's own thread: the council's log operations (lookup, claim, record) run there, in
batches (issue 21 item 6).

Why: with the HTTP client fast, the call log was half of a call's client CPU (~0.4 ms: a lookup, a
claim and a record, two commits, three wake-ups of the event loop, and connections of one process
contending for SQLite's write lock, whose busy handler sleeps milliseconds). Here one thread per log
and process takes everything queued while its previous batch ran, runs it in one transaction (one
commit: ``CallLog.transaction``) and wakes each waiting event loop once per batch. If an operation
of a batch raises, the batch is rolled back and its operations run again one at a time, so each
result or error is exactly what that operation alone gives. A log without ``transaction`` (another
backend) runs them one at a time.

    result = await run_in_log_thread(log, log.claim, key, member, model, stale_after)
"""

import asyncio
import contextlib
import threading
import weakref
from collections import deque

IDLE_EXIT_S = 30.0  # a log thread with nothing to do ends (a new one starts on the next operation)
MAX_BATCH = 256


class _LogThread:
    def __init__(self, log):
        self._log = weakref.ref(log)  # the registry, not this thread, keeps a log alive
        self._queue: deque = deque()
        self._cv = threading.Condition()
        self._running = False

    def submit(self, item) -> None:
        with self._cv:
            self._queue.append(item)
            if not self._running:
                self._running = True
                threading.Thread(target=self._work, name="quandary-llm-log", daemon=True).start()
            else:
                self._cv.notify()

    def _work(self) -> None:
        while True:
            with self._cv:
                if not self._queue:
                    self._cv.wait(IDLE_EXIT_S)
                if not self._queue:
                    self._running = False
                    return
                batch = [self._queue.popleft() for _ in range(min(MAX_BATCH, len(self._queue)))]
            outcomes = self._run(batch)
            by_loop: dict = {}
            for (_fn, _args, loop, fut), outcome in zip(batch, outcomes):
                by_loop.setdefault(loop, []).append((fut, outcome))
            for loop, done in by_loop.items():
                with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
                    loop.call_soon_threadsafe(_deliver, done)

    def _run(self, batch) -> list:
        log = self._log()
        transaction = getattr(log, "transaction", None)
        if transaction is not None and len(batch) > 1:
            try:
                with transaction():
                    return [(True, fn(*args)) for fn, args, _loop, _fut in batch]
            except Exception:  # noqa: BLE001 - rolled back: run them one by one for their own outcome
                pass
        return [_outcome(fn, args) for fn, args, _loop, _fut in batch]


def _outcome(fn, args) -> tuple:
    try:
        return True, fn(*args)
    except Exception as exc:  # noqa: BLE001 - handed to the waiting coroutine
        return False, exc


def _deliver(done) -> None:
    for fut, (ok, value) in done:
        if fut.cancelled():
            continue
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)


_threads: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_threads_lock = threading.Lock()


async def run_in_log_thread(log, fn, *args):
    """``fn(*args)`` on ``log``'s thread, batched with the operations queued beside it."""
    worker = _threads.get(log)
    if worker is None:
        with _threads_lock:
            worker = _threads.get(log)
            if worker is None:
                worker = _threads[log] = _LogThread(log)
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    worker.submit((fn, args, loop, fut))
    return await fut
