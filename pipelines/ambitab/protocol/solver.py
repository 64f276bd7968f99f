"""Solution policies π_sol (spec §3.4): the LLM solver through the ``solvers`` council and a
scripted solver for tests and benchmarks.

The solver reads the public spec and the clarification summary (the request plus every Q/A);
resolutions are never handed to it directly. One sample, zero repair rounds.
"""

import inspect
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from pipelines.ambitab.protocol.prompts import solver_messages
from pipelines.ambitab.record import Spec
from resources.llm.failures import ProviderUnavailable


@dataclass(frozen=True)
class SolverResult:
    sql: str | None
    reasoning: str | None = None
    raw: str | None = None
    call_id: str | None = None
    error: str | None = None


class SolverOutput(BaseModel):
    reasoning: str = ""
    type: Literal["final_sql"] = "final_sql"
    output: str


class Solver:
    name = "solver"
    model_key = ""  # the LLM behind the solver (part of the episode key)
    writes_sql = True  # False: an asking-only run (no verdicts)

    async def solve(self, spec: Spec, history, *, seed: int = 0, tag: dict | None = None) -> SolverResult:
        raise NotImplementedError


class LLMSolver(Solver):
    def __init__(self, council, member: str | None = None):
        self.council = council
        self.member = member or council.member_names[0]
        self.name = f"llm:{self.member}"
        m = council.member(self.member)
        self.model_key = f"{m.name}={m.model}"

    async def solve(self, spec, history, *, seed=0, tag=None):
        r = await self.council.aask(
            self.member,
            solver_messages(spec, list(history)),
            SolverOutput,
            {**(tag or {}), "stage": "ambitab_solver"},
            overrides={"seed": seed},
        )
        if r.status == "call_failed":
            raise ProviderUnavailable(f"solver member {self.member!r} failed: {r.error}")
        if not r.ok:  # unparseable: the verifier scores it 0 with this reason
            return SolverResult(None, raw=r.raw_text, call_id=r.call_id, error="unparseable solver output")
        return SolverResult(r.parsed.output, r.parsed.reasoning, r.raw_text, r.call_id)


class NoSolver(Solver):
    """``--solver empty``: asking-only runs. It writes no SQL, so episodes carry no verdict and SR,
    gain and gap are "cannot decide" (–), never 0."""

    name = "empty"
    writes_sql = False

    async def solve(self, spec, history, *, seed=0, tag=None):
        return SolverResult(None)


class ScriptedSolver(Solver):
    """A zero-latency solver: a fixed SQL string or ``fn(spec, history) -> sql``."""

    def __init__(self, sql_or_fn, name: str = "scripted"):
        self.fn = sql_or_fn if callable(sql_or_fn) else (lambda spec, history: sql_or_fn)
        self.name = name

    async def solve(self, spec, history, *, seed=0, tag=None):
        out = self.fn(spec, history)
        if inspect.isawaitable(out):
            out = await out
        return SolverResult(out)
