"""One *job card* per Dagster job (#28 item 1): everything the command line, the plan line and
``quandary submit`` need to know about a job, written once in the job's own slice
(``assets/<job>/card.py``) and listed in ``assets/cards.py``.

A card holds the job object itself (its name is the job's, never a copy), what its partitions
are, a config builder (plain values -> Dagster run config, checked against the job's config
classes before a run exists), a cost estimate (:class:`Plan`, printed before the first step) and
a summary (the lines that describe a finished run of the job).

Estimates, not promises: validation short-circuits and rejects, so a count may be an upper bound
(``Plan.bound``).
"""

from collections.abc import Callable
from dataclasses import dataclass

from resources.llm.config import load_council_config
from resources.llm.registry import call_log
from storage.paths import llm_calls_path
from storage.state_db import state_url


@dataclass(frozen=True)
class Plan:
    """What a run will cost (#24 item 4)."""

    items: str  # "4 generation requests (3 for the LLM)"
    calls: int  # expected LLM calls (upper bound where ``bound``)
    detail: str = ""  # "generation 3, SQL grounding 3, validation ≤ 28"
    cached: int | None = None
    bound: bool = False
    shrink: str = ""  # the one option that shrinks the run on the embedded default
    role: str = "generators"  # the council role whose members answer most of the calls
    # Where ``bound``: the calls of each step that starts when the one before has ended (the high end
    # waits out every step's last wave, #42 item 5), and the fewest calls a run makes (the low end).
    # Empty / None: one step of ``calls``, and ``calls`` for the low end.
    steps: tuple[int, ...] = ()
    fewest_calls: int | None = None


def _no_plan(partition: str, run_config: dict | None, council_path: str | None = None) -> Plan | None:
    return None


def _no_summary(result, partition: str) -> list[str]:
    return []


def _no_preflight(partition: str, run_config: dict | None, council_path: str | None = None) -> None:
    return None


@dataclass(frozen=True)
class JobCard:
    """One job, described once."""

    job: object  # the Dagster job definition (an unresolved asset job)
    partitions: str  # what a partition of the job is, in words ("a registered database")
    # keyword values -> run config ({} when none is given); an unknown name raises ValueError
    config: Callable[..., dict]
    # (partition, run config, council file or None) -> Plan, or None when the job has no estimate
    estimate: Callable[..., Plan | None] = _no_plan
    # (finished run's result, partition) -> the lines that summarise it
    summary: Callable[..., list[str]] = _no_summary
    database_partitions: bool = False  # partitioned by registered database (dynamic) vs a fixed list
    # (partition, run config, council file or None) -> None; raises PreflightError (one line naming
    # the option and what is allowed) for values the run would only refuse once it exists (#31 item 1)
    preflight: Callable[..., None] = _no_preflight

    @property
    def name(self) -> str:
        return self.job.name


def config_fields(config_class, values: dict, where: str) -> dict:
    """``values`` without the ``None`` ones, every name checked against ``config_class``'s fields."""
    fields = config_class.model_fields
    unknown = sorted(k for k in values if k not in fields)
    if unknown:
        raise ValueError(f"{where}: unknown config field(s) {', '.join(unknown)}; fields: {', '.join(sorted(fields))}")
    return {k: v for k, v in values.items() if v is not None}


def op_config(op: str, config_class, values: dict) -> dict:
    """``{"ops": {op: {"config": ...}}}`` for the given values ({} when none is set)."""
    cfg = config_fields(config_class, values, op)
    return {"ops": {op: {"config": cfg}}} if cfg else {}


def op_values(run_config: dict | None, op: str) -> dict:
    """The config values a run config gives ``op`` ({} when none): for the op's own card only."""
    return (((run_config or {}).get("ops") or {}).get(op) or {}).get("config") or {}


def ops_config(ops: dict, values: dict) -> dict:
    """Run config for several ops at once: each value goes to the op whose config class has that
    field (``ops``: op name -> config class, fields disjoint); an unknown name raises ValueError."""
    known = {name for cls in ops.values() for name in cls.model_fields}
    unknown = sorted(k for k in values if k not in known)
    if unknown:
        raise ValueError(f"unknown config field(s) {', '.join(unknown)}; fields: {', '.join(sorted(known))}")
    return merge_configs(
        *(op_config(op, cls, {k: v for k, v in values.items() if k in cls.model_fields}) for op, cls in ops.items())
    )


def resource_config(resource: str, config_class, values: dict) -> dict:
    cfg = config_fields(config_class, values, resource)
    return {"resources": {resource: {"config": cfg}}} if cfg else {}


def resource_values(run_config: dict | None, resource: str) -> dict:
    return (((run_config or {}).get("resources") or {}).get(resource) or {}).get("config") or {}


def merge_configs(*configs: dict) -> dict:
    """Run configs merged section by section (ops, resources)."""
    out: dict = {}
    for cfg in configs:
        for section, entries in cfg.items():
            out.setdefault(section, {}).update(entries)
    return out


def council_config(council_path: str | None) -> dict:
    """Run config handing every job's council resource the council file (resolved at the edge)."""
    return {"resources": {"council": {"config": {"config_path": council_path}}}} if council_path else {}


def council_path_of(run_config: dict | None) -> str | None:
    """The council file a run config hands the council resource (None: the default)."""
    return resource_values(run_config, "council").get("config_path")


def council(council_path: str | None = None):
    return load_council_config(council_path)


def open_call_log_or_none():
    """The deployment's call log to read, or None when there is none yet or it cannot be read."""
    if not state_url() and not llm_calls_path().is_file():
        return None
    try:
        return call_log()
    except Exception:  # noqa: BLE001 - an estimate never stops a run; the run reports the log's fault
        return None


def cached_calls(stage: str, candidate_ids: list[str]) -> int:
    """Answered calls of ``stage`` in the call log for these item ids (a rerun makes none of them)."""
    log = open_call_log_or_none()
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
