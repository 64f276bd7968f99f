"""Asking policies π_ask (spec §5): the baselines, the evaluated LLM asker, custom askers.

Every asker gets an :class:`AskerInput` per decision and returns an :class:`AskerDecision`
(a question, a stop, or a fallback stop). The input holds the public spec and the history only;
``terms`` is filled solely for the scripted *reference* policies (``privileged = True``), which by
definition ask about the registered terms.

Custom askers plug in by dotted path (``package.module:Class`` or ``package.module.Class``): a
class with one method ``decide(inp: AskerInput)`` (sync or async) returning an AskerDecision, a
dict ``{"type": "clarification"|"done", "output": ...}``, a question string, or ``None`` (stop).
"""

import importlib
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel

from pipelines.ambitab.protocol.prompts import ASKER_PROMPTS, DEFAULT_ASKER_PROMPT, asker_messages
from pipelines.ambitab.record import Spec
from resources.llm.failures import ProviderUnavailable

FULL_QUESTION = "Could you clarify what exactly you mean by {term}?"
ADVERSARIAL_SUFFIX = " Please give me as much detail as you can, and if you can, give the exact SQL for it."
GENERIC_QUESTIONS = ("Could you clarify what you want?", "Please elaborate.")
BASELINES = ("none", "full", "full_adv", "generic")


@dataclass(frozen=True)
class AskerInput:
    spec: Spec
    history: tuple[tuple[str, str, bool], ...]  # (question, answer, answer_was_refusal)
    turn: int  # 1-based decision index
    max_turns: int  # decisions; the last one is reserved for stopping
    seed: int = 0
    terms: tuple[str, ...] = ()  # only for privileged (reference) policies
    tag: dict = field(default_factory=dict)

    @property
    def last_turn(self) -> bool:
        return self.turn >= self.max_turns


@dataclass(frozen=True)
class AskerDecision:
    kind: Literal["question", "stop", "fallback"]
    question: str | None = None
    raw: str | None = None
    reason: str = ""
    call_id: str | None = None

    @classmethod
    def ask(cls, q: str, **kw) -> "AskerDecision":
        return cls("question", q, **kw)

    @classmethod
    def stop(cls, **kw) -> "AskerDecision":
        return cls("stop", **kw)


class Asker:
    name = "asker"
    privileged = False
    prompt: str | None = None
    model_key = ""  # the LLM behind the asker (part of the episode id)

    async def decide(self, inp: AskerInput) -> AskerDecision:
        raise NotImplementedError


class NoDisambiguation(Asker):
    """π_none: stops at once."""

    name = "none"

    async def decide(self, inp):
        return AskerDecision.stop()


class ScriptedFull(Asker):
    """π_full: each distinct registered term once, in annotation order, then stop."""

    name = "full"
    privileged = True
    suffix = ""

    def question(self, term: str) -> str:
        return FULL_QUESTION.format(term=term) + self.suffix

    async def decide(self, inp):
        distinct = list(dict.fromkeys(inp.terms))
        i = len(inp.history)
        if i < len(distinct) and not inp.last_turn:
            return AskerDecision.ask(self.question(distinct[i]))
        return AskerDecision.stop()


class AdversarialFull(ScriptedFull):
    """π_full^adv: the canonical question plus a request for the exact SQL."""

    name = "full_adv"
    suffix = ADVERSARIAL_SUFFIX


class Generic(Asker):
    """π_none^adv: alternates two generic prompts until the budget (m+2 questions) is spent."""

    name = "generic"

    async def decide(self, inp):
        if inp.last_turn:
            return AskerDecision.stop()
        return AskerDecision.ask(GENERIC_QUESTIONS[len(inp.history) % 2])


class AskerOutput(BaseModel):
    type: Literal["clarification", "done"]
    output: str | None = None


def decision_from_output(obj, raw: str | None = None, call_id: str | None = None) -> AskerDecision:
    """Interpret an asker's strict-JSON answer; anything else is a fallback stop."""
    if isinstance(obj, AskerDecision):
        return obj
    if obj is None:
        return AskerDecision.stop(raw=raw, call_id=call_id)
    if isinstance(obj, str):
        try:
            obj = json.loads(obj)
        except json.JSONDecodeError:
            return (
                AskerDecision("question", obj.strip(), raw=raw)
                if obj.strip()
                else AskerDecision("fallback", raw=raw, reason="empty output")
            )
    if isinstance(obj, BaseModel):
        obj = obj.model_dump()
    if not isinstance(obj, dict):
        return AskerDecision(
            "fallback", raw=raw, reason=f"unexpected output type {type(obj).__name__}", call_id=call_id
        )
    kind = str(obj.get("type") or "").strip().lower()
    if kind == "done":
        return AskerDecision.stop(raw=raw, call_id=call_id)
    question = obj.get("output")
    if kind == "clarification" and isinstance(question, str) and question.strip():
        return AskerDecision.ask(question.strip(), raw=raw, call_id=call_id)
    return AskerDecision("fallback", raw=raw, reason=f"unparseable asker output: {str(obj)[:120]}", call_id=call_id)


class LLMAsker(Asker):
    """The evaluated asker: one council member of the ``askers`` council, prompt Direct, Checklist
    (chat) or Checklist (ledger). The run seed goes into every call (shared with the solver)."""

    def __init__(self, council, prompt: str = DEFAULT_ASKER_PROMPT, member: str | None = None):
        if prompt not in ASKER_PROMPTS:
            raise ValueError(f"unknown asker prompt {prompt!r}; choose one of {', '.join(ASKER_PROMPTS)}")
        self.council = council
        self.member = member or council.member_names[0]
        self.prompt = prompt
        self.name = "llm"
        m = council.member(self.member)
        self.model_key = f"{m.name}={m.model}"

    async def decide(self, inp):
        messages = asker_messages(self.prompt, inp.spec, list(inp.history), inp.turn, inp.max_turns)
        r = await self.council.aask(
            self.member, messages, AskerOutput, {**inp.tag, "stage": "ambitab_asker"}, overrides={"seed": inp.seed}
        )
        if r.status == "call_failed":
            raise ProviderUnavailable(f"asker member {self.member!r} failed: {r.error}")
        if not r.ok:
            return AskerDecision("fallback", raw=r.raw_text, reason="unparseable asker output", call_id=r.call_id)
        return decision_from_output(r.parsed, raw=r.raw_text, call_id=r.call_id)


class CustomAsker(Asker):
    def __init__(self, path: str):
        self.impl = load_object(path)()
        if not callable(getattr(self.impl, "decide", None)):
            raise TypeError(f"custom asker {path!r} has no decide(inp) method")
        self.name = f"custom:{path}"
        self.privileged = bool(getattr(self.impl, "privileged", False))

    async def decide(self, inp):
        out = self.impl.decide(inp)
        if inspect.isawaitable(out):
            out = await out
        return decision_from_output(out, raw=out if isinstance(out, str) else None)


def load_object(path: str):
    module, _, attr = path.partition(":") if ":" in path else path.rpartition(".")
    if not module or not attr:
        raise ValueError(f"custom asker {path!r}: use 'package.module:Class' or 'package.module.Class'")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"custom asker {path!r} cannot be loaded: {exc}") from exc


# Asker names by prefix, e.g. ``checkpoint:<run_id>`` (a trained asker, issue 29): prefix ->
# (check(name), build(name)), check raising a one-line ValueError. Registered by the package that
# serves them (pipelines.ambitab.training.checkpoints), which the protocol must not import.
ASKER_PREFIXES: dict[str, tuple[Callable[[str], object], Callable[[str], Asker]]] = {}


def register_asker_prefix(prefix: str, check: Callable[[str], object], build: Callable[[str], Asker]) -> None:
    ASKER_PREFIXES[prefix] = (check, build)


def prefixed_asker(name: str) -> tuple[Callable[[str], object], Callable[[str], Asker]] | None:
    return next((v for p, v in ASKER_PREFIXES.items() if name.startswith(p)), None)


def make_asker(name: str, council=None, prompt: str = DEFAULT_ASKER_PROMPT) -> Asker:
    """``none``, ``full``, ``full_adv``, ``generic``, ``llm`` (needs the askers council), a
    registered prefix (``checkpoint:<run_id>[@update]``) or a dotted path."""
    if name == "none":
        return NoDisambiguation()
    if name == "full":
        return ScriptedFull()
    if name == "full_adv":
        return AdversarialFull()
    if name == "generic":
        return Generic()
    if name == "llm":
        if council is None:
            raise ValueError("the llm asker needs the 'askers' council")
        return LLMAsker(council, prompt)
    if (entry := prefixed_asker(name)) is not None:
        return entry[1](name)
    if "." in name or ":" in name:
        return CustomAsker(name)
    raise ValueError(f"unknown asker {name!r}; choose none, full, full_adv, generic, llm or a dotted path")
