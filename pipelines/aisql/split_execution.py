"""Split execution (paper §2 step 2): full gold, full candidate and the four split parts, plus the
deterministic diffs of :mod:`pipelines.aisql.diffs`, gathered as one :class:`Evidence` per pair.

All executions share one :class:`~pipelines.aisql.operators.AIRuntime`, so every (operator, prompt,
input) is evaluated once across gold, candidate, their parts and the probe sets.
"""

import contextlib
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from pipelines.aisql.counterexamples import search
from pipelines.aisql.diffs import PROBE_N, has_top_level_order, probe_agreement, result_diff
from pipelines.aisql.execute import DEFAULT_TIMEOUT_S, RunRecord, run_duckdb_sql
from pipelines.aisql.operators import AIRuntime
from pipelines.aisql.rewrite import SqlRewriteError, fill_placeholders, to_duckdb_tree
from pipelines.aisql.splitter import SplitResult, align_calls, call_identity, split
from pipelines.aisql.structural import (
    CANNOT,
    DIFFER,
    EQUAL,
    EQUAL_HERE,
    EQUAL_SUITE,
    StructuralVerdict,
    calls_memo,
    compare_structures,
    pair_calls,
)
from pipelines.aisql.symmetry import swapped_symmetric_calls
from pipelines.aisql.verifier import DEFAULT_K as VERIFIER_K
from pipelines.aisql.verifier import DIFFER as V_DIFFER
from pipelines.aisql.verifier import EQUIVALENT_UP_TO_K, default_budget_ms, replay, verify

MEMO_ROWS = 10_000  # larger results are not memoised (memory)
MEMO_RUNS = 5_000


@dataclass
class EvalContext:
    db_path: Path
    runtime: AIRuntime
    key_columns: dict[str, tuple[str, ...]]
    table_columns: dict[str, list[str]]
    budget: int | None = None
    probe_n: int = PROBE_N
    seed: int = 0
    split_fallback: object | None = None  # a council for the LLM splitter fallback
    timeout_s: float = DEFAULT_TIMEOUT_S  # per query run (gold, candidate, parts, probes)
    schema: dict | None = None  # sqlglot schema with types (normal-form proofs); None: no such proofs
    test_suite: bool = True  # search generated databases for a counterexample when undecided
    verifier_k: int = VERIFIER_K  # rows per table of the bounded symbolic verifier (0: off)
    verifier_budget_ms: int = field(default_factory=default_budget_ms)  # its solver time per pair
    unique_keys: dict | None = None  # declared keys the data satisfies (the verifier and test suite assume only these)
    runs: dict = field(default_factory=dict, repr=False)  # (sql, max_rows) -> RunRecord, see run()
    splits: dict = field(default_factory=dict, repr=False)  # (sql, dialect) -> SplitResult

    def split(self, sql: str, dialect: str) -> SplitResult:
        """:func:`~pipelines.aisql.splitter.split` memoised for this context (read-only results)."""
        key = (sql, dialect)
        if key not in self.splits:
            if len(self.splits) > MEMO_RUNS:
                self.splits.clear()
            self.splits[key] = split(
                sql, dialect, self.key_columns, fallback=self.split_fallback, table_columns=self.table_columns
            )
        return self.splits[key]

    def run(self, sql: str, max_rows: int = 100_000) -> RunRecord:
        """One query on the scenario database, memoised for this context: a gold query (and its
        structural valuations) judged against many candidates runs once. Safe because every AI
        answer is memoised by the runtime too, so a rerun could only repeat the same rows; a
        timeout, budget stop or error is not kept (it may not repeat)."""
        key = (sql, max_rows)
        rec = self.runs.get(key)
        if rec is not None:  # every AI answer it needs is in the runtime's memo now
            return dataclasses.replace(rec, made=0, cached=rec.calls)
        if rec is None:
            rec = run_duckdb_sql(
                self.db_path, sql, self.runtime, budget=self.budget, timeout_s=self.timeout_s, max_rows=max_rows
            )
            if rec.ok and rec.row_count <= MEMO_ROWS and len(self.runs) < MEMO_RUNS:
                self.runs[key] = rec
        return rec


def table_columns_of(visible: dict[str, list[str]]) -> dict[str, list[str]]:
    out = {}
    for name, cols in visible.items():
        schema, _, table = name.partition(".")
        out[name.lower()] = cols
        out.setdefault(table.lower(), cols)
    return out


@dataclass
class Evidence:
    gold_split: SplitResult
    cand_split: SplitResult
    gold: RunRecord
    cand: RunRecord
    gold_structural: RunRecord | None
    cand_structural: RunRecord | None
    gold_ai: list[RunRecord] = field(default_factory=list)
    cand_ai: list[RunRecord] = field(default_factory=list)
    full_diff: dict = field(default_factory=dict)
    relational_diff: dict = field(default_factory=dict)  # S_g vs S_c results (paper's placeholders): evidence only
    structural: StructuralVerdict | None = None  # the sound relational verdict (pipelines.aisql.structural)
    alignment: list[dict] = field(default_factory=list)
    ordered: bool = False
    gold_sql: str = ""  # as written in the dialect (placeholders filled)
    candidate_sql: str = ""

    @property
    def calls(self) -> int:
        runs = [self.gold, self.cand, self.gold_structural, self.cand_structural, *self.gold_ai, *self.cand_ai]
        return sum(r.calls for r in runs if r is not None)

    def to_dict(self) -> dict:
        def run(r):
            return r.summary() if r is not None else None

        return {
            "gold_sql": self.gold_sql,
            "candidate_sql": self.candidate_sql,
            "gold_split": {
                "structural_sql": self.gold_split.structural_sql,
                "error": self.gold_split.error,
                "method": self.gold_split.method,
                "ai_parts": [p.sql for p in self.gold_split.ai_parts],
            },
            "cand_split": {
                "structural_sql": self.cand_split.structural_sql,
                "error": self.cand_split.error,
                "method": self.cand_split.method,
                "ai_parts": [p.sql for p in self.cand_split.ai_parts],
            },
            "gold": run(self.gold),
            "candidate": run(self.cand),
            "gold_structural": run(self.gold_structural),
            "candidate_structural": run(self.cand_structural),
            "gold_ai": [run(r) for r in self.gold_ai],
            "candidate_ai": [run(r) for r in self.cand_ai],
            "full_diff": self.full_diff,
            "relational_diff": self.relational_diff,
            "alignment": self.alignment,
            "structural": self.structural.to_dict() if self.structural is not None else None,
        }


def _run_or_error(ctx: EvalContext, res: SplitResult, which: str) -> RunRecord:
    if not res.ok:
        return RunRecord(status="error", sql=res.sql, error=res.error)
    return ctx.run(res.sql if which == "full" else res.structural_sql)


def execute_pair(ctx: EvalContext, gold_sql: str, cand_sql: str, dialect: str, parts: bool = True) -> Evidence:
    """Gold, candidate, the structural verdict and the AI-call probes; with ``parts`` also the four
    split parts and their diff (the autorater's evidence; no deterministic layer reads them)."""
    gs, cs = ctx.split(gold_sql, dialect), ctx.split(cand_sql, dialect)
    gold = _run_or_error(ctx, gs, "full")
    cand = _run_or_error(ctx, cs, "full")
    g_s = _run_or_error(ctx, gs, "structural") if gs.ok and parts else None
    c_s = _run_or_error(ctx, cs, "structural") if cs.ok and parts else None

    def part(sql: str) -> RunRecord:
        return ctx.run(sql)

    g_ai = [part(p.sql) for p in gs.ai_parts] if gs.ok and parts else []
    c_ai = [part(p.sql) for p in cs.ai_parts] if cs.ok and parts else []
    ordered = gs.ok and has_top_level_order(gs.sql)
    ev = Evidence(
        gs,
        cs,
        gold,
        cand,
        g_s,
        c_s,
        g_ai,
        c_ai,
        ordered=ordered,
        gold_sql=fill_placeholders(gold_sql).strip(),
        candidate_sql=fill_placeholders(cand_sql).strip(),
    )
    ev.full_diff = result_diff(gold, cand, ordered)
    if g_s is not None and c_s is not None:
        ev.relational_diff = result_diff(g_s, c_s, ordered)
    ev.structural = structural_verdict(ctx, gs, cs, ordered, dialect)
    if gs.ok and cs.ok and gs.method == "ast" and cs.method == "ast":
        try:
            gtree, ctree = to_duckdb_tree(gs.sql, "thalamusdb"), to_duckdb_tree(cs.sql, "thalamusdb")
        except SqlRewriteError:
            gtree = ctree = None
        for a in align_calls(gs.ai_parts, cs.ai_parts):
            item = {"gold_call": a.gold, "candidate_call": a.candidate, "status": a.status}
            if a.repeat_of is not None:
                item["repeat_of"] = a.repeat_of
            if a.status == "paired" and gtree is not None:
                gp, cp = gs.ai_parts[a.gold], cs.ai_parts[a.candidate]
                item.update(
                    gold_prompt=gp.prompt[:300],
                    candidate_prompt=cp.prompt[:300],
                    gold_inputs=gp.input_columns,
                    candidate_inputs=cp.input_columns,
                    gold_op=gp.op,
                    candidate_op=cp.op,
                    same_call=call_identity(gp) == call_identity(cp),
                )
                item["probe"] = probe_agreement(
                    ctx.db_path,
                    ctx.runtime,
                    gtree,
                    gp,
                    ctree,
                    cp,
                    ctx.table_columns,
                    n=ctx.probe_n,
                    seed=ctx.seed,
                    budget=ctx.budget,
                    timeout_s=ctx.timeout_s,
                )
            ev.alignment.append(item)
    return ev


def structural_verdict(
    ctx: EvalContext, gs: SplitResult, cs: SplitResult, ordered: bool, dialect: str = "bigquery"
) -> StructuralVerdict:
    """The sound relational comparison (every AI behaviour), or 'cannot decide' with the reason.
    ``dialect``: the pair's engine (BigQuery raises an error on x / 0; DuckDB answers inf or NaN)."""
    if not (gs.ok and cs.ok):
        return StructuralVerdict(
            CANNOT, "a query could not be split: " + "; ".join(e for e in (gs.error, cs.error) if e), "-"
        )
    try:
        gtree, ctree = to_duckdb_tree(gs.sql, "thalamusdb"), to_duckdb_tree(cs.sql, "thalamusdb")
    except SqlRewriteError as exc:
        return StructuralVerdict(CANNOT, f"a query does not parse: {exc}", "-")

    with calls_memo():  # the two trees are only read from here on
        return _structural_verdict(ctx, gtree, ctree, ordered, dialect)


def _structural_verdict(ctx: EvalContext, gtree, ctree, ordered: bool, dialect: str) -> StructuralVerdict:
    """The verdict; when the pair is not proven equal and the candidate gives a symmetric AI join
    call's two inputs in another order than the gold (:mod:`pipelines.aisql.symmetry`), the pair is
    compared again with that call read swapped: a proof reached so says why (the prompt's relation
    is symmetric by the rule); otherwise the first verdict stands and says the swap was tried."""
    verdict = _decide(ctx, gtree, ctree, ordered, dialect)
    if verdict.verdict == EQUAL:
        return verdict
    swapped = swapped_symmetric_calls(gtree, ctree)
    if swapped is None:
        return verdict
    ctree2, reasons = swapped
    again = _decide(ctx, gtree, ctree2, ordered, dialect)
    why = "; ".join(reasons)
    if again.verdict == EQUAL:
        return dataclasses.replace(again, reason=f"{why}; then: {again.reason}")
    return dataclasses.replace(verdict, reason=f"{verdict.reason}; with {why}: still {again.verdict.replace('_', ' ')}")


def _decide(ctx: EvalContext, gtree, ctree, ordered: bool, dialect: str) -> StructuralVerdict:
    def run(sql: str):
        rec = ctx.run(sql, max_rows=1_000_000)
        if not rec.ok:
            raise RuntimeError(rec.error or rec.status)
        return rec.rows

    verdict = compare_structures(
        run,
        gtree,
        ctree,
        pair_calls(gtree, ctree),
        ordered=ordered,
        table_columns=ctx.table_columns,
        seed=ctx.seed,
        schema=ctx.schema,
    )
    open_ = verdict.verdict == EQUAL_HERE or (verdict.verdict == CANNOT and verdict.method == "sampled")
    verifier_note = ""  # why the verifier did not decide (kept in a test-suite witness's reason too)
    if open_ and ctx.schema is not None and ctx.verifier_k:
        verdict, verifier_note = _with_verifier(ctx, gtree, ctree, verdict, division_errors=dialect == "bigquery")
        open_ = verdict.verdict not in (EQUAL, DIFFER)
    if open_ and ctx.schema is not None and ctx.test_suite:
        verdict = _with_test_suite(ctx, gtree, ctree, ordered, verdict, verifier_note)
    return verdict


def _with_verifier(
    ctx: EvalContext, gtree, ctree, verdict: StructuralVerdict, division_errors: bool = False
) -> tuple[StructuralVerdict, str]:
    """The bounded symbolic verifier (:mod:`pipelines.aisql.verifier`): no counterexample up to k rows
    per table is its own decided class; a counterexample replayed on DuckDB rejects; what it does
    not cover keeps the verdict it had, the reason saying why (the test suite runs next). Returns
    the verdict and, when the verifier did not decide, why."""
    keys = ctx.unique_keys if ctx.unique_keys is not None else {}
    res = verify(
        gtree,
        ctree,
        ctx.schema,
        keys,
        k=ctx.verifier_k,
        budget_ms=ctx.verifier_budget_ms,
        division_errors=division_errors,
    )
    if res.verdict == V_DIFFER:
        res = replay(gtree, ctree, res, ctx.schema)
    if res.verdict == EQUIVALENT_UP_TO_K:
        return StructuralVerdict(
            EQUAL,
            f"equivalent up to {res.k} rows per table: {res.reason}",
            "verifier",
            res.polarity,
            verdict.valuations,
            {"bounded_proof": {"rows_per_table": res.k, "solver": "z3", "budget_ms": ctx.verifier_budget_ms}},
            polarity_inputs=verdict.polarity_inputs,
        ), ""
    if res.verdict == V_DIFFER:
        return StructuralVerdict(DIFFER, res.reason, "verifier", [], verdict.valuations, res.witness), ""
    return dataclasses.replace(verdict, reason=f"{verdict.reason}; verifier: {res.reason}"), res.reason


def _with_test_suite(
    ctx: EvalContext, gtree, ctree, ordered: bool, verdict: StructuralVerdict, verifier_note: str = ""
) -> StructuralVerdict:
    """Counterexample databases (:mod:`pipelines.aisql.counterexamples`): a witness rejects; agreement
    is ``equal_on_test_suite`` (evidence, not a proof: the judge does not accept on it). Either
    reason says why the verifier did not decide (``verifier_note``), when it ran (#39 item 2)."""
    with contextlib.ExitStack() as borrowed:
        used: set[str] = set()

        def run(path, sql):
            if str(path) not in used:  # run in the judging's own worker (no worker start per pair)
                used.add(str(path))
                borrowed.enter_context(ctx.runtime.borrowed_session(path))
            rec = run_duckdb_sql(path, sql, ctx.runtime, budget=0, timeout_s=min(ctx.timeout_s, 10.0))
            return rec.status, rec.rows

        keys = ctx.unique_keys if ctx.unique_keys is not None else {}  # unknown: assume no key
        res = search(run, gtree, ctree, ctx.schema, keys, ordered=ordered, seed=ctx.seed)
    if res.verdict == "differ":
        why = f"; verifier: {verifier_note}, so the test suite decided" if verifier_note else ""
        return StructuralVerdict(DIFFER, res.reason + why, "test_suite", [], verdict.valuations, res.witness)
    if res.verdict == "agree":
        return StructuralVerdict(
            EQUAL_SUITE,
            f"{verdict.reason}; {res.reason}",
            "test_suite",
            verdict.polarity,
            verdict.valuations,
            polarity_inputs=verdict.polarity_inputs,
        )
    return verdict
