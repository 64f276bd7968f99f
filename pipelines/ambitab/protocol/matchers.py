"""Deterministic matchers (spec §4.1) and the offline credit scorer for LLM oracles (§4.2).

Every matcher works in single-answer mode: it credits at most one ambiguity per question and
returns a :class:`Match` (the credited ambiguity or ``None`` with the reason). Only ambiguities of
the counted kinds (critical, knowledge) are ever credited. Repeats are matched like any question;
the *metrics* decide that a repeat earns no new credit (``cred_i ⊆ cred_≤i-1``).
"""

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pipelines.ambitab.protocol.text import earliest_hit, find_name, norm, quoted_spans
from pipelines.ambitab.record import Ambiguity

REFUSAL = "Sorry, I can't help with that."  # [I] wording from the paper's Fig. 7
ALREADY_ANSWERED = "That ambiguity was already answered."


@dataclass(frozen=True)
class Match:
    ambiguity: Ambiguity | None
    reason: str  # quoted | mention | score=3 | ... | no_match | tie | labeled | unanswerable

    @property
    def credited(self) -> tuple[str, ...]:
        return (self.ambiguity.amb_id,) if self.ambiguity else ()


def _names(a: Ambiguity) -> list[str]:
    seen, out = set(), []
    for n in a.names:
        nn = norm(n)
        if nn and nn not in seen:
            seen.add(nn)
            out.append(nn)
    return out


def _pick_earliest(candidates: list[tuple[int, int, Ambiguity, str]], stage: str) -> Match:
    """candidates: (offset, length, ambiguity, name). Earliest offset, then longest match; a tie
    between distinct ambiguities that remains after that is a refusal."""
    if not candidates:
        return Match(None, "no_match")
    candidates.sort(key=lambda c: (c[0], -c[1]))
    best = candidates[0]
    rivals = {c[2].amb_id for c in candidates if (c[0], c[1]) == (best[0], best[1])}
    if len(rivals) > 1:
        return Match(None, "tie")
    return Match(best[2], stage)


def match_intent(question: str, ambiguities: Sequence[Ambiguity]) -> Match:
    """Deterministic intent matcher: quoted targets first, then the earliest mention, longest match
    at an equal offset, refusal on no match or a tie (BIRD-Interact, Ambrosia, AmbiQT, TACO)."""
    counted = [a for a in ambiguities if a.counted]
    names = [(a, _names(a)) for a in counted]
    # Quoted stage: the earliest span that equals or contains some name decides.
    for _offset, span in quoted_spans(question or ""):
        inside = []
        for a, ns in names:
            hit = earliest_hit(ns, span)
            if hit:
                inside.append((hit.start, hit.length, a, hit.name))
        if inside:
            m = _pick_earliest(inside, "quoted")
            return m  # a tie inside the earliest matching span is still a tie
    text = norm(question)
    mentions = []
    for a, ns in names:
        hit = earliest_hit(ns, text)
        if hit:
            mentions.append((hit.start, hit.length, a, hit.name))
    return _pick_earliest(mentions, "mention")


def match_knowledge(question: str, ambiguities: Sequence[Ambiguity], resolved: Iterable[str] = ()) -> Match:
    """Deterministic knowledge matcher (Bird, EW-Bird): score 3 for a term/alias hit, else 1 per
    matched concept (capped at 2); sort by score, unresolved first, earliest mention, annotation
    order; refuse when nothing scores."""
    resolved = set(resolved)
    text = norm(question)
    scored = []
    for order, a in enumerate(ambiguities):
        if not a.counted:
            continue
        hit = earliest_hit(_names(a), text)
        if hit:
            score, pos = 3, hit.start
        else:
            concept_hits = [h for h in (find_name(norm(c), text) for c in a.concepts) if h]
            score = min(len(concept_hits), 2)
            pos = min((h.start for h in concept_hits), default=len(text))
        if score > 0:
            scored.append((-score, a.amb_id in resolved, pos, order, a))
    if not scored:
        return Match(None, "no_match")
    scored.sort(key=lambda s: s[:4])
    best = scored[0]
    return Match(best[4], f"score={-best[0]}")


# ---------------------------------------------------------------------- LLM credit scorer

_ACTION = re.compile(r"^\s*\**\s*(labeled|unlabeled|unanswerable)\s*\(\s*(.*?)\s*\)\s*\**\s*$", re.S | re.I)


def parse_action(action: str | None) -> tuple[str, str]:
    """('labeled', term) | ('unlabeled', segment) | ('unanswerable', '') | ('unknown', raw)."""
    m = _ACTION.match(action or "")
    if not m:
        return "unknown", (action or "").strip()
    arg = m.group(2).strip()
    if len(arg) >= 2 and arg[0] == arg[-1] and arg[0] in "\"'`":
        arg = arg[1:-1]
    return m.group(1).lower(), arg


def score_credit(action: str | None, texts: Sequence[str], ambiguities: Sequence[Ambiguity]) -> Match:
    """Offline credit scorer (C.3): an exact ``labeled`` term wins; ``unanswerable()`` credits
    nothing; otherwise the earliest substring hit of a normalised term or alias in ``texts`` (scanned
    in the given order: question, then cot, then response) wins. At most one credit."""
    counted = [a for a in ambiguities if a.counted]
    kind, arg = parse_action(action)
    if kind == "labeled":
        target = norm(arg)
        for a in counted:
            if target and target in _names(a):
                return Match(a, "labeled")
    if kind == "unanswerable":
        return Match(None, "unanswerable")
    for text in texts:
        t = norm(text)
        hits = []
        for a in counted:
            for n in _names(a):
                i = t.find(n)
                if i >= 0:
                    hits.append((i, len(n), a, n))
        if hits:
            hits.sort(key=lambda c: (c[0], -c[1]))
            return Match(hits[0][2], "substring")
    return Match(None, "no_match")
