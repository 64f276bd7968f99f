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
  per member and event loop, shared by all councils of the process; held from the cache lookup to
  the end of the HTTP exchange, not while the answer is parsed and logged).
- ``vote`` asks members lazily in waves: each wave is the smallest number of further members whose
  answers could decide the outcome (``resources.llm.votes.min_more_votes``), so with 3 members and strict
  majority two agreeing votes decide and the third member is never asked. ``calls_saved`` counts the
  members not asked. A failed call, an unreadable answer (after the repair call) or ``extract``
  returning ``None`` is *no vote* (``outcome.lost``), never an abstention: the outcome is
  ``decided`` only when the votes cast fix it whatever the lost members would have said (a majority
  of the configured members); otherwise ``decision`` is None and the caller must treat the item as
  not produced, like a failed call.
- Sync methods run on one background event loop thread (``runtime.run_sync``), so they work from
  plain code, from threads, and even from inside a running event loop.
- Every call carries the caller's ``tag`` (``stage``, ``candidate_id``, anything else) into the log.

Where the rest lives: ``get_council`` and the per-process caches are ``registry.py``; the event loop,
``run_sync`` and ``call_threads`` are ``runtime.py``; one structured call is ``client.py``.
"""

import asyncio
import dataclasses
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

from pydantic import BaseModel

from resources.llm.client import CallResult, call_structured, request_key
from resources.llm.config import CouncilConfig, Member
from resources.llm.runtime import limiter, run_sync
from resources.llm.votes import decide, is_decided, min_more_votes
from resources.progress import record_call
from storage.llm_log import CallLogRules

T = TypeVar("T", bound=BaseModel)


class MemberVote(NamedTuple):
    member: str
    vote: Hashable | None  # None = no vote: the call failed or the answer was unreadable (lost)
    call_id: str
    parsed_ok: bool  # True only when a vote was read


@dataclass(frozen=True)
class VoteOutcome:
    decision: Any  # True/False for yes/no rules; a label or None (no winner) for plurality
    votes: list[MemberVote]
    calls_made: int
    calls_saved: int
    rule: str
    counts: dict = field(default_factory=dict)
    abstentions: int = 0  # votes not cast (= len(lost)); kept for old readers
    results: list[CallResult] = field(default_factory=list)
    decided: bool = True  # False: the lost votes could change the outcome; decision is None
    lost: list[str] = field(default_factory=list)  # members whose call failed or answer was unreadable


_in_flight: dict[tuple, "asyncio.Future"] = {}


def _slots(member: Member) -> asyncio.Semaphore:
    """The member's ``max_in_flight`` slots, shared by every council of the process on this loop."""
    return limiter((member.name, member.model, member.api_base, member.max_in_flight), member.max_in_flight)


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


def _read_vote(r: CallResult, extract: Callable, yes_no: bool) -> Hashable | None:
    """The member's vote, or None when it cast none (failed call, unreadable answer, no vote in it)."""
    if not r.ok:
        return None
    try:
        v = extract(r.parsed)
    except Exception:  # noqa: BLE001 - a vote we cannot read is no vote
        return None
    return _as_yes_no(v) if yes_no else v


class Council:
    def __init__(
        self, role: str, members: Sequence[Member], log: CallLogRules | None, config: CouncilConfig | None = None
    ):
        if not members:
            raise ValueError(f"council {role!r} has no members")
        self.role = role
        self.members = list(members)
        self.log = log
        self.config = config
        self._by_name = {m.name: m for m in self.members}

    @classmethod
    def from_config(cls, config: CouncilConfig, role: str, log: CallLogRules | None) -> "Council":
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
    async def aask(
        self,
        member_name: str,
        messages: list[dict],
        output_model: type[T],
        tag: dict | None = None,
        *,
        use_cache: bool = True,
        overrides: dict | None = None,
    ) -> CallResult[T]:
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
        call_id = request_key(member, messages, output_model)
        key = (id(asyncio.get_running_loop()), self.log.path if self.log else None, call_id)
        task = _in_flight.get(key)
        if task is not None:
            shared = await asyncio.shield(task)
            return dataclasses.replace(shared, cached=True, tag=tag)
        task = asyncio.ensure_future(self._call(member, messages, output_model, tag, use_cache, call_id))
        _in_flight[key] = task
        task.add_done_callback(lambda _t, k=key: _in_flight.pop(k, None))
        return await asyncio.shield(task)

    async def _call(self, member: Member, messages, output_model, tag, use_cache, call_id=None) -> CallResult:
        result = await call_structured(
            member, messages, output_model, log=self.log, tag=tag, use_cache=use_cache, key=call_id, slot=_slots(member)
        )
        # live counts for the open progress bar/log lines (resources/progress.py); joined
        # single-flight duplicates are not counted twice. A call never counts its item done: the
        # caller does when it has finished the item (stage 9 asks several comparisons an item)
        record_call(cached=bool(result.cached), failed=not result.ok)
        return result

    async def aask_all(
        self, messages: list[dict], output_model: type[T], tag: dict | None = None, *, use_cache: bool = True
    ) -> list[CallResult[T]]:
        return list(
            await asyncio.gather(
                *(self.aask(m.name, messages, output_model, tag, use_cache=use_cache) for m in self.members)
            )
        )

    async def aask_many(
        self,
        member_name: str,
        list_of_messages: Sequence[list[dict]],
        output_model: type[T],
        tags: Sequence[dict | None] | None = None,
    ) -> list[CallResult[T]]:
        tags = list(tags) if tags is not None else [None] * len(list_of_messages)
        if len(tags) != len(list_of_messages):
            raise ValueError(f"ask_many: {len(list_of_messages)} prompts but {len(tags)} tags")
        self.member(member_name)  # fail fast on a typo, before scheduling anything
        return list(
            await asyncio.gather(
                *(self.aask(member_name, msgs, output_model, t) for msgs, t in zip(list_of_messages, tags))
            )
        )

    async def avote(
        self,
        messages: list[dict],
        output_model: type[T],
        extract: Callable[[T], Any],
        rule: str = "strict_majority",
        tag: dict | None = None,
        *,
        abstain_as_no: bool = False,
        tie: str | Sequence[Hashable] = "reject",
        overrides: dict | None = None,
        short_circuit: bool = True,
    ) -> VoteOutcome:
        """The one vote loop. A member whose call failed, whose answer could not be read (after the
        client's repair call) or held no vote (``extract`` raised or gave ``None``) cast *no* vote:
        it is ``lost``, never an abstention. The outcome is ``decided`` only when the votes cast fix
        it whatever the lost (and unasked) members would have said — with three members, two
        agreeing votes; otherwise ``decision`` is None and the caller treats the item like a failed
        call (not produced; a rerun re-asks only the failed calls, the log caches only ``ok``).
        ``short_circuit=False`` asks every member in one wave (callers that use every answer)."""
        yes_no = rule in ("strict_majority", "unanimous")
        n = len(self.members)
        kw = dict(abstain_as_no=abstain_as_no, tie=tie)
        votes: list = []
        cast: list[MemberVote] = []
        results: list[CallResult] = []
        lost: list[str] = []
        asked = 0
        while asked < n:
            unknown = n - asked + len(lost)
            k = min_more_votes(votes, unknown, rule, **kw) if short_circuit else n - asked
            if k == 0:
                break  # decided: the remaining members cannot change the outcome
            if k > n - asked:
                break  # undecidable now: only the lost members could decide (a rerun re-asks them)
            wave = self.members[asked : asked + k]
            wave_results = await asyncio.gather(
                *(self.aask(m.name, messages, output_model, tag, overrides=overrides) for m in wave)
            )
            for m, r in zip(wave, wave_results):
                v = _read_vote(r, extract, yes_no)
                if v is None:
                    lost.append(m.name)
                else:
                    votes.append(v)
                cast.append(MemberVote(m.name, v, r.call_id, r.ok and v is not None))
                results.append(r)
            asked += k
        unknown = n - asked + len(lost)
        decided = is_decided(votes, unknown, rule, **kw)
        tally = decide(votes + [None] * unknown, rule, **kw)
        return VoteOutcome(
            decision=tally.decision if decided else None,
            votes=cast,
            calls_made=asked,
            calls_saved=n - asked,
            rule=rule,
            counts=tally.counts,
            abstentions=len(lost),
            results=results,
            decided=decided,
            lost=lost,
        )

    async def avote_many(
        self,
        list_of_messages: Sequence[list[dict]],
        output_model: type[T],
        extract: Callable[[T], Any],
        rule: str = "strict_majority",
        tags: Sequence[dict | None] | None = None,
        **kw,
    ) -> list[VoteOutcome]:
        tags = list(tags) if tags is not None else [None] * len(list_of_messages)
        return list(
            await asyncio.gather(
                *(self.avote(m, output_model, extract, rule, t, **kw) for m, t in zip(list_of_messages, tags))
            )
        )

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
