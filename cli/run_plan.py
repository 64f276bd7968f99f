"""What a run will cost, printed before its first step (#24 item 4): the job card's estimate
(``assets/<job>/card.py``) rendered here with the items, the LLM calls to
expect, how many of them the call log already holds, a time estimate from the council's measured
latency, and for the embedded default the one option that shrinks the run.

Estimates, not promises: validation short-circuits and rejects, so its count is an upper bound;
the time is a range (#31 item 3): the calls divided by what the council can have in flight, at the
median latency of the council's last uncached calls in the call log (``$QUANDARY_HOME/llm_calls.sqlite``,
or the shared PostgreSQL log in distributed mode) for the low end, and at their 90th percentile for
the high end — for the embedded model, which shares this machine's cores, further divided by the
share of the cores it would get at a load of LOAD_SWING × the worst load seen now or over the last
15 minutes (a busy machine's load swings while a run lasts, #42 item 5).
"""

import math
import os
import statistics

# Before any call was measured: what one embedded call took on 2 busy cores (bench/bench_embedded_demo.py).
EMBEDDED_GUESS_S = 8.0
SHRINK_ABOVE_S = 300.0  # runs estimated longer than this name the option that shrinks them
# A busy machine's load swings while a run lasts: the demo planned at load 4 ran at 4-9 on 2 cores
# (#42 item 5). The high end assumes up to this multiple of the worst load seen now or over the
# last 5 and 15 minutes, so it holds through such a swing.
LOAD_SWING = 2.5


def _council(council_path: str | None = None):
    from resources.llm.config import load_council_config

    return load_council_config(council_path)


def _measured_latencies_s(models: set[str]) -> list[float]:
    """Latencies (s) of the last 200 uncached, answered calls of ``models`` in the call log."""
    from assets.shared.cards import open_call_log_or_none

    log = open_call_log_or_none()
    if log is None or not models:
        return []
    try:
        rows = log.rows(
            f"status = 'ok' AND latency_ms > 0 AND model IN ({','.join('?' * len(models))})",
            tuple(sorted(models)),
            columns=("latency_ms",),
            newest=200,
        )
    except Exception:  # noqa: BLE001 - as above
        return []
    return [r["latency_ms"] / 1000.0 for r in rows]


def busy_cores(cores: int) -> float:
    """How many cores other work wants now: the larger of the /proc/stat sample the embedded server
    sizes its threads by and the 1-minute load average (which also counts work queued beyond the
    cores, e.g. a load of 9 on 2 cores)."""
    from resources.llm.embedded import machine_load

    try:
        avg = os.getloadavg()[0]
    except OSError:
        avg = 0.0
    return max(machine_load(cores, sample_s=0.2), avg)


def peak_busy(busy_now: float) -> float:
    """The load the high end allows for: :data:`LOAD_SWING` × the worst of the load now and the 5-
    and 15-minute load averages."""
    try:
        averages = os.getloadavg()
    except OSError:
        averages = (0.0, 0.0, 0.0)
    return LOAD_SWING * max(busy_now, *averages)


def cpu_share(cores: int, busy: float) -> float:
    """The share of its full speed a CPU-bound server wanting every core gets beside ``busy`` cores
    of other work (fair scheduling): 1 on a quiet machine, 2/11 beside a load of 9 on 2 cores."""
    return min(1.0, cores / max(float(cores), cores + busy))


def time_range(
    calls: int,
    latencies: list[float],
    in_flight: int,
    share: float = 1.0,
    steps: tuple[int, ...] = (),
    fewest: int | None = None,
) -> tuple[float, float]:
    """(low, high) seconds for ``calls`` new calls: the low end ``fewest`` calls (default ``calls``)
    at the median latency ÷ in flight; the high end every step's calls (``steps``, run one after
    another; default one step of ``calls``) in waves of ``in_flight`` at the 90th percentile ÷
    ``share`` (the part of the machine the calls get). A step's last wave is a full latency however
    few calls it holds: ten cascade stages of 1-35 calls at 4 in flight are 10 waves more than
    their calls ÷ 4 (#42 item 5)."""
    ordered = sorted(latencies)
    p50 = statistics.median(ordered)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    slots = max(1, in_flight)
    low_calls = calls if fewest is None else min(fewest, calls)
    waves = sum(math.ceil(n / slots) for n in (steps or (calls,)) if n > 0)
    return low_calls / slots * p50, waves * max(p50, p90) / max(share, 0.05)


def plan_for(job_name: str, partition: str, run_config: dict | None, council_path: str | None = None):
    """The job card's estimate (None for a job without one)."""
    from assets.cards import card_for

    return card_for(job_name).estimate(partition, run_config, council_path)


def _duration(s: float) -> str:
    s = int(round(s))
    if s >= 3600:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def plan_lines(
    job_name: str,
    partition: str,
    run_config: dict | None,
    council_path: str | None = None,
    busy: float | None = None,
    busy_peak: float | None = None,
) -> list[str]:
    """The plan in at most four lines ([] for a job without an estimate); ``council_path``: the
    council file the run uses (None: the embedded default); ``busy``: cores other work keeps busy
    (None: measured now); ``busy_peak``: the load the high end allows for (None: :func:`peak_busy`
    when measured, else ``LOAD_SWING × busy``)."""
    plan = plan_for(job_name, partition, run_config, council_path)
    if plan is None:
        return []
    council = _council(council_path)
    members = [council.members[n] for n in council.councils.get(plan.role, [])] or list(council.members.values())
    latencies = _measured_latencies_s({m.model for m in members})
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
    if new_calls and (latencies or embedded):
        measured = latencies or [EMBEDDED_GUESS_S]
        cores = os.cpu_count() or 1
        share = 1.0
        load = ""
        if embedded:  # the embedded server computes on this machine's cores: what is free now matters
            if busy is None:
                busy = busy_cores(cores)
                busy_peak = peak_busy(busy) if busy_peak is None else busy_peak
            busy_peak = LOAD_SWING * busy if busy_peak is None else busy_peak
            share = cpu_share(cores, busy_peak)  # the high end: the load may rise while it runs
            load = f"; {min(busy, cores):.1f} of {cores} cores busy now" + (
                f" (load {busy:.1f})" if busy > cores else ""
            )
            if busy_peak > 0:
                load += f"; the high end allows for a load of {busy_peak:.1f}"
        # the calls the log already holds come off the low end's count; the high end keeps every step
        fewest = None if plan.fewest_calls is None else max(0, plan.fewest_calls - (plan.cached or 0))
        low, high = time_range(new_calls, measured, in_flight, share, plan.steps, fewest)
        estimate_s = low  # the shrink hint goes by the low end: it is about the run, not the load
        source = (
            f"last {len(latencies)} calls: median {statistics.median(latencies):.1f} s"
            if latencies
            else f"no calls measured yet; ~{EMBEDDED_GUESS_S:.0f} s per embedded call"
        )
        span = _duration(low) if _duration(low) == _duration(high) else f"{_duration(low)}–{_duration(high)}"
        lines.append(f"  time: {'up to ' if plan.bound else 'about '}{span} ({source}, {in_flight} in flight{load})")
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
