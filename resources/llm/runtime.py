"""The council's event-loop runtime: one background asyncio loop that sync code hands its calls to.

Why a module of its own: LLM calls are async (litellm's HTTP clients), but stages, assets and the
CLI are plain synchronous code, often in threads. Everything that bridges the two worlds, and stops
that bridge cleanly when a run is interrupted, lives here; the council (``council.py``) only says
*what* to ask.

* :func:`run_sync` runs a coroutine on the background loop from any thread (even from inside a
  running event loop) and waits for it.
* :func:`call_threads` is a thread pool for work that waits on calls in several threads; if the body
  fails or is interrupted, waiting threads get :class:`CallsStopped` and calls in flight are
  cancelled instead of running on for minutes with nobody to read them.
* :func:`cancel_pending_calls` cancels what is still in flight (used at shutdown, e.g. before the
  embedded server stops).
* :func:`limiter` is a semaphore per (running loop, key): semaphores bind to the loop they are used in.
"""

import asyncio
import concurrent.futures
import threading
import weakref
from collections.abc import Hashable, Iterator
from contextlib import contextmanager

_limiters: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Hashable, asyncio.Semaphore]]" = (
    weakref.WeakKeyDictionary()
)
_limiters_lock = threading.Lock()


def limiter(key: Hashable, size: int) -> asyncio.Semaphore:
    """The semaphore of ``size`` slots for ``key`` on the running loop, shared by every caller of the
    process that passes the same key (e.g. all councils that use one member)."""
    loop = asyncio.get_running_loop()
    with _limiters_lock:
        per_loop = _limiters.setdefault(loop, {})
        sem = per_loop.get(key)
        if sem is None:
            sem = per_loop[key] = asyncio.Semaphore(size)
        return sem


_bg_loop: asyncio.AbstractEventLoop | None = None
_bg_lock = threading.Lock()


def _background_loop() -> asyncio.AbstractEventLoop:
    # One long-lived loop for all sync calls: litellm's cached HTTP clients stay bound to a live loop
    # (asyncio.run per call would leave them tied to closed loops).
    global _bg_loop
    with _bg_lock:
        if _bg_loop is None or _bg_loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="quandary-llm-loop", daemon=True).start()
            _bg_loop = loop
        return _bg_loop


def is_background_loop(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``loop`` is the long-lived loop of :func:`run_sync` (clients may pool on it)."""
    return loop is _bg_loop


def cancel_pending_calls(timeout_s: float = 5.0) -> int:
    """Cancel every call still in flight on the background loop (e.g. after an interrupted run),
    so their HTTP connections close and the embedded server's slots are released. Returns how
    many were cancelled."""
    loop = _bg_loop
    if loop is None or loop.is_closed() or not loop.is_running():
        return 0

    async def cancel_all() -> int:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return len(tasks)

    try:
        return asyncio.run_coroutine_threadsafe(cancel_all(), loop).result(timeout_s)
    except Exception:  # noqa: BLE001 - best effort at shutdown
        return 0


class CallsStopped(BaseException):
    """Raised in a thread waiting on council calls once the work it serves has been stopped (an
    interrupted run). A BaseException, so no ``except Exception`` in a stage takes it for a failed
    call and goes on to the next one."""


_stopping = threading.Event()
_waiting: set[concurrent.futures.Future] = set()
_waiting_lock = threading.Lock()


def run_sync(coro):
    """Run a coroutine to completion from synchronous code. A waiting thread that is interrupted
    (Ctrl-C, SIGTERM, Dagster's interrupt) cancels its coroutine instead of leaving it running."""
    if _stopping.is_set():
        coro.close()
        raise CallsStopped("the run was stopped")
    future = asyncio.run_coroutine_threadsafe(coro, _background_loop())
    with _waiting_lock:
        _waiting.add(future)
    try:
        if _stopping.is_set():  # stopped between the check above and the registration
            future.cancel()
        return future.result()
    except concurrent.futures.CancelledError:
        if _stopping.is_set():
            raise CallsStopped("the run was stopped") from None
        raise
    except BaseException:
        future.cancel()
        raise
    finally:
        with _waiting_lock:
            _waiting.discard(future)


def _stop_waiting_threads() -> None:
    _stopping.set()
    with _waiting_lock:
        futures = list(_waiting)
    for f in futures:
        f.cancel()


@contextmanager
def call_threads(workers: int) -> Iterator[concurrent.futures.ThreadPoolExecutor]:
    """A thread pool for work that waits on council calls in several threads. If the body fails or
    is interrupted, no thread is left waiting on a call nobody will read (a plain pool's exit would
    wait for every call in flight, minutes each on a slow model): queued work is dropped, waiting
    threads get :class:`CallsStopped`, calls in flight are cancelled, then the exception goes on.
    One stop at a time per process: ``_stopping`` is process-wide."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers)
    try:
        yield pool
    except BaseException:
        try:
            _stop_waiting_threads()
            pool.shutdown(wait=True, cancel_futures=True)
            cancel_pending_calls()
        finally:
            _stopping.clear()
        raise
    pool.shutdown(wait=True)
