"""Oracles O = (match, resp) of the ask-then-solve protocol (spec §4).

- :class:`DeterministicIntentOracle` / :class:`DeterministicKnowledgeOracle`: the reference
  oracles; the matcher of :mod:`.matchers`, the frozen resolution returned verbatim.
- :class:`LLMOracle`: the two-stage LLM oracle (matcher -> action + cot, responder -> response)
  through the ``oracles`` council, ``scope="unfiltered"`` (Bird, EW-Bird: every field) or
  ``"scoped"`` (reference SQL, segments and schema only with ``sql_grounding``; the responder reads
  the matched frozen intent in place of the clear query). ``responder_sees_sql=True`` is the stress
  test of E.1: only the responder gets the full reference SQL, the matcher is unchanged.
- :class:`HybridOracle`: the LLM matcher (stage 1 only) with the stored responses (resp*).

Credits of LLM oracles come from the offline credit scorer. A provider failure raises
:class:`~resources.llm.failures.ProviderUnavailable` so the step fails and can be re-executed; it
never becomes a refusal.
"""

from dataclasses import dataclass, field

from pydantic import BaseModel

from pipelines.ambitab.protocol.matchers import (
    ALREADY_ANSWERED,
    REFUSAL,
    Match,
    match_intent,
    match_knowledge,
    parse_action,
    score_credit,
)
from pipelines.ambitab.protocol.prompts import matcher_messages, responder_messages
from pipelines.ambitab.protocol.task import Task
from pipelines.ambitab.sources import sql_segments
from resources.llm.failures import ProviderUnavailable

LLM_REFUSAL = "Sorry, this question is out of scope, so I can not answer your question."
ORACLE_KINDS = (
    "det",
    "det_intent",
    "det_knowledge",
    "llm",
    "llm_unfiltered",
    "llm_scoped",
    "hybrid",
    "hybrid_scoped",
    "hybrid_unfiltered",
    "stress",
)
ORACLE_CONTEXT_TOKENS = 16384  # [P] the LLM oracles' context; an episode that overflows it fails
CHARS_PER_TOKEN = 4  # [I] a conservative estimate, no tokenizer of the oracle model is available
KNOWLEDGE_CORPORA = ("bird", "ew_bird")  # [P] deterministic knowledge oracle; the others: intent


# What each oracle's matcher and responder read, after the paper's Table 6 and Appendix G (the
# question, and for the responder the chosen action, always). Field names: ``term``/``type``/
# ``sql_snippet`` (the labeled ambiguity points), ``aliases``, ``concepts``, ``resolution``,
# ``frozen_intent`` (of the matched ambiguity), ``clear_query``, ``schema``, ``reference_sql``,
# ``sql_segments``, ``withheld_evidence``; never listed for any oracle: the visible spec's
# ``user_query``, ``column_meanings`` and ``external_knowledge``. The hybrid oracles' responder is
# the stored resolution (resp*), so they have no responder prompt. tests/ambitab/test_oracle_access.py
# checks every oracle's prompts against this table.
_LABELED = ("term", "type", "sql_snippet")
_SQL = ("schema", "reference_sql", "sql_segments")
ORACLE_ACCESS: dict[str, dict[str, tuple[str, ...]]] = {
    "det_intent": {"matcher": ("term", "aliases"), "responder": ("resolution",)},
    "det_knowledge": {"matcher": ("term", "aliases", "concepts"), "responder": ("resolution",)},
    # scoped: classify from routing fields, respond from the retained annotations; the responder
    # reads the matched frozen intent (else the clear query); SQL, segments, schema only with grounding
    "llm_scoped": {"matcher": _LABELED, "responder": (*_LABELED, "frozen_intent")},
    "llm_scoped+sql": {"matcher": (*_LABELED, "sql_segments"), "responder": (*_LABELED, "frozen_intent", *_SQL)},
    # unfiltered (Bird, EW-Bird): task context, withheld evidence and reference SQL available
    "llm_unfiltered": {
        "matcher": (*_LABELED, "sql_segments", "withheld_evidence"),
        "responder": (*_LABELED, "clear_query", *_SQL, "withheld_evidence"),
    },
    "hybrid_scoped": {"matcher": _LABELED, "responder": ()},
    "hybrid_unfiltered": {"matcher": (*_LABELED, "sql_segments", "withheld_evidence"), "responder": ()},
    # E.1 stress test on a scoped oracle: only the responder also reads the reference SQL
    "stress": {"matcher": _LABELED, "responder": (*_LABELED, "frozen_intent", "reference_sql", "sql_segments")},
}


@dataclass
class OracleReply:
    credited: tuple[str, ...]
    response: str
    refused: bool
    reason: str
    action: str | None = None
    cot: str | None = None
    call_ids: list[str] = field(default_factory=list)
    # Credits from the action, question and cot only (no response): used for ΔRecnone (spec §9.11).
    credited_no_response: tuple[str, ...] | None = None


def is_refusal(text: str | None) -> bool:
    """Refusal detection for the ledger prompt (spec §9.8): the deterministic or LLM refusal text."""
    t = " ".join((text or "").split()).lower()
    return t in (REFUSAL.lower(), LLM_REFUSAL.lower()) or t.startswith("sorry, this question is out of scope")


class Oracle:
    name = "oracle"
    deterministic = True
    model_key = ""  # the LLM behind the oracle (part of the episode id)

    def overflows(self, task: Task) -> bool:
        """True when the task cannot fit the oracle's context (only LLM oracles have one)."""
        return False

    async def reply(
        self, task: Task, question: str, resolved: frozenset[str], *, seed: int = 0, tag: dict | None = None
    ) -> OracleReply:
        raise NotImplementedError


class _DeterministicOracle(Oracle):
    deterministic = True

    def __init__(self, answer_repeats: bool = False):
        # Fig. 7 variant: answer a repeat with "That ambiguity was already answered."
        self.answer_repeats = answer_repeats

    def match(self, task: Task, question: str, resolved) -> Match:
        raise NotImplementedError

    async def reply(self, task, question, resolved, *, seed=0, tag=None) -> OracleReply:
        m = self.match(task, question, resolved)
        if m.ambiguity is None:
            return OracleReply((), REFUSAL, True, m.reason, credited_no_response=())
        text = m.ambiguity.resolution
        if self.answer_repeats and m.ambiguity.amb_id in resolved:
            text = ALREADY_ANSWERED
        return OracleReply(m.credited, text, False, m.reason, credited_no_response=m.credited)


class DeterministicIntentOracle(_DeterministicOracle):
    name = "det_intent"

    def match(self, task, question, resolved) -> Match:
        return match_intent(question, task.ambiguities)


class DeterministicKnowledgeOracle(_DeterministicOracle):
    name = "det_knowledge"

    def match(self, task, question, resolved) -> Match:
        return match_knowledge(question, task.ambiguities, resolved)


def deterministic_oracle_for(corpus: str, **kw) -> _DeterministicOracle:
    return DeterministicKnowledgeOracle(**kw) if corpus in KNOWLEDGE_CORPORA else DeterministicIntentOracle(**kw)


# ------------------------------------------------------------------------------- LLM oracle


class MatcherOutput(BaseModel):
    action: str
    cot: str = ""


class ResponderOutput(BaseModel):
    type: str = ""
    output: str


def labeled_points(task: Task) -> dict:
    """The labeled ambiguity points as the BIRD-Interact user simulator lists them."""
    crit, know = [], []
    for a in task.ambiguities:
        if not a.counted:
            continue
        item = {"term": a.term, "type": a.type or a.kind.value}
        if a.sql_snippet:
            item["sql_snippet"] = a.sql_snippet
        (know if a.kind == "knowledge" else crit).append(item)
    return {"user_query_ambiguity": crit, "knowledge_ambiguity": know}


class LLMOracle(Oracle):
    """Two-stage LLM oracle. ``council`` is the ``oracles`` council; its first member answers."""

    deterministic = False

    def __init__(
        self,
        council,
        *,
        scope: str = "scoped",
        sql_grounding: bool = False,
        responder_sees_sql: bool | None = None,
        member: str | None = None,
        context_tokens: int | None = ORACLE_CONTEXT_TOKENS,
    ):
        if scope not in ("scoped", "unfiltered"):
            raise ValueError(f"LLM oracle scope must be 'scoped' or 'unfiltered', got {scope!r}")
        self.council = council
        self.member = member or council.member_names[0]
        m = council.member(self.member)
        self.model_key = f"{m.name}={m.model}"
        self.scope = scope
        self.sql_grounding = sql_grounding
        self.context_tokens = context_tokens
        # None = what the scope gives; True/False = the E.1 stress test (only the responder changes)
        self.responder_sees_sql = responder_sees_sql
        stress = (
            "" if responder_sees_sql is None else ("+stress_sql_shown" if responder_sees_sql else "+stress_sql_hidden")
        )
        at = f"@{member}" if member else ""  # an explicitly chosen member is part of the name
        self.name = f"llm_{scope}" + ("+sql" if sql_grounding else "") + at + stress

    # what each stage may read (ORACLE_ACCESS)
    def _sees_sql(self) -> bool:
        return self.scope == "unfiltered" or self.sql_grounding

    def _evidence(self, task: Task) -> list[str] | None:
        """[P] Table 6: only the unfiltered oracle reads the withheld evidence."""
        if self.scope != "unfiltered":
            return None
        return [str(e) for e in task.oracle_context.withheld_evidence]

    def _segments(self, task: Task) -> list[str] | None:
        if not self._sees_sql():
            return None
        segs = task.oracle_context.sql_segments
        if segs:
            return list(segs)
        ref = task.oracle.reference_sql
        return sql_segments(ref[0]) if ref else []

    def overflows(self, task: Task) -> bool:
        """[P] C.4: an episode whose oracle prompt exceeds the context ends before the first
        question (a failure with zero recall credit). Estimated on the responder prompt, the
        larger stage, with an empty question."""
        if not self.context_tokens:
            return False
        sees = self._sees_sql() or bool(self.responder_sees_sql)
        ref = "\n".join(task.oracle.reference_sql) if sees else None
        msgs = responder_messages(
            "",
            "",
            labeled_points(task),
            task.oracle_context.clear_query or "",
            schema=task.spec.db_schema if self._sees_sql() else None,
            gt_sql=ref,
            sql_segments=self._segments(task),
            withheld_evidence=self._evidence(task),
        )
        chars = sum(len(m["content"]) for m in msgs)
        return chars / CHARS_PER_TOKEN > self.context_tokens

    async def _ask(self, messages, model, tag, seed):
        r = await self.council.aask(self.member, messages, model, tag, overrides={"seed": seed})
        if r.status == "call_failed":
            raise ProviderUnavailable(f"oracle member {self.member!r} failed: {r.error}")
        return r

    async def match(self, task: Task, question: str, *, seed: int, tag: dict) -> tuple[str, str, list[str]]:
        r = await self._ask(
            matcher_messages(question, labeled_points(task), self._segments(task), self._evidence(task)),
            MatcherOutput,
            {**tag, "stage": "ambitab_oracle_matcher"},
            seed,
        )
        if r.ok:
            return r.parsed.action, r.parsed.cot, [r.call_id]
        return (r.raw_text or ""), "", [r.call_id]  # unparseable: the raw text is scanned for credit

    def _query_text(self, task: Task, credited: tuple[str, ...]) -> str:
        if self.scope == "scoped":
            for a in task.ambiguities:
                if a.amb_id in credited and a.frozen_intent:
                    return a.frozen_intent
        return task.oracle_context.clear_query or task.spec.user_query

    async def reply(self, task, question, resolved, *, seed=0, tag=None) -> OracleReply:
        tag = dict(tag or {})
        action, cot, calls = await self.match(task, question, seed=seed, tag=tag)
        pre = score_credit(action, [question, cot], task.ambiguities)
        sees = self._sees_sql()
        shown = sees if self.responder_sees_sql is None else self.responder_sees_sql
        ref = task.oracle.reference_sql
        gt_sql = "\n".join(ref) if shown and ref else None
        segments = (self._segments(task) if sees else None) if shown else None
        if shown and segments is None:  # the stress test: the stored segments, else those of the reference
            segments = list(task.oracle_context.sql_segments) or (sql_segments(ref[0]) if ref else [])
        messages = responder_messages(
            question,
            action,
            labeled_points(task),
            self._query_text(task, pre.credited),
            schema=task.spec.db_schema if sees else None,
            gt_sql=gt_sql,
            sql_segments=segments,
            withheld_evidence=self._evidence(task),
        )
        r = await self._ask(messages, ResponderOutput, {**tag, "stage": "ambitab_oracle_responder"}, seed)
        calls.append(r.call_id)
        response = r.parsed.output if r.ok else (r.raw_text or "")
        final = score_credit(action, [question, response, cot], task.ambiguities)
        refused = parse_action(action)[0] == "unanswerable" or is_refusal(response)
        return OracleReply(
            final.credited,
            response,
            refused,
            final.reason,
            action=action,
            cot=cot,
            call_ids=calls,
            credited_no_response=pre.credited,
        )


class HybridOracle(LLMOracle):
    """(match, resp*): the LLM matcher's action, credited from the action, question and cot, then
    the stored resolution of the credited ambiguity (or the refusal text)."""

    def __init__(self, council, *, scope: str = "scoped", sql_grounding: bool = False, member: str | None = None):
        super().__init__(council, scope=scope, sql_grounding=sql_grounding, member=member)
        self.name = "hybrid_" + scope + ("+sql" if sql_grounding else "") + (f"@{member}" if member else "")

    async def reply(self, task, question, resolved, *, seed=0, tag=None) -> OracleReply:
        action, cot, calls = await self.match(task, question, seed=seed, tag=dict(tag or {}))
        m = score_credit(action, [question, cot], task.ambiguities)
        if m.ambiguity is None:
            return OracleReply(
                (), REFUSAL, True, m.reason, action=action, cot=cot, call_ids=calls, credited_no_response=()
            )
        return OracleReply(
            m.credited,
            m.ambiguity.resolution,
            False,
            m.reason,
            action=action,
            cot=cot,
            call_ids=calls,
            credited_no_response=m.credited,
        )


def canonical_oracle(name: str) -> str:
    """``deterministic`` (and ``deterministic_intent`` / ``deterministic_knowledge``) are the long
    forms of ``det`` (``det_intent`` / ``det_knowledge``); case and spaces are ignored."""
    kind, at, member = name.strip().partition("@")
    kind = kind.strip().lower()
    if kind.startswith("deterministic"):
        kind = "det" + kind[len("deterministic") :]
    return kind + at + member


def make_oracle(kind: str, corpus: str, council=None, *, sql_grounding: bool | None = None) -> Oracle:
    """Oracle by name: ``det`` (the corpus's deterministic oracle), ``det_intent``, ``det_knowledge``,
    ``llm`` (unfiltered on Bird/EW-Bird, scoped elsewhere), ``llm_unfiltered``, ``llm_scoped``,
    ``hybrid``, ``stress`` (the LLM oracle whose responder also reads the reference SQL). An LLM kind
    may name the council member: ``llm@gemma`` (default: the council's first member), so two oracle
    models of one council are two oracles (the paper's Qwen / Gemma comparison)."""
    kind, _, member = canonical_oracle(kind).partition("@")
    member = member or None
    if kind == "det":
        return deterministic_oracle_for(corpus)
    if kind == "det_intent":
        return DeterministicIntentOracle()
    if kind == "det_knowledge":
        return DeterministicKnowledgeOracle()
    if kind not in ORACLE_KINDS:
        raise ValueError(f"unknown oracle {kind!r}; choose one of {', '.join(ORACLE_KINDS)}")
    if council is None:
        raise ValueError(f"oracle {kind!r} needs the 'oracles' council")
    scope = "unfiltered" if corpus in KNOWLEDGE_CORPORA else "scoped"
    if kind in ("llm_unfiltered", "hybrid_unfiltered"):
        scope = "unfiltered"
    elif kind in ("llm_scoped", "hybrid_scoped"):
        scope = "scoped"
    grounding = bool(sql_grounding)
    if member is not None:
        council.member(member)  # fail fast with the council's message on a typo
    if kind.startswith("hybrid"):
        return HybridOracle(council, scope=scope, sql_grounding=grounding, member=member)
    stress = None
    if kind == "stress":  # flip only the responder's access to the reference SQL (E.1)
        stress = not (scope == "unfiltered" or grounding)
    return LLMOracle(council, scope=scope, sql_grounding=grounding, responder_sees_sql=stress, member=member)
