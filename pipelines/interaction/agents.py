"""System agents under test (ABISS §5.1): the council baseline and custom agents by dotted path.

An agent has a ``name`` and two methods::

    classify(question: Question) -> str | None      # a subcategory id, or None (no classification phase)
    respond(turn: Turn) -> SystemResponse | dict    # exactly one of question / sql / feedback

:class:`CouncilSystemAgent` is the paper's baseline: one member of the ``system_agents`` council is
one system under test. A custom agent is any class named by ``package.module:Class`` (or
``package.module.Class``); it is built with no arguments, and a dict answer such as
``{"sql": "SELECT ..."}`` is normalised like an LLM answer. An agent whose ``classify`` returns
None for a question, or that has no ``classify`` (an end-to-end architecture without a
classification phase), runs only the taxonomy-only and taxonomy-free modes for it (§5.1: "only
the taxonomy-only and taxonomy-free modes remain"); ground truth and predicted are skipped.

Normalisation (reference rules, with its empty-string bug fixed): blank strings are no answer;
no field → ``empty``; several fields → ``multiple`` and the priority question > sql > feedback
keeps one; on the final turn a question is not allowed (``question_on_final_turn``, no answer).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field, replace

from pipelines.abiss.taxonomy import SUBCATEGORY_BY_ID
from pipelines.interaction import prompts


@dataclass(frozen=True)
class Question:
    question_id: str
    db_id: str
    question: str
    evidence: str | None
    schema_context: str
    db_path: str
    style: str | None = None


@dataclass(frozen=True)
class Turn:
    question: Question
    history: tuple[tuple[str, str | None], ...]  # completed (system text, user answer) turns
    mode: str
    category: str | None  # subcategory id in ground_truth / predicted modes, else None
    step: int  # 0-based system turn
    max_steps: int  # clarification turns; step == max_steps is the final turn

    @property
    def final(self) -> bool:
        return self.step >= self.max_steps


@dataclass(frozen=True)
class SystemResponse:
    question: str | None = None
    sql: str | None = None
    feedback: str | None = None
    status: str = "ok"  # ok | empty | multiple | question_on_final_turn | parse_failed | call_failed | agent_error
    raw: str | None = None
    call_id: str | None = None

    @property
    def kind(self) -> str | None:
        return "question" if self.question else "sql" if self.sql else "feedback" if self.feedback else None

    @property
    def text(self) -> str:
        return self.question or self.sql or self.feedback or ""


def _blank_to_none(v) -> str | None:
    if v is None:
        return None
    s = str(v).strip()
    return s or None


def normalise(fields: dict, final: bool, raw: str | None = None, call_id: str | None = None) -> SystemResponse:
    q = _blank_to_none(fields.get("question", fields.get("system_question")))
    sql = _blank_to_none(fields.get("sql", fields.get("system_sql")))
    fb = _blank_to_none(fields.get("feedback", fields.get("system_feedback")))
    if final and q is not None:
        if sql is None and fb is None:
            return SystemResponse(status="question_on_final_turn", raw=raw, call_id=call_id)
        q = None
    given = [x for x in (q, sql, fb) if x is not None]
    if not given:
        return SystemResponse(status="empty", raw=raw, call_id=call_id)
    status = "multiple" if len(given) > 1 else "ok"
    if q is not None:
        return SystemResponse(question=q, status=status, raw=raw, call_id=call_id)
    if sql is not None:
        return SystemResponse(sql=sql, status=status, raw=raw, call_id=call_id)
    return SystemResponse(feedback=fb, status=status, raw=raw, call_id=call_id)


@dataclass
class ClassifyResult:
    subcategory: str | None
    status: str = "ok"
    call_id: str | None = None
    raw: str | None = None


class CouncilSystemAgent:
    """One ``system_agents`` council member as the system under test (the paper's baseline)."""

    def __init__(self, council, member: str):
        council.member(member)  # fail fast on a typo
        self.council = council
        self.member = member
        self.name = member

    def classify_detailed(self, q: Question) -> ClassifyResult:
        r = self.council.ask(
            self.member,
            prompts.classify_messages(q.schema_context, q.question, q.evidence),
            prompts.CategoryPrediction,
            tag=dict(stage="interaction_classify", candidate_id=q.question_id),
        )
        if not r.ok:
            return ClassifyResult(None, r.status, r.call_id, r.raw_text)
        return ClassifyResult(r.parsed.category, "ok", r.call_id, r.raw_text)

    def classify(self, q: Question) -> str | None:
        return self.classify_detailed(q).subcategory

    def respond(self, turn: Turn) -> SystemResponse:
        q = turn.question
        sub = SUBCATEGORY_BY_ID.get(turn.category) if turn.category else None
        msgs = prompts.respond_messages(
            q.schema_context, q.question, q.evidence, list(turn.history), turn.mode, sub, turn.step, turn.max_steps
        )
        schema = prompts.SystemFinalTurn if turn.final else prompts.SystemTurn
        r = self.council.ask(
            self.member,
            msgs,
            schema,
            tag=dict(stage="interaction_system", candidate_id=q.question_id, mode=turn.mode, step=turn.step),
        )
        if not r.ok:
            return SystemResponse(status=r.status, raw=r.raw_text, call_id=r.call_id)
        return normalise(r.parsed.model_dump(), turn.final, raw=r.raw_text, call_id=r.call_id)


@dataclass
class AgentHandle:
    """An agent plus what the runner needs to know about it."""

    agent: object
    name: str
    kind: str  # "council" | "custom"
    spec: str
    meta: dict = field(default_factory=dict)

    def classify(self, q: Question) -> ClassifyResult:
        if hasattr(self.agent, "classify_detailed"):
            return self.agent.classify_detailed(q)
        fn = getattr(self.agent, "classify", None)
        if fn is None:
            return ClassifyResult(None, "no_classification")
        try:
            label = fn(q)
        except Exception as exc:  # noqa: BLE001 - a failing custom agent is recorded, never fatal
            return ClassifyResult(None, "agent_error", raw=f"{type(exc).__name__}: {exc}")
        if label is None:
            return ClassifyResult(None, "no_classification")
        if label not in SUBCATEGORY_BY_ID:
            return ClassifyResult(None, "unknown_label", raw=str(label))
        return ClassifyResult(label)

    def respond(self, turn: Turn) -> SystemResponse:
        try:
            out = self.agent.respond(turn)
        except Exception as exc:  # noqa: BLE001
            return SystemResponse(status="agent_error", raw=f"{type(exc).__name__}: {exc}")
        if isinstance(out, SystemResponse):
            if out.status in ("ok", "multiple"):  # re-check what a custom agent built by hand
                checked = normalise(
                    {"question": out.question, "sql": out.sql, "feedback": out.feedback},
                    turn.final,
                    raw=out.raw,
                    call_id=out.call_id,
                )
                # an answer already reduced from several fields keeps saying so
                if out.status == "multiple" and checked.status == "ok":
                    checked = replace(checked, status="multiple")
                return checked
            return out
        if isinstance(out, dict):
            return normalise(out, turn.final, raw=repr(out))
        if isinstance(out, str):  # a bare string is taken as SQL
            return normalise({"sql": out}, turn.final, raw=out)
        return SystemResponse(status="parse_failed", raw=repr(out))


def load_agent(spec: str, council) -> AgentHandle:
    """A member name of the ``system_agents`` council, or ``package.module:Class`` / ``package.module.Class``."""
    if council is not None and spec in council.member_names:
        return AgentHandle(CouncilSystemAgent(council, spec), spec, "council", spec)
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
    elif "." in spec:
        module_name, _, attr = spec.rpartition(".")
    else:
        members = council.member_names if council is not None else []
        raise ValueError(
            f"agent {spec!r} is neither a system_agents council member ({', '.join(members)}) "
            "nor a dotted path package.module:Class"
        )
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"agent {spec!r}: cannot import {attr!r} from {module_name!r} ({exc})") from None
    agent = cls() if isinstance(cls, type) else cls
    if not hasattr(agent, "respond"):
        raise ValueError(f"agent {spec!r} has no respond(turn) method")
    return AgentHandle(agent, str(getattr(agent, "name", attr)), "custom", spec)
