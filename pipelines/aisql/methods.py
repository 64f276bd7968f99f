"""The judging methods compared in Table 1: EX, LLM-SQL-Solver (Miniature & Mull, Explain & Compare,
each with and without execution results) and the multilayered autorater ("ours").

Every method returns one :class:`PairVerdict` per pair; a method that cannot decide (a candidate that
does not run for EX, an unparseable LLM answer after retries) records ``status=error`` with the
reason and raw text, and the pair counts as *rejected*, as the paper counts errors.

The autorater and the baselines use the council's ``judges`` role (the baselines judge equivalence,
so they share the role; the member defaults to the role's first member).
"""

import re
from dataclasses import asdict, dataclass

from pydantic import BaseModel, Field

from pipelines.aisql.prompts import judge_messages, solver_messages

METHODS = ("ex", "layers", "mm", "mm_exec", "ec", "ec_exec", "ours")
DETERMINISTIC = ("ex", "layers")  # no LLM call: every other method asks the ``judges`` council
METHOD_LABELS = {
    "ex": "Execution Accuracy (EX)",
    "layers": "Deterministic layers (stand-in)",
    "mm": "LLM-SQL-Solver (Miniature & Mull)",
    "mm_exec": "LLM-SQL-Solver (Miniature & Mull w/ Exec Results)",
    "ec": "LLM-SQL-Solver (Explain & Compare)",
    "ec_exec": "LLM-SQL-Solver (Explain & Compare w/ Exec Results)",
    "ours": "Multilayered Eval Framework (Ours)",
}
ERROR_SOURCES = ("none", "relational", "ai_prompt", "ai_operator_or_column", "both", "execution_error", "other")
JUDGE_ATTEMPTS = 3  # the first call plus two retries (spec §5.3)


@dataclass
class PairVerdict:
    pair_id: str
    method: str
    accepted: bool
    status: str = "ok"  # ok | error | undecided (the deterministic layers cannot decide: no error)
    reason: str = ""
    raw: str = ""
    overall: int | None = None
    relational: int | None = None
    ai: int | None = None
    accepted_all: bool | None = None  # decision=all: every score above the threshold
    error_source: str | None = None
    inconsistent: bool = False  # e.g. overall accepts while relational rejects
    call_id: str = ""
    verdict_class: str | None = None  # what the verdict claims (compare.verdict_class); None: not classified
    bound_k: int | None = None  # k of "equivalent up to k rows per table"

    def row(self) -> dict:
        return asdict(self)


class Scores(BaseModel):
    overall_similarity: int = Field(ge=1, le=5)
    relational_similarity: int = Field(ge=1, le=5)
    ai_similarity: int = Field(ge=1, le=5)


class Analysis(BaseModel):
    primary_error_source: str
    justification: str


class JudgeVerdict(BaseModel):
    scores: Scores
    analysis: Analysis


class SolverAnswer(BaseModel):
    reasoning: str
    answer: str


def parse_equivalence(text: str) -> bool | None:
    """LLM-SQL-Solver answer: check NOT EQUIVALENT first, then EQUIVALENT; anything else is None."""
    t = " ".join((text or "").upper().replace("_", " ").split())
    if re.search(r"\bNOT\s+EQUIVALENT\b", t) or "NONEQUIVALENT" in t or "NON-EQUIVALENT" in t:
        return False
    if re.search(r"\bEQUIVALENT\b", t):
        return True
    return None


def ex_verdict(pair_id: str, gold_status: str, cand_status: str, equal: bool, detail: str = "") -> PairVerdict:
    """EX from an execution row: accept iff both ran and the results are equal (set semantics)."""
    if gold_status != "ok":
        return PairVerdict(pair_id, "ex", False, "error", f"gold query did not run: {gold_status} {detail}"[:300])
    if "undecided" in (gold_status, cand_status):  # the label oracle could not answer: never a silent verdict
        return PairVerdict(pair_id, "ex", False, "error", f"oracle cannot decide {detail}".strip()[:300])
    if cand_status != "ok":
        return PairVerdict(pair_id, "ex", False, "ok", f"candidate did not run: {cand_status} {detail}"[:300])
    return PairVerdict(pair_id, "ex", bool(equal), "ok", "results equal" if equal else "results differ")


@dataclass
class JudgeSettings:
    threshold: int = 3  # accept iff score > threshold (paper: 4 and 5 accept)
    decision: str = "overall"  # overall | all
    relational_gate: bool = False  # also require S_g and S_c results to be equal
    member: str | None = None
    compact: bool = False  # the short judge prompt (small local models)


def judge_verdict_from(
    pair_id: str,
    parsed: JudgeVerdict,
    settings: JudgeSettings,
    evidence: dict | None = None,
    call_id: str = "",
    raw: str = "",
) -> PairVerdict:
    s = parsed.scores
    t = settings.threshold
    all_ok = min(s.overall_similarity, s.relational_similarity, s.ai_similarity) > t
    accepted = all_ok if settings.decision == "all" else s.overall_similarity > t
    reason = parsed.analysis.justification[:500]
    if settings.relational_gate and evidence is not None and accepted:
        # rejects only what the structural layer proved different; 'cannot decide' is left to the judge
        sv = (evidence.get("structural") or {}).get("verdict")
        if sv == "differ":
            accepted, reason = False, "relational gate: the structural parts differ. " + reason
    src = parsed.analysis.primary_error_source.strip().lower()
    return PairVerdict(
        pair_id,
        "ours",
        accepted,
        "ok",
        reason,
        raw,
        s.overall_similarity,
        s.relational_similarity,
        s.ai_similarity,
        all_ok,
        src if src in ERROR_SOURCES else "other",
        inconsistent=(s.overall_similarity > t) != (s.relational_similarity > t),
        call_id=call_id,
    )


def _ask_with_retries(council, member: str, list_of_messages, model, tags) -> list:
    """ask_many, then re-ask unparseable answers with another seed (a cached failure would repeat
    itself). Provider failures are not re-asked here: the client already retried them."""
    results = council.ask_many(member, list_of_messages, model, tags=tags)
    base_seed = council.member(member).seed or 0
    for attempt in range(1, JUDGE_ATTEMPTS):
        todo = [i for i, r in enumerate(results) if not r.ok and r.status == "parse_failed"]
        if not todo:
            break
        for i in todo:
            results[i] = council.ask(
                member, list_of_messages[i], model, tags[i], overrides={"seed": base_seed + attempt}
            )
    return results


def autorate(
    council, items: list[tuple[str, str, str, dict]], *, schema_of, settings: JudgeSettings | None = None
) -> list[PairVerdict]:
    """``items``: (pair_id, dialect, question, evidence dict from split execution) — one judge call each."""
    settings = settings or JudgeSettings()
    member = settings.member or council.member_names[0]
    msgs = [
        judge_messages(
            dialect=d,
            schema="" if settings.compact else schema_of(d),
            question=q,
            evidence=ev,
            compact=settings.compact,
        )
        for _, d, q, ev in items
    ]
    tags = [{"stage": "aisql_judge", "candidate_id": pid} for pid, *_ in items]
    out = []
    for (pair_id, _d, _q, ev), res in zip(items, _ask_with_retries(council, member, msgs, JudgeVerdict, tags)):
        if res.ok:
            out.append(judge_verdict_from(pair_id, res.parsed, settings, ev, res.call_id, res.raw_text or ""))
        else:
            out.append(
                PairVerdict(
                    pair_id,
                    "ours",
                    False,
                    "error",
                    f"judge answer unusable: {res.error}"[:300],
                    res.raw_text or "",
                    call_id=res.call_id,
                )
            )
    return out


def solve(
    council, method: str, items: list[tuple[str, str, dict]], *, schema_of, member: str | None = None
) -> list[PairVerdict]:
    """LLM-SQL-Solver baselines. ``method`` in mm, mm_exec, ec, ec_exec; items: (pair_id, dialect, evidence)."""
    base, with_exec = method.split("_")[0], method.endswith("_exec")
    member = member or council.member_names[0]
    msgs, tags = [], []
    for pair_id, dialect, ev in items:
        results = (ev["gold"], ev["candidate"]) if with_exec else None
        msgs.append(
            solver_messages(
                base,
                dialect=dialect,
                schema=schema_of(dialect),
                gold_sql=ev["gold_sql"],
                cand_sql=ev["candidate_sql"],
                results=results,
            )
        )
        tags.append({"stage": f"aisql_{method}", "candidate_id": pair_id})
    out = []
    for (pair_id, *_), res in zip(items, _ask_with_retries(council, member, msgs, SolverAnswer, tags)):
        decision = parse_equivalence(res.parsed.answer) if res.ok else parse_equivalence(res.raw_text or "")
        if decision is None:
            out.append(
                PairVerdict(
                    pair_id,
                    method,
                    False,
                    "error",
                    f"no EQUIVALENT / NOT EQUIVALENT in the answer{': ' + res.error if res.error else ''}"[:300],
                    res.raw_text or "",
                    call_id=res.call_id,
                )
            )
        else:
            reason = res.parsed.reasoning[:500] if res.ok else "parsed from raw text"
            out.append(PairVerdict(pair_id, method, decision, "ok", reason, res.raw_text or "", call_id=res.call_id))
    return out
