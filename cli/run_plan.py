"""What a run will cost, printed before its first step (#24 item 4): the items, the LLM calls to
expect, how many of them the call log already holds, a time estimate from the council's measured
latency, and for the embedded default the one option that shrinks the run.

Estimates, not promises: validation short-circuits and rejects, so its count is an upper bound;
the time divides the calls by what the council can have in flight, at the median latency of the
council's last uncached calls in the call log (``$QUANDARY_HOME/llm_calls.sqlite``, or the shared
PostgreSQL log in distributed mode).
"""

import os
import statistics
from dataclasses import dataclass

# Before any call was measured: what one embedded call took on 2 busy cores (bench/bench_embedded_demo.py).
EMBEDDED_GUESS_S = 8.0
SHRINK_ABOVE_S = 300.0  # runs estimated longer than this name the option that shrinks them


@dataclass
class Plan:
    items: str  # "4 generation requests (3 for the LLM)"
    calls: int  # expected LLM calls (upper bound where ``bound``)
    detail: str = ""  # "generation 3, SQL grounding 3, validation ≤ 28"
    cached: int | None = None
    bound: bool = False
    shrink: str = ""  # the one option that shrinks the run on the embedded default
    role: str = "generators"  # the council role whose members answer most of the calls


def _council():
    from resources.llm.config import load_council_config

    return load_council_config()


def _call_log():
    """The deployment's call log to read, or None when there is none yet or it cannot be read."""
    from storage.paths import llm_calls_path
    from storage.state_db import state_url

    if not state_url() and not llm_calls_path().is_file():
        return None
    try:
        from resources.llm.registry import call_log

        return call_log()
    except Exception:  # noqa: BLE001 - an estimate never stops a run; the run reports the log's fault
        return None


def _measured_latency_s(models: set[str]) -> tuple[float | None, int]:
    """Median latency of the last 200 uncached, answered calls of ``models`` in the call log."""
    log = _call_log()
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


def _cached_calls(stage: str, candidate_ids: list[str]) -> int:
    """Answered calls of ``stage`` in the call log for these item ids (a rerun makes none of them)."""
    log = _call_log()
    if log is None or not candidate_ids:
        return 0
    try:
        n = 0
        for i in range(0, len(candidate_ids), 500):
            chunk = candidate_ids[i : i + 500]
            n += log.count(
                f"status = 'ok' AND tag_stage = ? AND tag_candidate_id IN ({','.join('?' * len(chunk))})",
                (stage, *chunk),
            )
        return n
    except Exception:  # noqa: BLE001 - as above
        return 0


def abiss_plan(partition: str, run_config: dict | None) -> Plan:
    from assets.abiss.assets import GridConfig
    from pipelines.abiss.grid import PROGRAMMATIC, GridSpec, expand_grid
    from pipelines.abiss.stages import STAGES

    council = _council()
    grid = GridConfig(**(((run_config or {}).get("ops", {}).get("generation_requests", {}) or {}).get("config") or {}))
    generators = grid.generators if grid.generators is not None else [PROGRAMMATIC, *council.councils["generators"]]

    def values(xs):
        return tuple(getattr(x, "value", x) for x in xs) if xs is not None else None

    spec = GridSpec(
        tuple(generators),
        values(grid.subcategories),
        values(grid.styles),
        values(grid.difficulties),
        grid.n,
        grid.seed,
        values(grid.llm_subcategories),
    )
    requests = expand_grid(spec, partition)
    llm = [r for r in requests if r["generator"] != PROGRAMMATIC]
    # one object per request, two readings per ambiguous one; unanswerable objects need no SQL
    objects = [(r["group"], 2 if r["group"] == "ambiguous" else 1) for r in requests]
    grounding = sum(k for r in llm for k in [2 if r["group"] == "ambiguous" else 1] if r["group"] != "unanswerable")
    validators = len(council.councils["validators"])
    validation = sum(k * validators for group, k in objects for s in STAGES if s.uses_council and group in s.groups)
    cached = _cached_calls("generation", [r["request_id"] for r in llm])
    calls = len(llm) + grounding + validation
    return Plan(
        items=f"{len(requests)} generation requests ({len(llm)} for the LLM), about "
        f"{sum(k for _, k in objects)} candidates",
        calls=calls,
        bound=True,
        cached=cached,
        detail=f"generation {len(llm)}, SQL grounding {grounding}, validation ≤ {validation} with "
        f"{validators} validator{'s' if validators != 1 else ''}; short-circuits and rejections make it fewer",
        shrink="--grid configs/grid-small.yaml (one style, one difficulty, n: 1)",
        role="validators",
    )


def interaction_plan(partition: str, run_config: dict | None) -> Plan:
    from pipelines.interaction.modes import MODES

    ops = (run_config or {}).get("ops", {})
    subset = (ops.get("interaction_subset") or {}).get("config") or {}
    conv = (ops.get("interaction_conversations") or {}).get("config") or {}
    from storage.stores import latest_frame

    stored = latest_frame("dataset", partition)
    n_questions = stored.height if stored is not None else 0
    if subset.get("max_questions") is not None:
        n_questions = min(n_questions, int(subset["max_questions"]))
    modes = conv.get("modes") or list(MODES)
    agents = conv.get("agents") or _council().councils["system_agents"]
    steps = int(conv.get("max_steps", 3))
    conversations = n_questions * len(modes) * len(agents)
    # per turn: a system-agent call and a simulated-user answer; a final turn; a category prediction
    calls = conversations * (2 * steps + 2)
    return Plan(
        items=f"{conversations} conversations ({n_questions} questions × {len(modes)} modes × "
        f"{len(agents)} agent{'s' if len(agents) != 1 else ''}, up to {steps} clarification turns)",
        calls=calls,
        bound=True,
        detail="",
        role="system_agents",
        shrink="--max-questions 1 --max-steps 0 (one question, the final turn only)",
    )


def ambitab_eval_plan(partition: str, run_config: dict | None) -> Plan:
    from assets.ambitab.evaluation import AmbitabEvalConfig
    from pipelines.ambitab.protocol.runs import plan_conditions

    cfg = AmbitabEvalConfig(**(((run_config or {}).get("ops", {}).get("ambitab_episodes") or {}).get("config") or {}))
    from storage.stores import latest_frame

    frame = latest_frame("ambitab_records", partition)
    n = 0
    if frame is not None:
        import polars as pl

        if cfg.split is not None and "split" in frame.columns:
            frame = frame.filter(pl.col("split") == cfg.split)
        n = frame.height if cfg.limit is None else min(frame.height, cfg.limit)
    conditions = plan_conditions(
        cfg.askers, cfg.oracles, cfg.prompts, diagnostics=cfg.diagnostics, spec_randomisation=cfg.spec_randomisation
    )
    episodes = n * len(conditions) * len(cfg.seeds)
    llm_askers = sum(1 for c in conditions if c.asker == "llm")
    calls = len(cfg.seeds) * n * (len(conditions) * (1 if cfg.solver else 0) + llm_askers)
    return Plan(
        items=f"{episodes} episodes ({n} records × {len(conditions)} conditions × {len(cfg.seeds)} seeds)",
        calls=calls,
        role="solvers",
        detail="a solver call per episode, plus the LLM asker's",
        shrink="--limit 5 --seeds 1 (five records, one seed)",
    )


def aisql_plan(partition: str, run_config: dict | None) -> Plan:
    """``aisql judge``: one judge call per (pair, LLM method), up to three with retries; EX needs none.
    With ``--backend council`` the AI operators are answered by the council too (not counted: how many
    distinct operator calls a query makes is known only when it runs)."""
    from assets.aisql.assets import AisqlResource, planned_pairs

    aisql = AisqlResource(**((((run_config or {}).get("resources") or {}).get("aisql") or {}).get("config") or {}))
    pairs = planned_pairs(aisql, partition)
    llm_methods = [m for m in aisql.methods if m != "ex"]
    detail = f"{len(llm_methods)} LLM method{'s' if len(llm_methods) != 1 else ''} × {pairs} pairs"
    if aisql.backend == "council":
        detail += "; plus the AI operators' calls (backend council)"
    if aisql.generator_samples:
        detail += f"; plus {aisql.generator_samples} generated candidates per question"
    n_methods = f"{len(aisql.methods)} method{'s' if len(aisql.methods) != 1 else ''}"
    return Plan(
        items=f"{pairs} pairs × {n_methods} = {pairs * len(aisql.methods)} verdicts",
        calls=pairs * len(llm_methods),
        role="judges",
        detail=detail,
        shrink="--methods ex,ours --questions Q1 (one gold query, two methods)",
    )


PLANNERS = {"abiss_interaction_job": interaction_plan, "ambitab_eval_job": ambitab_eval_plan, "aisql_job": aisql_plan}


def plan_for(job_name: str, partition: str, run_config: dict | None) -> Plan | None:
    from assets.definitions import MAIN_JOB

    planner = abiss_plan if job_name == MAIN_JOB else PLANNERS.get(job_name)
    return planner(partition, run_config) if planner is not None else None


def _duration(s: float) -> str:
    s = int(round(s))
    if s >= 3600:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def plan_lines(job_name: str, partition: str, run_config: dict | None) -> list[str]:
    """The plan in at most four lines ([] for a job without a planner)."""
    plan = plan_for(job_name, partition, run_config)
    if plan is None:
        return []
    council = _council()
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


def print_plan(job_name: str, partition: str, run_config: dict | None) -> None:
    """Print the plan before a run starts; a plan that cannot be made is left out (never fails a run)."""
    if os.environ.get("QUANDARY_PLAN", "1") == "0":
        return
    try:
        lines = plan_lines(job_name, partition, run_config)
    except Exception:  # noqa: BLE001 - an estimate must never stop the run it estimates
        return
    for line in lines:
        print(line, flush=True)
