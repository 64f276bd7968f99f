"""#24 item 4: before the first step a run says what it will cost: items, LLM calls, how many the
call log already holds, a time from the council's measured latency, and (when it is long on the
embedded model) the one option that shrinks it."""

import os

import pytest

from assets.cards import ABISS
from assets.definitions import MAIN_JOB
from cli.commands.run import DEMO_COUNCIL, DEMO_GRID
from cli.run_plan import cpu_share, plan_lines, time_range
from pipelines.abiss.grid import PROGRAMMATIC, GridSpec, expand_grid
from storage.llm_log import CallLog, CallRecord
from storage.paths import llm_calls_path


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("QUANDARY_HOME", str(tmp_path / "qhome"))
    monkeypatch.setenv("QUANDARY_COUNCIL_CONFIG", str(DEMO_COUNCIL))
    # the plan a user sees: the embedded server's default slots, not the one the suite serves with
    monkeypatch.delenv("QUANDARY_EMBEDDED_PARALLEL", raising=False)
    return tmp_path / "qhome"


def _record(log: CallLog, i: int, latency_ms: float, stage: str = "s03", item: str = "c") -> None:
    log.record(
        CallRecord(
            call_id=f"k{i}-{stage}-{item}",
            status="ok",
            member="smollm2",
            model="openai/smollm2",
            request={},
            latency_ms=latency_ms,
            tag={"stage": stage, "candidate_id": item},
        )
    )


def test_the_demo_plan_counts_its_calls_and_fits_in_minutes(home):
    lines = plan_lines(MAIN_JOB, "university", ABISS.config(grid=DEMO_GRID))
    assert lines[0].startswith(f"plan for {MAIN_JOB} on university: ")
    plan = ABISS.estimate("university", ABISS.config(grid=DEMO_GRID))
    assert f"LLM calls: up to {plan.calls}" in lines[1] and "generation 3," in lines[1]
    assert "no calls measured yet" in lines[2]
    assert not any("to shrink it" in line for line in lines)  # the demo is already small


def test_the_estimate_uses_measured_latency_and_counts_cached_calls(home):
    log = CallLog(llm_calls_path())
    for i in range(5):
        _record(log, i, 2000.0)
    spec = GridSpec(
        (PROGRAMMATIC, "smollm2"),
        ("answerable", "lexical_overlap", "missing_entity"),
        ("formal",),
        ("moderate",),
        1,
        42,
        ("answerable", "lexical_overlap", "missing_entity"),
    )
    llm_requests = [r for r in expand_grid(spec, "university") if r["generator"] != PROGRAMMATIC]
    for i, r in enumerate(llm_requests[:2]):
        _record(log, 100 + i, 2000.0, stage="generation", item=r["request_id"])
    lines = plan_lines(MAIN_JOB, "university", ABISS.config(grid=DEMO_GRID))
    assert "2 already in the call log" in lines[1], lines
    assert "last 7 calls: median 2.0 s" in lines[2], lines


def test_a_long_run_on_the_embedded_model_names_the_option_that_shrinks_it(home):
    lines = plan_lines(MAIN_JOB, "university", None)  # the paper's grid
    assert (
        lines[-1]
        == "  on the embedded model, to shrink it: --grid configs/grid-small.yaml (one style, one difficulty, n: 1)"
    )
    assert "up to " in lines[2] and "h" in lines[2].split("up to ")[1].split()[0]  # hours, said up front


def _aisql_config(shared_data, **over) -> dict:
    return {"resources": {"aisql": {"config": {"data_root": str(shared_data), **over}}}}


def test_the_aisql_plan_counts_pairs_times_methods_and_one_judge_call_per_llm_verdict(home, shared_data):
    # lazy: imports dagster (~1 s); only the tests that need it pay
    from assets.aisql.assets import AisqlResource, planned_pairs

    pairs = planned_pairs(AisqlResource(data_root=str(shared_data)), "movie")
    assert pairs > 0
    lines = plan_lines("aisql_job", "movie", _aisql_config(shared_data))
    assert lines[0] == f"plan for aisql_job on movie: {pairs} pairs × 7 methods = {pairs * 7} verdicts"
    assert f"LLM calls: about {pairs * 5} (5 LLM methods × {pairs} pairs)" in lines[1]
    # hours of judging: EX and the deterministic layers (no LLM call) and the autorater on one question
    assert lines[-1].endswith(
        "--methods ex,layers,ours --questions Q1 (one gold query; EX and the layers make no LLM call)"
    )


def test_an_ex_only_aisql_plan_says_it_makes_no_llm_call(home, shared_data):
    lines = plan_lines("aisql_job", "movie", _aisql_config(shared_data, methods=["ex"], question_ids=["Q1"]))
    assert lines[1].startswith("  LLM calls: none")
    assert not any("to shrink it" in line for line in lines)


def test_the_time_is_a_range_that_widens_with_the_load_on_this_machine(home):
    """#31 item 3: measured latencies give the low end (median) and the high end (90th percentile,
    slowed by the share of the cores other work takes now); a busy machine widens the range."""
    log = CallLog(llm_calls_path())
    for i, ms in enumerate([1000.0] * 8 + [3000.0] * 2):
        _record(log, i, ms)
    quiet = plan_lines(MAIN_JOB, "university", ABISS.config(grid=DEMO_GRID), busy=0.0)[2]
    busy = plan_lines(MAIN_JOB, "university", ABISS.config(grid=DEMO_GRID), busy=9.0)[2]
    assert "last 10 calls: median 1.0 s" in quiet and "0.0 of" in quiet, quiet
    assert "(load 9.0)" in busy, busy

    def bounds(line):
        low, high = line.split("up to ")[1].split(" ")[0].split("–")
        return low, high

    assert bounds(quiet)[0] == bounds(busy)[0]  # the median does not depend on the load now
    assert bounds(quiet)[1] != bounds(busy)[1]
    low, high = time_range(30, [1.0] * 8 + [3.0] * 2, in_flight=2, share=cpu_share(2, 9.0))
    assert (low, high) == (15.0, 15 * 3.0 * 11 / 2)
    assert cpu_share(2, 0.0) == 1.0


def test_the_high_end_holds_when_the_load_rises_during_the_run(home):
    """#42 item 5: the demo was planned at load 4 on 2 cores and ran at load 4-9; the high end must
    cover the run at the higher load: at least the 90th-percentile time at load 9."""
    log = CallLog(llm_calls_path())
    for i, ms in enumerate([1000.0] * 8 + [3000.0] * 2):
        _record(log, i, ms)
    line = plan_lines(MAIN_JOB, "university", ABISS.config(grid=DEMO_GRID), busy=4.0)[2]
    low, high = (_seconds(x) for x in line.split("up to ")[1].split(" ")[0].split("–"))
    calls = int(
        plan_lines(MAIN_JOB, "university", ABISS.config(grid=DEMO_GRID), busy=4.0)[1].split("up to ")[1].split()[0]
    )
    in_flight = int(line.split(", ")[1].split(" in flight")[0])
    at_load_9 = time_range(calls, [1.0] * 8 + [3.0] * 2, in_flight, share=cpu_share(os.cpu_count() or 1, 9.0))[1]
    assert high >= at_load_9 - 1 and low <= calls / in_flight * 1.0 + 1, line
    assert "allows for a load of 10.0" in line


def _seconds(text: str) -> float:
    """'1h02m', '4m06s' or '45s' as seconds."""
    import re

    h, m, s = (re.search(rf"(\d+){u}", text) for u in ("h", "m(?!s)", "s"))
    return sum(int(x.group(1)) * k for x, k in ((h, 3600), (m, 60), (s, 1)) if x)


# The demo's calls per step, from its call log (2026-12-04, embedded smollm2, one validator, 4 slots,
# load 4-9): generation, SQL grounding, then stages 3-10; and the ABISS part took 6m33s.
DEMO_STEP_CALLS = (3, 3, 20, 16, 1, 7, 4, 4, 35, 3)
DEMO_MEDIAN_S, DEMO_P90_S = 12.6, 20.7


def test_the_plans_bound_holds_for_every_step_of_the_demo(home):
    """#42 item 5: 'up to' is a bound step by step: stage 9 compares a candidate with every other
    subcategory until one is lost (the demo's s09 made 35 calls for 17 candidates; the plan counted
    one comparison per candidate)."""
    plan = ABISS.estimate("university", ABISS.config(grid=DEMO_GRID))
    assert len(plan.steps) == len(DEMO_STEP_CALLS) and sum(plan.steps) == plan.calls
    assert all(bound >= real for bound, real in zip(plan.steps, DEMO_STEP_CALLS)), plan.steps
    assert plan.fewest_calls <= sum(DEMO_STEP_CALLS) <= plan.calls


def test_the_high_end_waits_out_every_steps_last_wave():
    """Ten steps of 1-35 calls at 4 in flight take at least one latency each: 26 waves of the demo,
    not 96 calls ÷ 4 = 24; the low end counts the fewest calls."""
    latencies = [DEMO_MEDIAN_S] * 9 + [DEMO_P90_S]
    low, high = time_range(sum(DEMO_STEP_CALLS), latencies, 4, steps=DEMO_STEP_CALLS, fewest=40)
    assert high == 26 * DEMO_P90_S and low == 40 / 4 * DEMO_MEDIAN_S
    assert time_range(96, latencies, 4)[1] == 24 * DEMO_P90_S  # one step: calls ÷ slots
    # the demo's ABISS part, 6m33s at load 4-9, within the range its own latencies give at load 9
    low, high = time_range(
        sum(DEMO_STEP_CALLS), latencies, 4, share=cpu_share(2, 9.0), steps=DEMO_STEP_CALLS, fewest=40
    )
    assert low <= 393 <= high
