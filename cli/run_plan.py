"""What a run will cost, printed before its first step (#24 item 4): the job card's estimate
(``assets/<job>/card.py``) rendered here with the items, the LLM calls to
expect, how many of them the call log already holds, a time estimate from the council's measured
latency, and for the embedded default the one option that shrinks the run.

Estimates, not promises: validation short-circuits and rejects, so its count is an upper bound;
the time divides the calls by what the council can have in flight, at the median latency of the
council's last uncached calls in the call log (``$QUANDARY_HOME/llm_calls.sqlite``, or the shared
PostgreSQL log in distributed mode).
"""

import os
import statistics

# Before any call was measured: what one embedded call took on 2 busy cores (bench/bench_embedded_demo.py).
EMBEDDED_GUESS_S = 8.0
SHRINK_ABOVE_S = 300.0  # runs estimated longer than this name the option that shrinks them


def _council(council_path: str | None = None):
    from resources.llm.config import load_council_config

    return load_council_config(council_path)


def _measured_latency_s(models: set[str]) -> tuple[float | None, int]:
    """Median latency of the last 200 uncached, answered calls of ``models`` in the call log."""
    from assets.shared.cards import open_call_log_or_none

    log = open_call_log_or_none()
    if log is None or not models:
        return None, 0
    try:
        rows = log.rows(
            f"status = 'ok' AND latency_ms > 0 AND model IN ({','.join('?' * len(models))})",
            tuple(sorted(models)),
            columns=("latency_ms",),
            newest=200,
        )
    except Exception:  # noqa: BLE001 - as above
        return None, 0
    if not rows:
        return None, 0
    return statistics.median(r["latency_ms"] for r in rows) / 1000.0, len(rows)


def plan_for(job_name: str, partition: str, run_config: dict | None, council_path: str | None = None):
    """The job card's estimate (None for a job without one)."""
    from assets.cards import card_for

    return card_for(job_name).estimate(partition, run_config, council_path)


def _duration(s: float) -> str:
    s = int(round(s))
    if s >= 3600:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def plan_lines(job_name: str, partition: str, run_config: dict | None, council_path: str | None = None) -> list[str]:
    """The plan in at most four lines ([] for a job without an estimate); ``council_path``: the
    council file the run uses (None: the embedded default)."""
    plan = plan_for(job_name, partition, run_config, council_path)
    if plan is None:
        return []
    council = _council(council_path)
    members = [council.members[n] for n in council.councils.get(plan.role, [])] or list(council.members.values())
    latency, measured = _measured_latency_s({m.model for m in members})
    embedded = any(m.is_embedded for m in members)
    in_flight = sum(m.max_in_flight for m in members)
    if embedded:
        from resources.llm.embedded import configured_slots

        in_flight = min(in_flight, configured_slots())
    new_calls = max(0, plan.calls - (plan.cached or 0))
    estimate_s = None
    lines = [
        f"plan for {job_name} on {partition}: {plan.items}",
        (f"  LLM calls: {'up to ' if plan.bound else 'about '}{plan.calls}" if plan.calls else "  LLM calls: none")
        + (f"; {plan.cached} already in the call log" if plan.cached else "")
        + (f" ({plan.detail})" if plan.detail else ""),
    ]
    if new_calls:
        per_call = latency if latency is not None else (EMBEDDED_GUESS_S if embedded else None)
        if per_call is not None:
            estimate_s = new_calls * per_call / max(1, in_flight)
            source = (
                f"median of the council's last {measured} calls: {per_call:.1f} s"
                if latency is not None
                else f"no calls measured yet; ~{per_call:.0f} s per embedded call"
            )
            lines.append(
                f"  time: {'up to ' if plan.bound else 'about '}"
                f"{_duration(estimate_s)} "
                f"({source}, {in_flight} in flight)"
            )
    if embedded and plan.shrink and new_calls and (estimate_s is None or estimate_s > SHRINK_ABOVE_S):
        lines.append(f"  on the embedded model, to shrink it: {plan.shrink}")
    return lines


def print_plan(job_name: str, partition: str, run_config: dict | None, council_path: str | None = None) -> None:
    """Print the plan before a run starts; a plan that cannot be made is left out (never fails a run)."""
    if os.environ.get("QUANDARY_PLAN", "1") == "0":
        return
    try:
        lines = plan_lines(job_name, partition, run_config, council_path)
    except Exception:  # noqa: BLE001 - an estimate must never stop the run it estimates
        return
    for line in lines:
        print(line, flush=True)
