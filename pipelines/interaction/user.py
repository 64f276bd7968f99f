"""The simulated user council (ABISS §5.2): relevancy vote, grounded answer, response tournament.

For one clarification question:

0. **Short-circuit** — an unanswerable question (no gold SQL, nothing to disambiguate) gets the
   fixed refusal :data:`REFUSAL`, label Irrelevant, with no LLM call (recorded as
   ``short_circuit=True``).
1. **Stage 1** — every council member labels the clarification from the question, evidence,
   history, hidden knowledge (ambiguous questions only) and the numbered gold-SQL fragments
   (:mod:`pipelines.interaction.fragments`). Labels are constrained by group through the output
   schema: answerable questions allow Technical / Irrelevant only (a Relevant answer fails
   validation and is an abstention).
2. **Vote** — plurality (:func:`resources.llm.votes.decide`); a tie between the top labels, or no
   valid vote at all, is **Irrelevant**, even when nobody voted Irrelevant (reference rule).
   The Technical fragments are the union of the node ids chosen by the Technical voters (ids
   outside the list are dropped), sorted by id.
3. **Stage 2** — the members whose label matches the winner answer under that label (the paper's
   candidate filter; ``candidate_filter="all"`` is the reference code's choice). When no member
   voted the winner (a tie turned Irrelevant), every member answers.
4. **Selection** — one candidate, or identical candidates after stripping, are used directly;
   otherwise every member judges every pair (``itertools.combinations``, A/B orientation drawn
   from a per-conversation seeded RNG); the most votes win, a tie goes to the lowest index. The
   judge sees the clarification question (the reference judge does not).

Every label, answer and judge vote keeps its ``llm_call_id``.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

from pipelines.interaction import prompts
from pipelines.interaction.fragments import Fragment, extract_fragments, render_fragments
from pipelines.taxonomy import Group, subcategory
from resources.llm.votes import decide

REFUSAL = "That's not relevant to my question."
LABELS = ("Relevant", "Technical", "Irrelevant")
CANDIDATE_FILTERS = ("label", "all")


@dataclass
class UserTurn:
    relevance: str
    answer: str
    short_circuit: bool = False
    label_votes: list[dict] = field(default_factory=list)  # member, label, node_ids, parsed_ok, llm_call_id
    candidates: list[dict] = field(default_factory=list)  # member, answer, parsed_ok, llm_call_id
    tournament: list[dict] = field(default_factory=list)  # judge, candidate_a, candidate_b, winner, llm_call_id
    fragments: list[str] = field(default_factory=list)  # Technical fragments the answer was grounded on
    winner_member: str | None = None
    margin: int | None = None
    unanimous: bool | None = None


def winning_label(labels: list[str | None]) -> str:
    """Plurality over the stage-1 labels; a tie (or no vote) is Irrelevant."""
    tally = decide(labels, "plurality", tie="reject")
    return tally.decision if tally.decision is not None else "Irrelevant"


def technical_fragments(votes: list[dict], fragments: list[Fragment]) -> tuple[list[Fragment], list[int]]:
    """Union of the Technical voters' node ids → fragments sorted by id, plus the invalid ids dropped."""
    by_id = {f.id: f for f in fragments}
    chosen, invalid = set(), []
    for v in votes:
        if v["label"] != "Technical":
            continue
        for i in v.get("node_ids") or []:
            (chosen.add(i) if i in by_id else invalid.append(i))
    return [by_id[i] for i in sorted(chosen)], invalid


def tournament(n: int, judge_votes) -> tuple[int, list[int]]:
    """Winner index and tallies of a pairwise tournament; ``judge_votes`` yields winner indices."""
    tallies = [0] * n
    for w in judge_votes:
        tallies[w] += 1
    best = max(tallies)
    return tallies.index(best), tallies  # a tie goes to the lowest index


class SimulatedUser:
    def __init__(self, council, candidate_filter: str = "label", seed: int = 42):
        if candidate_filter not in CANDIDATE_FILTERS:
            raise ValueError(f"candidate_filter must be one of {CANDIDATE_FILTERS}")
        self.council = council
        self.candidate_filter = candidate_filter
        self.seed = seed

    def answer(self, q: dict, schema_context: str, turns: list[tuple[str, str | None]], clarification: str,
               conversation_id: str, step: int) -> UserTurn:
        sub = subcategory(q["subcategory"])
        if sub.group is Group.UNANSWERABLE:
            return UserTurn("Irrelevant", REFUSAL, short_circuit=True, unanimous=None)
        tag = dict(candidate_id=q["question_id"], conversation_id=conversation_id, step=step)
        fragments = extract_fragments(q.get("sql"))
        schema = prompts.UserClassifySolvable if sub.group is Group.AMBIGUOUS else prompts.UserClassifyAnswerable
        msgs = prompts.user_classify_messages(schema_context, q, turns, clarification, render_fragments(fragments))
        results = self.council.ask_all(msgs, schema, tag=dict(stage="interaction_user_label", **tag))
        votes = []
        for member, r in zip(self.council.member_names, results):
            votes.append({"member": member, "label": r.parsed.relevancy if r.ok else None,
                          "node_ids": list(r.parsed.node_ids) if r.ok else [], "parsed_ok": r.ok,
                          "llm_call_id": r.call_id})
        labels = [v["label"] for v in votes]
        label = winning_label(labels)
        valid = [x for x in labels if x is not None]
        chosen, _invalid = technical_fragments(votes, fragments)
        fragment_texts = [f.sql for f in chosen] if label == "Technical" else []

        answerers = [v["member"] for v in votes if v["label"] == label] if self.candidate_filter == "label" else []
        if not answerers:
            answerers = list(self.council.member_names)
        amsgs = prompts.user_answer_messages(schema_context, q, turns, clarification, label, fragment_texts)
        atag = dict(stage="interaction_user_answer", label=label, **tag)
        answers = [self.council.ask(m, amsgs, prompts.UserAnswer, tag=atag) for m in answerers]
        candidates = [{"member": m, "answer": (r.parsed.answer.strip() if r.ok else None), "parsed_ok": r.ok,
                       "llm_call_id": r.call_id} for m, r in zip(answerers, answers)]
        usable = [c for c in candidates if c["answer"]]
        turn = UserTurn(label, REFUSAL, label_votes=votes, candidates=candidates, fragments=fragment_texts,
                        unanimous=bool(valid) and len(set(valid)) == 1 and len(valid) == len(labels))
        if not usable:  # every member failed: the refusal keeps the dialogue going (recorded)
            return turn
        if len(usable) == 1 or len({c["answer"] for c in usable}) == 1:
            turn.answer, turn.winner_member = usable[0]["answer"], usable[0]["member"]
            return turn
        rng = random.Random(f"{self.seed}:{conversation_id}:{step}")
        judge_votes, records = [], []
        for i, j in itertools.combinations(range(len(usable)), 2):
            a, b = (i, j) if rng.random() < 0.5 else (j, i)
            tmsgs = prompts.tournament_messages(schema_context, q, turns, clarification, label, fragment_texts,
                                                usable[a]["answer"], usable[b]["answer"])
            ttag = dict(stage="interaction_user_tournament", pair=f"{a}-{b}", **tag)
            for member, r in zip(self.council.member_names, self.council.ask_all(tmsgs, prompts.PairwiseChoice,
                                                                                   tag=ttag)):
                winner = None
                if r.ok:
                    winner = a if r.parsed.answer == "A" else b
                    judge_votes.append(winner)
                records.append({"judge": member, "candidate_a": usable[a]["member"],
                                "candidate_b": usable[b]["member"],
                                "winner": usable[winner]["member"] if winner is not None else None,
                                "parsed_ok": r.ok, "llm_call_id": r.call_id})
        best, tallies = tournament(len(usable), judge_votes)
        ordered = sorted(tallies, reverse=True)
        turn.answer, turn.winner_member = usable[best]["answer"], usable[best]["member"]
        turn.tournament, turn.margin = records, ordered[0] - ordered[1]
        return turn
