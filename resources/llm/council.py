"""Councils: the members configured for one role, with batch, vote and sync APIs.

Usage (plain code; every method has an ``a``-prefixed async twin)::

    from resources.llm import get_council

    council = get_council("validators")
    results = council.ask_all(messages, Verdict, tag=dict(stage="s2", candidate_id=cid))   # every member
    results = council.ask_many("smollm2", [m1, m2, m3], Verdict, tags=[t1, t2, t3])         # one member
    outcome = council.vote(messages, Verdict, extract=lambda v: v.answerable,
                           rule="strict_majority", tag=dict(stage="s2", candidate_id=cid))
    outcome.decision, outcome.votes, outcome.calls_made, outcome.calls_saved

- Results come back in input order, one ``CallResult`` per request; a failing member yields a failed
  result and never affects the others or raises.
- At most ``member.max_in_flight`` requests per member are in flight at once (an asyncio semaphore
  per member and event loop, shared by all councils of the process).
- ``vote`` asks members lazily in waves: each wave is the smallest number of further members whose
  answers could decide the outcome (``resources.llm.votes.min_more_votes``), so with 3 members and strict
  majority two agreeing votes decide and the third member is never asked. ``calls_saved`` counts the
  members not asked. Unparseable answers (or ``extract`` returning ``None``) are abstentions.
- Sync methods run on one background event loop thread, so they work from plain code, from threads,
  and even from inside a running event loop.
- Every call carries the caller's ``tag`` (``stage``, ``candidate_id``, anything else) into the log.
"""

import asyncio
import concurrent.futures
import dataclasses
import threading
import weakref
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from pydantic import BaseModel

from resources.progress import record_call
from resources.llm.votes import decide, min_more_votes
from resources.llm.client import CallResult, call_structured, request_key
from resources.llm.config import CouncilConfig, Member, load_council_config
from storage.llm_log import CallLog

T = TypeVar("T", bound=BaseModel)


class MemberVote(NamedTuple):
    member: str
    vote: Hashable | None  # None = abstained (unparseable / no vote)
    call_id: str
    parsed_ok: bool


@dataclass(frozen=True)
class VoteOutcome:
    decision: Any  # True/False for yes/no rules; a label or None (no winner) for plurality
    votes: list[MemberVote]
    calls_made: int
    calls_saved: int
    rule: str
    counts: dict = field(default_factory=dict)
    abstentions: int = 0
    results: list[CallResult] = field(default_factory=list)


# --- concurrency plumbing ------------------------------------------------------------------

_limiters: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple, asyncio.Semaphore]]" = (
    weakref.WeakKeyDictionary()
)
_limiters_lock = threading.Lock()


def _limiter(member: Member) -> asyncio.Semaphore:
    # Semaphores bind to the loop they are used in, hence one per (loop, member).
    loop = asyncio.get_running_loop()
    with _limiters_lock:
        per_loop = _limiters.setdefault(loop, {})
        key = (member.name, member.model, member.api_base, member.max_in_flight)
        sem = per_loop.get(key)
        if sem is None:
            sem = per_loop[key] = asyncio.Semaphore(member.max_in_flight)
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


# --- the council ---------------------------------------------------------------------------

_in_flight: dict[tuple, "asyncio.Future"] = {}


def _as_yes_no(v: Any) -> bool | None:
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, str):
        s = v.strip().lower()
        if s in ("yes", "true", "y", "1", "pass", "accept"):
            return True
        if s in ("no", "false", "n", "0", "fail", "reject"):
            return False
    return None


class Council:
    def __init__(self, role: str, members: Sequence[Member], log: CallLog | None, config: CouncilConfig | None = None):
        if not members:
            raise ValueError(f"council {role!r} has no members")
        self.role = role
        self.members = list(members)
        self.log = log
        self.config = config
        self._by_name = {m.name: m for m in self.members}

    @classmethod
    def from_config(cls, config: CouncilConfig, role: str, log: CallLog | None) -> "Council":
        return cls(role, config.council_members(role), log, config)

    @property
    def member_names(self) -> list[str]:
        return [m.name for m in self.members]

    def member(self, name: str) -> Member:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"council {self.role!r} has no member {name!r}; members: {self.member_names}") from None

    def __repr__(self) -> str:
        return f"Council({self.role!r}, members={self.member_names})"

    # --- async API -------------------------------------------------------------------------
    async def aask(self, member_name: str, messages: list[dict], output_model: type[T], tag: dict | None = None,
                   *, use_cache: bool = True, overrides: dict | None = None) -> CallResult[T]:
        """``overrides`` replaces sampling params for this call (e.g. a per-sample seed, a
        stage's max_tokens); they are part of the cache key like any parameter."""
        member = self.member(member_name)
        if overrides:  # validated like the config file, so a typo or a wrong type is an error
            member = Member.model_validate({**member.model_dump(), **overrides})
        tag = {"role": self.role, **(tag or {})}
        if not use_cache:
            return await self._call(member, messages, output_model, tag, use_cache)
        # Single flight: an identical request already in flight is joined, not sent again (the
        # cache alone cannot catch it: the first call has not been logged yet).
        key = (id(asyncio.get_running_loop()), self.log.path if self.log else None,
               request_key(member, messages, output_model))
        task = _in_flight.get(key)
        if task is not None:
            shared = await asyncio.shield(task)
            return dataclasses.replace(shared, cached=True, tag=tag)
        task = asyncio.ensure_future(self._call(member, messages, output_model, tag, use_cache))
        _in_flight[key] = task
        task.add_done_callback(lambda _t, k=key: _in_flight.pop(k, None))
        return await asyncio.shield(task)

    async def _call(self, member: Member, messages, output_model, tag, use_cache) -> CallResult:
        async with _limiter(member):
            result = await call_structured(member, messages, output_model, log=self.log, tag=tag, use_cache=use_cache)
        # live counts for the open progress bar/log lines (resources/progress.py); joined
        # single-flight duplicates are not counted twice
        record_call(cached=bool(result.cached), failed=not result.ok, item=(tag or {}).get("candidate_id"))
        return result

    async def aask_all(self, messages: list[dict], output_model: type[T], tag: dict | None = None,
                       *, use_cache: bool = True) -> list[CallResult[T]]:
        return list(await asyncio.gather(
            *(self.aask(m.name, messages, output_model, tag, use_cache=use_cache) for m in self.members)
        ))

    async def aask_many(self, member_name: str, list_of_messages: Sequence[list[dict]], output_model: type[T],
                        tags: Sequence[dict | None] | None = None) -> list[CallResult[T]]:
        tags = list(tags) if tags is not None else [None] * len(list_of_messages)
        if len(tags) != len(list_of_messages):
            raise ValueError(f"ask_many: {len(list_of_messages)} prompts but {len(tags)} tags")
        self.member(member_name)  # fail fast on a typo, before scheduling anything
        return list(await asyncio.gather(
            *(self.aask(member_name, msgs, output_model, t) for msgs, t in zip(list_of_messages, tags))
        ))

    async def avote(self, messages: list[dict], output_model: type[T], extract: Callable[[T], Any],
                    rule: str = "strict_majority", tag: dict | None = None, *, abstain_as_no: bool = False,
                    tie: str | Sequence[Hashable] = "reject", overrides: dict | None = None) -> VoteOutcome:
        yes_no = rule in ("strict_majority", "unanimous")
        n = len(self.members)
        votes: list = []
        cast: list[MemberVote] = []
        results: list[CallResult] = []
        asked = 0
        while asked < n:
            k = min_more_votes(votes, n - asked, rule, abstain_as_no=abstain_as_no, tie=tie)
            if k == 0:
                break  # decided: the remaining members cannot change the outcome
            wave = self.members[asked: asked + k]
            wave_results = await asyncio.gather(
                *(self.aask(m.name, messages, output_model, tag, overrides=overrides) for m in wave))
            for m, r in zip(wave, wave_results):
                v = None
                if r.ok:
                    try:
                        v = extract(r.parsed)
                    except Exception:  # noqa: BLE001 - a vote we cannot read is an abstention
                        v = None
                    if yes_no:
                        v = _as_yes_no(v)
                votes.append(v)
                cast.append(MemberVote(m.name, v, r.call_id, r.ok))
                results.append(r)
            asked += k
        tally = decide(votes + [None] * (n - asked), rule, abstain_as_no=abstain_as_no, tie=tie)
        return VoteOutcome(
            decision=tally.decision, votes=cast, calls_made=asked, calls_saved=n - asked, rule=rule,
            counts=tally.counts, abstentions=sum(1 for v in votes if v is None), results=results,
        )

    async def avote_many(self, list_of_messages: Sequence[list[dict]], output_model: type[T],
                         extract: Callable[[T], Any], rule: str = "strict_majority",
                         tags: Sequence[dict | None] | None = None, **kw) -> list[VoteOutcome]:
        tags = list(tags) if tags is not None else [None] * len(list_of_messages)
        return list(await asyncio.gather(
            *(self.avote(m, output_model, extract, rule, t, **kw) for m, t in zip(list_of_messages, tags))
        ))

    # --- sync twins ------------------------------------------------------------------------
    def ask(self, member_name, messages, output_model, tag=None, **kw) -> CallResult:
        return run_sync(self.aask(member_name, messages, output_model, tag, **kw))

    def ask_all(self, messages, output_model, tag=None, **kw) -> list[CallResult]:
        return run_sync(self.aask_all(messages, output_model, tag, **kw))

    def ask_many(self, member_name, list_of_messages, output_model, tags=None) -> list[CallResult]:
        return run_sync(self.aask_many(member_name, list_of_messages, output_model, tags))

    def vote(self, messages, output_model, extract, rule="strict_majority", tag=None, **kw) -> VoteOutcome:
        return run_sync(self.avote(messages, output_model, extract, rule, tag, **kw))

    def vote_many(self, list_of_messages, output_model, extract, rule="strict_majority", tags=None, **kw):
        return run_sync(self.avote_many(list_of_messages, output_model, extract, rule, tags, **kw))


# --- process-wide factory ------------------------------------------------------------------

_councils: dict[tuple, Council] = {}
_logs: dict[str, CallLog] = {}
_factory_lock = threading.Lock()


def call_log(path: str | Path | None = None) -> CallLog:
    """The shared CallLog for ``path`` (default ``$QUANDARY_HOME/llm_calls.sqlite``)."""
    from storage.paths import llm_calls_path

    p = str(Path(path or llm_calls_path()).resolve())
    with _factory_lock:
        if p not in _logs:
            _logs[p] = CallLog(p)
        return _logs[p]


def get_council(role: str, config_path: str | None = None, *, log_path: str | Path | None = None) -> Council:
    """The council for ``role`` from the configured file (or the embedded default), cached per process."""
    import os

    from resources.llm.config import CONFIG_ENV

    src = config_path or os.environ.get(CONFIG_ENV) or ""
    log = call_log(log_path)
    key = (src, role, str(log.path))
    with _factory_lock:
        council = _councils.get(key)
    if council is None:
        council = Council.from_config(load_council_config(src or None), role, log)
        with _factory_lock:
            council = _councils.setdefault(key, council)
    return council


def reset_councils() -> None:
    """Forget cached councils and logs (tests, or after changing the config file)."""
    with _factory_lock:
        _councils.clear()
        for log in _logs.values():
            log.close()
        _logs.clear()
