"""ABISS §4.2: the ten-stage validation cascade, one function per stage.

Each stage sees only the survivors of the previous stages and applies only to the groups the
paper names; other survivors pass through with ``applies = False``. A stage returns one
*decision* per entering candidate: ``passed``, ``reason`` and the council votes behind it
(member, comparison, vote, parsed_ok, llm_call_id).

Vote rules (documented choices where the paper is terse):

* Acceptance votes (stages 3, 4, 8, 10, and the per-comparison votes of 9) use a strict majority
  of the council's members: a tie rejects, and an unparseable answer is recorded as an abstention
  that does **not** count as "yes" (the paper asks that "the majority of models agree").
* SQL-writing stages (5, 6) count a member's SQL as "equivalent" only when it executes and is
  equivalent to the gold under Appendix A's relaxed equivalence; the question (stage 5) or
  interpretation (stage 6) is removed when a strict majority of members is equivalent.
* Stage 7 removes a question as soon as any member writes SQL that executes with a non-empty
  result *and* passes the council's ground-truth check (the paper's "any model").
* Stage 9 stops at the first lost comparison. A/B positions alternate by a hash of the
  candidate and competitor, so position bias cannot favour the assigned category.
* Short-circuit everywhere: members are asked in waves no larger than needed to decide.

Stage 1 treats literal-only differences *within* an ambiguous group as intended (missing user
knowledge and vagueness readings differ only in a value), so masked-SQL duplicates are only
counted across groups.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import defaultdict
from dataclasses import dataclass, field

from pipelines.abiss.prompts import (
    CategoryChoice,
    SolveAttempt,
    SqlAttempt,
    style_label_model,
    Verdict,
    conformance_messages,
    consistency_messages,
    feedback_messages,
    ground_truth_messages,
    solve_messages,
    style_messages,
    write_sql_messages,
)
from pipelines.taxonomy import DEFAULT_STYLES, Group, subcategories_in, subcategory
from resources.llm.votes import decide, is_decided, min_more_votes
from resources.llm.failures import FailureTally
from resources.sql import DEFAULT_TIMEOUT_S, QueryResult, execute_sql

ANS, AMB, UNA = Group.ANSWERABLE.value, Group.AMBIGUOUS.value, Group.UNANSWERABLE.value


@dataclass(frozen=True)
class StageSpec:
    no: int
    name: str
    groups: frozenset[str]
    uses_council: bool
    description: str
    subcategories: frozenset[str] | None = None  # narrower than groups where the paper says so

    @property
    def key(self) -> str:
        return f"s{self.no:02d}_{self.name}"

    def applies(self, row: dict) -> bool:
        if self.subcategories is not None:
            return row["subcategory"] in self.subcategories
        return row["group"] in self.groups


STAGES: tuple[StageSpec, ...] = (
    # Step 0 is ours, not the paper's: deterministic checks before any council call
    # (pipelines/abiss/wellformed.py); CascadeSettings.wellformedness=False makes it a pass-through.
    StageSpec(0, "wellformedness", frozenset({ANS, AMB, UNA}), False,
              "Deterministic well-formedness filter: placeholders, prompt echoes and copies, repetition, "
              "length, SQL in the question, no schema mention, feedback naming nothing."),
    StageSpec(1, "duplicate_removal", frozenset({ANS, AMB, UNA}), False,
              "Exact duplicates, then value-masked SQL duplicates (answerable and ambiguous)."),
    StageSpec(2, "sql_executability", frozenset({ANS, AMB}), False,
              "Ground-truth SQL executes, returns rows, within the time limit."),
    StageSpec(3, "category_conformance", frozenset({ANS, AMB, UNA}), True,
              "Council: the question clearly conforms to its category."),
    StageSpec(4, "ground_truth_satisfaction", frozenset({ANS, AMB}), True,
              "Council: the SQL and its result answer the question (with hidden knowledge)."),
    StageSpec(5, "evidence_necessity", frozenset({ANS}), True,
              "Council writes SQL without the evidence; majority equivalent rejects.",
              subcategories=frozenset({"answerable_with_evidence"})),
    StageSpec(6, "ambiguity_verification", frozenset({AMB}), True,
              "Council writes SQL without hidden knowledge; a majority-equivalent interpretation is removed."),
    StageSpec(7, "unsolvability_verification", frozenset({UNA}), True,
              "Council tries to solve; any executable SQL judged correct rejects."),
    StageSpec(8, "feedback_quality", frozenset({UNA}), True,
              "Council: the feedback is accurate, specific and actionable."),
    StageSpec(9, "category_consistency", frozenset({AMB, UNA}), True,
              "Assigned subcategory wins a strict majority against every other of its group."),
    StageSpec(10, "style_conformance", frozenset({ANS, AMB, UNA}), True,
              "Council: the question matches its intended style."),
)
STAGE_BY_NO = {s.no: s for s in STAGES}


class CouncilUnavailable(RuntimeError):
    """Too many calls of a stage failed (provider down, prompt too long, damaged call log ...) or
    were unparseable: fail the step; the message says which and what to do."""


@dataclass
class StageContext:
    db_path: str
    schema_context: str
    council: object  # resources.llm.Council (validators)
    timeout_s: float = DEFAULT_TIMEOUT_S
    order_sensitive: bool = False
    result_preview_rows: int = 10
    # Provider failures tolerated before the stage fails (0: any). A tolerated failure counts as an
    # abstention, so by default no decision ever rests on a call that did not happen.
    max_failed_call_share: float = 0.0
    # A stage whose answers are mostly unparseable fails loudly instead of rejecting everything
    # (garbage from a provider must not look like a strict council). Needs MIN_CALLS_FOR_SHARE calls.
    max_unparseable_share: float = 0.5
    wellformedness: bool = True  # step 0 on; False = paper-exact run (every candidate passes, not applied)
    stats: dict = field(default_factory=lambda: defaultdict(int))
    tally: FailureTally = field(default_factory=FailureTally)
    # When the database's schema does not fit the context window: row -> a schema context fitted
    # around the tables that row's SQL uses (None: every prompt gets ``schema_context``).
    schema_fitter: object = None

    def schema_for(self, row: dict) -> str:
        return self.schema_fitter(row) if self.schema_fitter is not None else self.schema_context
    _results: dict = field(default_factory=dict)

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
        votes = [_vote_record(v.member, comparison, v.vote, v.parsed_ok, v.call_id) for v in outcome.votes]
        return bool(outcome.decision), votes, outcome

    async def ask(self, member, messages, model, tag):
        result = await self.council.aask(member, messages, model, tag)
        self._count([result])
        return result

    def check_available(self, stage: StageSpec) -> None:
        check_tally(f"stage {stage.key}", self.tally, self.max_failed_call_share, self.max_unparseable_share,
                    CouncilUnavailable)


MIN_CALLS_FOR_SHARE = 4  # below this, a few unparseable answers are ordinary abstentions


def check_tally(step: str, tally: FailureTally, max_failed_share: float, max_unparseable_share: float,
                error: type[Exception]) -> None:
    """Raise ``error`` with a classified message and remedy when too many calls failed or were unparseable."""
    if tally.calls and tally.transport_failures / tally.calls > max_failed_share:
        raise error(tally.message(step) + _share_note(tally.transport_failures, tally.calls, max_failed_share,
                                                      "max_failed_call_share"))
    if tally.calls >= MIN_CALLS_FOR_SHARE and tally.unparseable / tally.calls > max_unparseable_share:
        raise error(tally.message(step, transport=False) + _share_note(
            tally.unparseable, tally.calls, max_unparseable_share, "max_unparseable_share"))


def _share_note(n: int, calls: int, limit: float, name: str) -> str:
    """Which tolerated share was exceeded, and by how much (#24 item 2)."""
    return (f" [{n}/{calls} = {n / calls:.0%} of calls, more than {name} = {limit:g} (CascadeSettings) "
            f"tolerates]")


def _vote_record(member, comparison, vote, parsed_ok, call_id) -> dict:
    if vote is None:
        text = "abstain"
    elif isinstance(vote, bool):
        text = "yes" if vote else "no"
    else:
        text = str(vote)
    return {"member": member, "comparison": comparison, "vote": text, "parsed_ok": bool(parsed_ok),
            "llm_call_id": call_id}


def _decision(row, stage: StageSpec, passed: bool, reason: str, votes=(), applies=True, calls_saved=0) -> dict:
    return {"candidate_id": row["candidate_id"], "stage": stage.key, "stage_no": stage.no, "applies": applies,
            "passed": bool(passed), "reason": reason, "n_votes": len(votes), "calls_saved": int(calls_saved),
            "votes": list(votes)}


def _tag(stage: StageSpec, row: dict, extra: str | None = None) -> dict:
    tag = {"stage": stage.key, "candidate_id": row["candidate_id"]}
    if extra:
        tag["comparison"] = extra
    return tag


def _preview(result: QueryResult, n: int) -> str:
    head = [list(r) for r in result.rows[:n]]
    more = f" ... ({result.row_count} rows in total)" if result.row_count > n else ""
    return f"columns {result.columns}: {head}{more}"


# ------------------------------------------------------------------------------ stages 0-2


def stage_wellformedness(rows: list[dict], stage: StageSpec, ctx: StageContext | None) -> list[dict]:
    """Step 0: the deterministic filter of :mod:`pipelines.abiss.wellformed` (no LLM call). Without a
    context (no database) the schema rules are skipped."""
    from pipelines.abiss import wellformed

    vocab = wellformed.Vocabulary.of_database(ctx.db_path, ctx.schema_context) if ctx is not None else None
    out = []
    for row in rows:
        defects = wellformed.check(row, vocab)
        out.append(_decision(row, stage, not defects, wellformed.reason(defects)))
    return out


def stage_duplicates(rows: list[dict], stage: StageSpec) -> list[dict]:
    from pipelines.sqltools.masking import dedup_key

    ordered = sorted(rows, key=lambda r: (r["generator"], r["request_id"], r.get("interpretation_index") or 0,
                                          r["candidate_id"]))
    seen_exact: dict[tuple, str] = {}
    seen_masked: dict[str, tuple[str, str]] = {}  # key -> (group_id, candidate_id)
    out = []
    for row in ordered:
        exact = (" ".join(row["question"].lower().split()), row.get("evidence") or "",
                 row.get("hidden_knowledge") or "", row["subcategory"])
        if exact in seen_exact:
            out.append(_decision(row, stage, False, f"exact duplicate of {seen_exact[exact]}"))
            continue
        seen_exact[exact] = row["candidate_id"]
        if row["group"] in (ANS, AMB) and row.get("sql"):
            key = dedup_key(row["sql"])
            prior = seen_masked.get(key)
            if prior and prior[0] != row["group_id"]:
                out.append(_decision(row, stage, False, f"value-masked SQL duplicates {prior[1]}"))
                continue
            seen_masked.setdefault(key, (row["group_id"], row["candidate_id"]))
        out.append(_decision(row, stage, True, "unique"))
    return out


def stage_executability(rows: list[dict], stage: StageSpec, ctx: StageContext) -> list[dict]:
    out = []
    for row in rows:
        if not row.get("sql"):
            reason = f"no SQL ({row.get('grounding_status') or 'missing'}: {row.get('grounding_error') or ''})"
            out.append(_decision(row, stage, False, reason.strip(": ")))
            continue
        result = ctx.execute(row["sql"])
        if not result.ok:
            out.append(_decision(row, stage, False, result.one_line()))
        elif result.row_count == 0:
            out.append(_decision(row, stage, False, "empty result"))
        else:
            # no wall-clock time in the artifact: identical runs must hash the same under any load
            out.append(_decision(row, stage, True, f"{result.row_count} rows"))
    return out


# ------------------------------------------------------------------------------ yes/no votes


async def _yes_no_stage(rows, stage, ctx, build_messages, label) -> list[dict]:
    async def one(row):
        messages = build_messages(row)
        if asyncio.iscoroutine(messages):
            messages = await messages
        ok, votes, outcome = await ctx.vote(messages, Verdict, lambda p: p.verdict, _tag(stage, row))
        return _decision(row, stage, ok, f"{label}: {_count_text(votes)}", votes, calls_saved=outcome.calls_saved)

    return list(await asyncio.gather(*(one(r) for r in rows)))


def _count_text(votes) -> str:
    yes = sum(v["vote"] == "yes" for v in votes)
    no = sum(v["vote"] == "no" for v in votes)
    ab = sum(v["vote"] == "abstain" for v in votes)
    return f"{yes} yes / {no} no / {ab} abstain"


async def stage_conformance(rows, stage, ctx):
    return await _yes_no_stage(rows, stage, ctx, lambda r: conformance_messages(ctx.schema_for(r), r), "conforms")


async def stage_ground_truth(rows, stage, ctx):
    async def build(row):
        result = await ctx.aexecute(row["sql"])
        preview = _preview(result, ctx.result_preview_rows) if result.ok else result.one_line()
        return ground_truth_messages(ctx.schema_for(row), row, preview)

    return await _yes_no_stage(rows, stage, ctx, build, "answers the question")


async def stage_feedback(rows, stage, ctx):
    return await _yes_no_stage(rows, stage, ctx, lambda r: feedback_messages(ctx.schema_for(r), r), "good feedback")


async def stage_style(rows, stage, ctx):
    # The label set is the paper's three styles plus any other style of this run, so a formal
    # "List the ..." is not lost to a label ("imperative") the grid never asked for.
    labels = sorted(set(DEFAULT_STYLES) | {r["style"] for r in rows})
    model = style_label_model(tuple(labels))

    async def one(row):
        ok, votes, outcome = await ctx.vote(style_messages(ctx.schema_for(row), row["question"], labels), model,
                                            lambda p, s=row["style"]: p.style == s, _tag(stage, row),
                                            comparison=f"is {row['style']}")
        return _decision(row, stage, ok, f"style {row['style']}: {_count_text(votes)}", votes,
                         calls_saved=outcome.calls_saved)

    return list(await asyncio.gather(*(one(r) for r in rows)))


# ------------------------------------------------------------------------------ SQL-writing votes


async def _equivalent(ctx: StageContext, gold_sql: str, pred_sql: str) -> bool | None:
    """True/False by relaxed equivalence; None when the prediction does not execute."""
    from pipelines.sqltools.equivalence import has_top_level_order_by, results_equivalent

    gold, pred = await ctx.aexecute(gold_sql), await ctx.aexecute(pred_sql)
    if not gold.ok or not pred.ok:
        return None if not pred.ok else False
    ordered = ctx.order_sensitive and has_top_level_order_by(gold_sql)
    return results_equivalent(gold, pred, order_sensitive=ordered).equivalent


async def _members_write_sql(ctx, stage, row, messages, golds: dict[str, str]):
    """Ask members (in short-circuit waves) for SQL; vote per gold = equivalent to it."""
    names = ctx.council.member_names
    n = len(names)
    per_gold: dict[str, list] = {g: [] for g in golds}
    records: list[dict] = []
    asked = 0
    while asked < n:
        pending = [g for g in golds if not is_decided(per_gold[g], n - asked, "strict_majority", abstain_as_no=True)]
        if not pending:
            break
        k = max(min_more_votes(per_gold[g], n - asked, "strict_majority", abstain_as_no=True) for g in pending)
        k = max(1, min(k, n - asked))
        wave = names[asked: asked + k]
        results = await asyncio.gather(*(ctx.ask(m, messages, SqlAttempt, _tag(stage, row)) for m in wave))
        for member, res in zip(wave, results):
            pred = res.parsed.sql if res.ok else None
            for g, gold_sql in golds.items():
                eq = await _equivalent(ctx, gold_sql, pred) if pred else None
                # a member that writes no runnable SQL did not reproduce the gold: count as "not equivalent"
                per_gold[g].append(bool(eq))
                label = ("equivalent" if eq else "not_equivalent" if eq is False
                         else "not_equivalent (fails to run)" if pred else "abstain")
                records.append(_vote_record(member, g, label, res.ok, res.call_id))
        asked += k
    majority = {g: decide(v + [False] * (n - len(v)), "strict_majority").decision for g, v in per_gold.items()}
    ctx.stats["calls_saved"] += n - asked
    return majority, records, n - asked


async def stage_evidence_necessity(rows, stage, ctx):
    async def one(row):
        majority, votes, saved = await _members_write_sql(
            ctx, stage, row, write_sql_messages(ctx.schema_for(row), row["question"], None), {"gold": row["sql"]})
        if majority["gold"]:
            return _decision(row, stage, False, "majority wrote equivalent SQL without the evidence", votes, calls_saved=saved)
        return _decision(row, stage, True, "evidence needed: no majority without it", votes, calls_saved=saved)

    return list(await asyncio.gather(*(one(r) for r in rows)))


async def stage_ambiguity(rows, stage, ctx):
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        groups[row["group_id"]].append(row)

    async def one_group(members: list[dict]):
        first = members[0]
        golds = {f"interpretation_{r.get('interpretation_index') or 0}": r["sql"] for r in members}
        messages = write_sql_messages(ctx.schema_for(first), first["question"], first.get("evidence"))
        majority, votes, saved = await _members_write_sql(ctx, stage, first, messages, golds)
        out = []
        for r in members:
            label = f"interpretation_{r.get('interpretation_index') or 0}"
            mine = [v for v in votes if v["comparison"] == label]
            mine_saved = saved if r is members[0] else 0  # the group's savings, counted once
            if majority[label]:
                out.append(_decision(r, stage, False, "dominant reading: majority wrote it without hidden knowledge",
                                     mine, calls_saved=mine_saved))
            else:
                out.append(_decision(r, stage, True, "not the majority reading", mine, calls_saved=mine_saved))
        return out

    results = await asyncio.gather(*(one_group(g) for g in groups.values()))
    return [d for batch in results for d in batch]


async def stage_unsolvability(rows, stage, ctx):
    async def one(row):
        messages = solve_messages(ctx.schema_for(row), row["question"], row.get("evidence"))
        votes, gt_saved = [], 0
        for member in ctx.council.member_names:  # sequential: stop at the first solution
            res = await ctx.ask(member, messages, SolveAttempt, _tag(stage, row))
            if not res.ok or not res.parsed.answerable or not res.parsed.sql.strip():
                votes.append(_vote_record(member, "solve", "unsolved" if res.ok else "abstain", res.ok, res.call_id))
                continue
            result = await ctx.aexecute(res.parsed.sql)
            if not result.ok or result.row_count == 0:
                why = result.one_line() if not result.ok else "empty result"
                votes.append(_vote_record(member, "solve", f"unsolved ({why})", True, res.call_id))
                continue
            judged = {**row, "sql": res.parsed.sql}
            ok, gt_votes, gt_outcome = await ctx.vote(
                ground_truth_messages(ctx.schema_for(row), judged, _preview(result, ctx.result_preview_rows)),
                Verdict, lambda p: p.verdict, _tag(stage, row, f"gt_check:{member}"), comparison=f"gt_check:{member}")
            votes.append(_vote_record(member, "solve", "solved" if ok else "unsolved (judged wrong)", True, res.call_id))
            votes.extend(gt_votes)
            gt_saved += gt_outcome.calls_saved
            if ok:
                saved = len(ctx.council.member_names) - sum(v["comparison"] == "solve" for v in votes)
                ctx.stats["calls_saved"] += saved
                return _decision(row, stage, False, f"solved by {member}: {res.parsed.sql}", votes,
                                 calls_saved=saved + gt_saved)
        return _decision(row, stage, True, "no council member found a correct SQL", votes, calls_saved=gt_saved)

    return list(await asyncio.gather(*(one(r) for r in rows)))


async def stage_consistency(rows, stage, ctx):
    async def one(row):
        assigned = subcategory(row["subcategory"])
        competitors = [s for s in subcategories_in(assigned.group) if s.id != assigned.id]
        votes, saved = [], 0
        for i, other in enumerate(competitors):
            flip = hashlib.sha256(f"{row['candidate_id']}|{other.id}".encode()).digest()[0] % 2 == 1
            a, b = (other, assigned) if flip else (assigned, other)
            letter = "B" if flip else "A"

            ok, v, outcome = await ctx.vote(consistency_messages(ctx.schema_for(row), row, a, b), CategoryChoice,
                                            lambda p, letter=letter: p.choice == letter,
                                            _tag(stage, row, f"vs:{other.id}"), comparison=f"vs:{other.id}")
            votes.extend(v)
            saved += outcome.calls_saved
            if not ok:
                never_asked = (len(competitors) - i - 1) * ctx.n_members  # comparisons never asked
                saved += never_asked
                ctx.stats["calls_saved"] += never_asked
                return _decision(row, stage, False, f"lost against {other.id}", votes, calls_saved=saved)
        return _decision(row, stage, True, f"won all {len(competitors)} comparisons", votes, calls_saved=saved)

    return list(await asyncio.gather(*(one(r) for r in rows)))


# ------------------------------------------------------------------------------ driver

_ASYNC_STAGES = {3: stage_conformance, 4: stage_ground_truth, 5: stage_evidence_necessity, 6: stage_ambiguity,
                 7: stage_unsolvability, 8: stage_feedback, 9: stage_consistency, 10: stage_style}


def run_stage(stage_no: int, survivors: list[dict], ctx: StageContext | None) -> list[dict]:
    """Decide every survivor entering ``stage_no``; non-applicable ones pass through."""
    from resources.llm.council import run_sync

    stage = STAGE_BY_NO[stage_no]
    if stage_no == 0 and ctx is not None and not ctx.wellformedness:
        return sorted((_decision(r, stage, True, "filter off (paper-exact run)", applies=False) for r in survivors),
                      key=lambda d: d["candidate_id"])
    applicable = [r for r in survivors if stage.applies(r)]
    passthrough = [_decision(r, stage, True, "not applicable", applies=False) for r in survivors
                   if not stage.applies(r)]
    if stage_no == 0:
        decided = stage_wellformedness(applicable, stage, ctx)
    elif stage_no == 1:
        decided = stage_duplicates(applicable, stage)
    elif stage_no == 2:
        decided = stage_executability(applicable, stage, ctx)
    elif applicable:
        decided = run_sync(_ASYNC_STAGES[stage_no](applicable, stage, ctx))
        ctx.check_available(stage)
    else:
        decided = []
    return sorted(decided + passthrough, key=lambda d: d["candidate_id"])
