"""What every cascade stage shares: its spec, the context it runs in, and the decision records.

A stage module defines one :class:`StageSpec` named ``STAGE`` whose ``decide(rows, stage, ctx)``
decides the applicable survivors (a coroutine function for council stages, ``uses_council=True``);
:func:`pipelines.abiss.stages.run_stage` does the rest (pass-through, sorting, failure check).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from pipelines.abiss.taxonomy import Group
from resources.llm.failures import FailureTally
from resources.progress import item_done
from resources.sql import DEFAULT_TIMEOUT_S, QueryResult, execute_sql

ANS, AMB, UNA = Group.ANSWERABLE.value, Group.AMBIGUOUS.value, Group.UNANSWERABLE.value
ALL_GROUPS = frozenset({ANS, AMB, UNA})


@dataclass(frozen=True)
class StageSpec:
    no: int
    name: str
    groups: frozenset[str]
    uses_council: bool
    description: str
    subcategories: frozenset[str] | None = None  # narrower than groups where the paper says so
    # decide(applicable rows, this spec, StageContext | None) -> decisions; async when uses_council
    decide: Callable | None = field(default=None, compare=False, repr=False)

    @property
    def key(self) -> str:
        return f"s{self.no:02d}_{self.name}"

    def applies(self, row: dict) -> bool:
        if self.subcategories is not None:
            return row["subcategory"] in self.subcategories
        return row["group"] in self.groups


@dataclass
class StageContext:
    db_path: str
    schema_context: str
    council: object  # resources.llm.Council (validators)
    timeout_s: float = DEFAULT_TIMEOUT_S
    order_sensitive: bool = False
    result_preview_rows: int = 10
    # Failed calls tolerated before the stage fails (0: any). An answer that could not be read (after
    # the repair call) is a failed call too, never a vote (#34 item 2). A tolerated failure casts no
    # vote: a row whose outcome the lost votes could change is rejected as "undecided" (said in its
    # reason), so by default no decision ever rests on a call that did not happen. A member none of
    # whose answers could be used fails the stage, naming it, whatever this share.
    max_failed_call_share: float = 0.0
    # Unreadable answers of the non-vote calls (kept for callers that tally those separately).
    max_unparseable_share: float = 0.5
    wellformedness: bool = True  # step 0 on; False = paper-exact run (every candidate passes, not applied)
    # Stage 9 stops at a candidate's first lost comparison (DESIGN.md's short-circuit); False asks every
    # comparison, with the same decisions: the baseline bench/bench_cascade.py measures the saving against
    stop_at_first_loss: bool = True
    stats: dict = field(default_factory=lambda: defaultdict(int))
    tally: FailureTally = field(default_factory=FailureTally)
    # When the database's schema does not fit the context window: row -> a schema context fitted
    # around the tables that row's SQL uses (None: every prompt gets ``schema_context``).
    schema_fitter: object = None
    _results: dict = field(default_factory=dict)

    def schema_for(self, row: dict) -> str:
        return self.schema_fitter(row) if self.schema_fitter is not None else self.schema_context

    @property
    def n_members(self) -> int:
        return len(self.council.member_names)

    def execute(self, sql: str):
        if sql not in self._results:
            self._results[sql] = execute_sql(self.db_path, sql, timeout_s=self.timeout_s)
        return self._results[sql]

    async def aexecute(self, sql: str):
        """Like :meth:`execute`, off the event loop: a slow query must not stall LLM calls in flight."""
        if sql not in self._results:
            self._results[sql] = await asyncio.to_thread(execute_sql, self.db_path, sql, timeout_s=self.timeout_s)
        return self._results[sql]

    def _count(self, results) -> None:
        for r in results:
            self.stats["calls"] += 1
            self.stats["cached"] += int(bool(r.cached))
            self.stats["call_failed"] += int(r.status == "call_failed")
            self.stats["parse_failed"] += int(r.status == "parse_failed")
            self.tally.add(r)

    async def vote(self, messages, model, extract, tag, comparison=None):
        outcome = await self.council.avote(messages, model, extract, "strict_majority", tag, abstain_as_no=True)
        self._count(outcome.results)
        self.stats["calls_saved"] += outcome.calls_saved
        votes = [vote_record(v.member, comparison, v.vote, v.parsed_ok, v.call_id) for v in outcome.votes]
        if not outcome.decided:
            self.stats["undecided"] += 1
        return bool(outcome.decision), votes, outcome

    async def ask(self, member, messages, model, tag):
        result = await self.council.aask(member, messages, model, tag)
        self._count([result])
        return result

    def check_available(self, stage: StageSpec) -> None:
        """Raise :class:`~resources.llm.failures.ProviderUnavailable` when too many of the stage's calls
        failed or were unparseable."""
        self.tally.check(
            f"stage {stage.key}", self.max_failed_call_share, self.max_unparseable_share, unreadable_fails=True
        )


UNDECIDED = "undecided: a failed call or unreadable answer could change the majority"


def vote_record(member, comparison, vote, parsed_ok, call_id) -> dict:
    if vote is None:
        text = "failed"  # no vote: the call failed or its answer could not be read
    elif isinstance(vote, bool):
        text = "yes" if vote else "no"
    else:
        text = str(vote)
    return {
        "member": member,
        "comparison": comparison,
        "vote": text,
        "parsed_ok": bool(parsed_ok),
        "llm_call_id": call_id,
    }


def decision(row, stage: StageSpec, passed: bool, reason: str, votes=(), applies=True, calls_saved=0) -> dict:
    """A stage's decision on one candidate. Made when the stage has finished it (every call it needed
    answered): an applicable candidate counts as done in the step's open progress here, not at its
    first call (stage 9 asks a comparison after another, #42 item 5)."""
    if applies:
        item_done(row["candidate_id"])
    return {
        "candidate_id": row["candidate_id"],
        "stage": stage.key,
        "stage_no": stage.no,
        "applies": applies,
        "passed": bool(passed),
        "reason": reason,
        "n_votes": len(votes),
        "calls_saved": int(calls_saved),
        "votes": list(votes),
    }


def tag(stage: StageSpec, row: dict, extra: str | None = None) -> dict:
    out = {"stage": stage.key, "candidate_id": row["candidate_id"]}
    if extra:
        out["comparison"] = extra
    return out


def preview(result: QueryResult, n: int) -> str:
    head = [list(r) for r in result.rows[:n]]
    more = f" ... ({result.row_count} rows in total)" if result.row_count > n else ""
    return f"columns {result.columns}: {head}{more}"


def count_text(votes, decided: bool = True) -> str:
    yes = sum(v["vote"] == "yes" for v in votes)
    no = sum(v["vote"] == "no" for v in votes)
    lost = sum(v["vote"] == "failed" for v in votes)
    text = f"{yes} yes / {no} no" + (f" / {lost} failed" if lost else "")
    return text if decided else f"undecided ({text}: the failed votes could change it)"
