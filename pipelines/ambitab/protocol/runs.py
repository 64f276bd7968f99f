"""Plan and run the evaluation conditions of one corpus (what the episodes asset materialises).

A *condition* is (asker, prompt, oracle, spec-randomised?). :func:`plan_conditions` expands the
user's choice and, when ``diagnostics`` is on, adds the runs the leakage diagnostics need:

- for an LLM oracle O: the evaluated asker under O's hybrid (ΔJresp), π_full^adv under O and under
  the deterministic reference (ΔJfull), the generic policy under O (ΔRecnone);
- with ``spec_randomisation``: the evaluated asker with donor specs, under the hybrid oracle (LLM
  oracles) or the deterministic oracle itself (ΔRec_spec).

Every condition runs for every record and seed; episodes already stored are skipped.
"""

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pipelines.ambitab.protocol.askers import BASELINES, load_object, make_asker, prefixed_asker
from pipelines.ambitab.protocol.diagnostics import assign_donors
from pipelines.ambitab.protocol.episode import RunSettings, arun_episodes
from pipelines.ambitab.protocol.oracles import (
    ORACLE_KINDS,
    Oracle,
    canonical_oracle,
    deterministic_oracle_for,
    make_oracle,
)
from pipelines.ambitab.protocol.prompts import ASKER_PROMPTS, DEFAULT_ASKER_PROMPT
from pipelines.ambitab.protocol.solver import LLMSolver, NoSolver, Solver
from pipelines.ambitab.protocol.task import Task
from pipelines.ambitab.protocol.verifier import Verifier
from resources.llm.runtime import run_sync
from resources.progress import Sink

SOLVERS = ("llm", "empty")


@dataclass(frozen=True)
class Condition:
    asker: str
    prompt: str  # "" for policies without a prompt
    oracle: str  # an oracle kind (make_oracle)
    donors: bool = False

    @property
    def label(self) -> str:
        p = f"/{self.prompt}" if self.prompt else ""
        return f"{self.asker}{p} × {self.oracle}" + (" (spec randomised)" if self.donors else "")


def _is_det(kind: str) -> bool:
    return kind.startswith("det")


def plan_conditions(
    askers: Sequence[str],
    oracles: Sequence[str],
    prompts: Sequence[str] = (DEFAULT_ASKER_PROMPT,),
    *,
    diagnostics: bool = False,
    spec_randomisation: bool = False,
) -> list[Condition]:
    out: list[Condition] = []

    def add(c: Condition):
        if c not in out:
            out.append(c)

    evaluated = [a for a in askers if a not in BASELINES]
    for oracle in oracles:
        for a in askers:
            for p in prompts if a == "llm" else [""]:
                add(Condition(a, p, oracle))
        kind, at, member = oracle.partition("@")
        hybrid = (
            {"llm_scoped": "hybrid_scoped", "llm_unfiltered": "hybrid_unfiltered"}.get(kind, "hybrid") + at + member
        )
        if diagnostics and not _is_det(oracle):
            for a in evaluated:
                for p in prompts if a == "llm" else [""]:
                    add(Condition(a, p, hybrid))
            add(Condition("full_adv", "", oracle))
            add(Condition("full_adv", "", "det"))
            add(Condition("generic", "", oracle))
        if spec_randomisation:
            for a in evaluated:
                for p in prompts if a == "llm" else [""]:
                    add(Condition(a, p, oracle if _is_det(oracle) else hybrid, donors=True))
    return out


ASKERS = (*BASELINES, "llm")


def check_names(
    askers: Sequence[str], oracles: Sequence[str], prompts: Sequence[str], solver: str
) -> tuple[list[str], list[str], list[str]]:
    """The askers, oracles and prompts in canonical form (``deterministic`` -> ``det``), checked
    before a run exists; ValueError names the bad value and lists the valid ones. A dotted-path
    asker must import; an oracle's ``@member`` is checked by the council when the run starts."""
    bad = []
    for a in askers:
        if a in ASKERS:
            continue
        if (entry := prefixed_asker(a)) is not None:  # e.g. checkpoint:<run_id>: the run must exist
            try:
                entry[0](a)
            except ValueError as exc:
                bad.append(str(exc))
            continue
        if "." in a or ":" in a:
            try:
                obj = load_object(a)
            except ValueError as exc:
                bad.append(f"{exc} (askers: {', '.join(ASKERS)} or a dotted path package.module:Class)")
                continue
            # CustomAsker instantiates the class and calls decide(inp): both are checked here,
            # before a run exists, not by the first episode
            if not inspect.isclass(obj):
                bad.append(f"custom asker {a!r} is a {type(obj).__name__}, not a class with a decide(inp) method")
            elif not callable(getattr(obj, "decide", None)):
                bad.append(f"custom asker {a!r} has no decide(inp) method")
            continue
        bad.append(f"unknown asker {a!r}; choose one of {', '.join(ASKERS)} or a dotted path package.module:Class")
    canon = []
    for o in oracles:
        c = canonical_oracle(o)
        if c.partition("@")[0] not in ORACLE_KINDS:
            bad.append(
                f"unknown oracle {o!r}; choose one of {', '.join(ORACLE_KINDS)} ('deterministic' = det; "
                "an LLM kind may name a member: llm@MEMBER)"
            )
        canon.append(c)
    bad += [
        f"unknown asker prompt {p!r}; choose one of {', '.join(ASKER_PROMPTS)}"
        for p in prompts
        if p not in ASKER_PROMPTS
    ]
    if solver not in SOLVERS:
        bad.append(f"unknown solver {solver!r}; choose one of {', '.join(SOLVERS)}")
    if bad:
        raise ValueError("; ".join(bad))
    return list(askers), canon, list(prompts)


def make_solver(kind: str, council_factory: Callable[[str], object] | None) -> Solver:
    if kind == "llm":
        if council_factory is None:
            raise ValueError("the llm solver needs the 'solvers' council")
        return LLMSolver(council_factory("solvers"))
    if kind == "empty":  # asking-only runs: no SQL, no verdict (SR, gain and gap print "–")
        return NoSolver()
    raise ValueError(f"unknown solver {kind!r}; choose one of {', '.join(SOLVERS)}")


def _needs(conditions: Sequence[Condition], role: str) -> bool:
    if role == "askers":
        return any(c.asker == "llm" for c in conditions)
    return any(not _is_det(c.oracle) for c in conditions)


async def arun_conditions(
    tasks: Sequence[Task],
    conditions: Sequence[Condition],
    seeds: Sequence[int],
    *,
    council_factory: Callable[[str], object] | None,
    solver: Solver,
    verifier: Verifier,
    settings: RunSettings | None = None,
    sql_grounding: bool | None = None,
    skip: set[str] | None = None,
    concurrency: int = 8,
    progress: Sink | None = None,
    on_episode: Callable[[], None] | None = None,
) -> list[dict]:
    """Every condition's episodes; ``progress`` gets a line now and then, ``on_episode`` is called
    once per episode run (for a progress bar)."""
    if not tasks:
        return []
    corpus = tasks[0].corpus
    askers_council = council_factory("askers") if council_factory and _needs(conditions, "askers") else None
    oracles_council = council_factory("oracles") if council_factory and _needs(conditions, "oracles") else None
    donor_ids = assign_donors(tasks) if any(c.donors for c in conditions) else {}
    by_id = {t.record_id: t for t in tasks}
    donor_specs = {r: by_id[d].spec for r, d in donor_ids.items()}
    rows: list[dict] = []
    for i, c in enumerate(conditions, 1):
        oracle: Oracle = make_oracle(c.oracle, corpus, oracles_council, sql_grounding=sql_grounding)
        run_tasks = [t for t in tasks if t.record_id in donor_ids] if c.donors else list(tasks)
        label = f"[{i}/{len(conditions)}] {c.label}"

        def report(done, total, label=label):
            if on_episode:
                on_episode()
            if progress and (done == total or done % max(50, total // 10) == 0):
                progress(f"{label}: {done}/{total} episodes")

        rows += await arun_episodes(
            run_tasks,
            lambda c=c: make_asker(c.asker, askers_council, c.prompt or DEFAULT_ASKER_PROMPT),
            oracle,
            solver,
            verifier,
            seeds,
            settings=settings,
            donors=donor_specs if c.donors else None,
            donor_ids=donor_ids if c.donors else None,
            concurrency=concurrency,
            progress=report,
            skip=skip,
        )
    return rows


def run_conditions(*args, **kwargs) -> list[dict]:
    return run_sync(arun_conditions(*args, **kwargs))


def reference_oracle_name(corpus: str) -> str:
    return deterministic_oracle_for(corpus).name
