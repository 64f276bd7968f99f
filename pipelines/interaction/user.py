"""The simulated user council (ABISS §5.2): relevancy vote, grounded answer, response tournament.

For one clarification question:

0. **Short-circuit** — an unanswerable question (no gold SQL, nothing to disambiguate) gets the
   fixed refusal :data:`REFUSAL`, label Irrelevant, with no LLM call (recorded as
   ``short_circuit=True``).
1. **Stage 1** — every council member labels the clarification from the question, evidence,
   history, hidden knowledge (ambiguous questions only) and the numbered gold-SQL fragments
   (:mod:`pipelines.interaction.fragments`). Labels are constrained by group through the output
   schema: answerable questions allow Technical / Irrelevant only (a Relevant answer fails
   validation: an unreadable answer, so the turn is not produced).
2. **Vote** — plurality (:func:`resources.llm.votes.decide`); a tie between the top labels is
   **Irrelevant**, even when nobody voted Irrelevant (reference rule). The Technical fragments are
   the union of the node ids chosen by the Technical voters, sorted by id; ids outside the query's
   fragments are dropped and recorded (``invalid_node_ids``); a fragment holding a value the user
   withholds (a gold-only literal) is never handed over (``withheld_node_ids``); at most
   ``max_fragments`` are kept, by the paper's Technical rule (:func:`technical_fragments`).
3. **Stage 2** — the members whose label matches the winner answer under that label (the paper's
   candidate filter; ``candidate_filter="all"`` is the reference code's choice). When no member
   voted the winner (a tie turned Irrelevant), every member answers.
4. **Selection** — one candidate, or identical candidates after stripping, are used directly;
   otherwise every member judges every pair (``itertools.combinations``, A/B orientation drawn
   from a per-conversation seeded RNG); the most votes win, a tie goes to the lowest index. The
   judge sees the clarification question (the reference judge does not).

Every label, answer and judge vote keeps its ``llm_call_id``, status and error.

**Failed calls and unreadable answers never become a user turn.** The reference code raises on
any council failure, so every reference user turn rests on every call it makes. Here a call that
failed (``call_failed``: timeout, refused connection, HTTP error after the retries) *or* whose
answer could not be read after the repair call (``parse_failed``: prose, wrong-schema JSON, a
label the schema forbids) anywhere in the turn — a stage-1 label, a stage-2 answer, a tournament
judge — means the turn is *not produced*: the :class:`UserTurn` is ``failed`` with no label and no
answer, and the dialogue ends as ``user_failed`` (excluded from every dialogue metric, counted as
incomplete). An unreadable vote is never an abstention: the label is the council's vote
(:meth:`resources.llm.council.Council.vote`, the rule every council shares), which stands only on
a majority of the configured members; since the turn also uses every member's node ids and label
(fragments, candidate filter), a lost vote fails the turn even when the others agree. The call log
caches only successful calls, so running the job again retries exactly the calls that failed.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

from pipelines.abiss.taxonomy import Group, subcategory
from pipelines.interaction import prompts
from pipelines.interaction.fragments import Fragment, extract_fragments, render_fragments
from pipelines.interaction.leakage import contains_value, gold_only_values
from resources.llm.votes import decide

REFUSAL = "That's not relevant to my question."
LABELS = ("Relevant", "Technical", "Irrelevant")
CANDIDATE_FILTERS = ("label", "all")


@dataclass
class UserTurn:
    relevance: str | None  # None when the turn could not be produced (``failed``)
    answer: str | None
    short_circuit: bool = False
    label_votes: list[dict] = field(default_factory=list)  # member, label, node_ids, parsed_ok, llm_call_id
    candidates: list[dict] = field(default_factory=list)  # member, answer, parsed_ok, llm_call_id
    tournament: list[dict] = field(default_factory=list)  # judge, candidate_a, candidate_b, winner, llm_call_id
    fragments: list[str] = field(default_factory=list)  # Technical fragments the answer was grounded on
    winner_member: str | None = None
    margin: int | None = None
    unanimous: bool | None = None
    failed: bool = False  # a call failed (or nothing readable came back): no label, no answer
    error: str | None = None  # why the turn was not produced
    invalid_node_ids: list[int] = field(default_factory=list)  # stage-1 ids outside the query's fragments
    withheld_node_ids: list[int] = field(default_factory=list)  # chosen ids held back: a withheld value

    @property
    def status(self) -> str:
        return "failed" if self.failed else "short_circuit" if self.short_circuit else "ok"


def _call_fields(r) -> dict:
    return {"status": r.status, "error": r.error, "parsed_ok": r.ok, "llm_call_id": r.call_id}


def _unusable(records: list[dict], who: str) -> list[str]:
    """Why each call of ``records`` gave nothing usable: a failed call or an answer that could not be
    read after the repair call (the same thing for a turn: #30 item 1, #34 item 2)."""
    return [
        f"{who} {rec.get('member') or rec.get('judge')}: {rec['error'] or 'unreadable answer'}"
        for rec in records
        if rec["status"] != "ok" or not rec["parsed_ok"]
    ]


def _failed(turn: UserTurn, error: str) -> UserTurn:
    turn.failed, turn.error, turn.relevance, turn.answer = True, error, None, None
    turn.winner_member, turn.margin = None, None
    return turn


def members_without_usable_answer(conversations: list[dict]) -> dict[str, str]:
    """Members of the user council none of whose calls in these conversations gave a usable answer
    (failed or unreadable every time), as ``{member: "k of k calls"}``: named by the run, as a
    broken validator is (#34 item 2), instead of showing only as incomplete conversations."""
    calls: dict[str, int] = {}
    bad: dict[str, int] = {}
    for c in conversations:
        for t in c.get("turns") or []:
            for rec in [*(t.get("label_votes") or []), *(t.get("candidates") or []), *(t.get("tournament") or [])]:
                m = rec.get("member") or rec.get("judge")
                calls[m] = calls.get(m, 0) + 1
                bad[m] = bad.get(m, 0) + int(rec.get("status") != "ok" or not rec.get("parsed_ok"))
    return {m: f"{bad[m]} of {n} calls" for m, n in sorted(calls.items()) if n and bad[m] == n}


def winning_label(labels: list[str | None]) -> str:
    """Plurality over the stage-1 labels; a tie is Irrelevant (no vote at all never reaches this:
    :meth:`SimulatedUser.answer` marks such a turn as failed)."""
    tally = decide(labels, "plurality", tie="reject")
    return tally.decision if tally.decision is not None else "Irrelevant"


MAX_FRAGMENTS = 4  # default cap on the fragments a Technical answer is grounded on (see docs/interaction.md)

# The paper's Technical label (§5.2): "ordering, limits, grouping, aggregation, which columns or
# tables". Fragments of those clauses go first under the cap; WHERE conjuncts (filters: what the
# question asks, not how) come last.
_TECHNICAL_ORDER = {c: i for i, c in enumerate(("ORDER_BY", "LIMIT", "GROUP_BY", "HAVING", "DISTINCT", "SELECT"))}
_TECHNICAL_ORDER.update({"FROM": 6, "JOIN": 6, "WHERE": 7})


def holds_withheld_value(fragment: Fragment, withheld: list[str]) -> bool:
    """True when ``fragment`` contains a value the user is meant to hold back: a gold-only literal
    (:func:`pipelines.interaction.leakage.gold_only_values`: in the gold SQL, not in the question or
    evidence), e.g. ``T2.race = 'Android'`` for "superheroes that have the same race as I do"."""
    return any(contains_value(fragment.sql.lower(), v) for v in withheld)


def technical_fragments(
    votes: list[dict],
    fragments: list[Fragment],
    max_fragments: int | None = MAX_FRAGMENTS,
    withheld: list[str] | tuple = (),
) -> tuple[list[Fragment], list[int], list[int]]:
    """The fragments a Technical answer may use, sorted by id; the invalid ids dropped; the ids held back.

    Candidates are the union of the Technical voters' node ids (the reference rule). Ids outside the
    query's fragments (a hallucinated ``[1..20]`` for a 6-node query) are dropped and returned. A
    fragment holding a withheld value (:func:`holds_withheld_value`) is never handed over, whoever
    chose it (#30 item 3: the cap alone kept the lowest ids and let WHERE values through). Of the
    rest, at most ``max_fragments`` are kept (None = no cap), chosen by the paper's rule, not id
    order: the clauses the Technical label is about first (ordering, limits, grouping, aggregation,
    columns, tables; filters last), then the ids chosen by the most Technical voters, then id."""
    by_id = {f.id: f for f in fragments}
    chosen: dict[int, int] = {}
    invalid: list[int] = []
    for v in votes:
        if v["label"] != "Technical":
            continue
        for i in dict.fromkeys(v.get("node_ids") or []):
            if i in by_id:
                chosen[i] = chosen.get(i, 0) + 1
            else:
                invalid.append(i)
    held = sorted(i for i in chosen if holds_withheld_value(by_id[i], list(withheld)))
    keep = sorted(
        (i for i in chosen if i not in held),
        key=lambda i: (_TECHNICAL_ORDER.get(by_id[i].clause, 7), -chosen[i], i),
    )
    if max_fragments is not None:
        keep = keep[:max_fragments]
    return [by_id[i] for i in sorted(keep)], invalid, held


def tournament(n: int, judge_votes) -> tuple[int, list[int]]:
    """Winner index and tallies of a pairwise tournament; ``judge_votes`` yields winner indices."""
    tallies = [0] * n
    for w in judge_votes:
        tallies[w] += 1
    best = max(tallies)
    return tallies.index(best), tallies  # a tie goes to the lowest index


class SimulatedUser:
    def __init__(
        self,
        council,
        candidate_filter: str = "label",
        seed: int = 42,
        max_fragments: int | None = MAX_FRAGMENTS,
        log=None,
    ):
        if candidate_filter not in CANDIDATE_FILTERS:
            raise ValueError(f"candidate_filter must be one of {CANDIDATE_FILTERS}")
        if max_fragments is not None and max_fragments < 1:
            raise ValueError(f"max_fragments must be at least 1 (got {max_fragments})")
        self.council = council
        self.candidate_filter = candidate_filter
        self.seed = seed
        self.max_fragments = max_fragments
        self.log = log  # a logging.Logger-like object for hallucinated node ids (optional)

    def answer(
        self,
        q: dict,
        schema_context: str,
        turns: list[tuple[str, str | None]],
        clarification: str,
        conversation_id: str,
        step: int,
    ) -> UserTurn:
        sub = subcategory(q["subcategory"])
        if sub.group is Group.UNANSWERABLE:
            return UserTurn("Irrelevant", REFUSAL, short_circuit=True, unanimous=None)
        tag = dict(candidate_id=q["question_id"], conversation_id=conversation_id, step=step)
        fragments = extract_fragments(q.get("sql"))
        schema = prompts.UserClassifySolvable if sub.group is Group.AMBIGUOUS else prompts.UserClassifyAnswerable
        msgs = prompts.user_classify_messages(schema_context, q, turns, clarification, render_fragments(fragments))
        # The council's one vote rule (every member asked: the turn uses every label and node list).
        outcome = self.council.vote(
            msgs,
            schema,
            extract=lambda p: p.relevancy,
            rule="plurality",
            tag=dict(stage="interaction_user_label", **tag),
            short_circuit=False,
        )
        by_member = {v.member: (v, r) for v, r in zip(outcome.votes, outcome.results)}
        votes = []
        for member in self.council.member_names:
            v, r = by_member[member]
            votes.append(
                {
                    "member": member,
                    "label": v.vote,
                    "node_ids": list(r.parsed.node_ids) if v.vote is not None else [],
                    **_call_fields(r),
                }
            )
        labels = [v["label"] for v in votes]
        valid = [x for x in labels if x is not None]
        turn = UserTurn(
            None, None, label_votes=votes, unanimous=bool(valid) and len(set(valid)) == 1 and len(valid) == len(labels)
        )
        # An unreadable answer is a failed call, never an abstention (#30 item 1): the Technical
        # fragments and the answering members come from every member's vote, so a turn with a lost
        # vote is not produced even when the others agree; a rerun re-asks only what failed.
        failures = _unusable(votes, "label vote")
        if failures or not outcome.decided:
            return _failed(turn, "; ".join(failures) or "no majority of the configured members")
        label = winning_label(labels)
        withheld = gold_only_values(q.get("sql"), q.get("question"), q.get("evidence"))
        chosen, invalid, held = technical_fragments(votes, fragments, self.max_fragments, withheld)
        turn.invalid_node_ids, turn.withheld_node_ids = invalid, held
        if invalid and self.log is not None:
            self.log.warning(
                f"conversation {conversation_id} step {step}: stage-1 node ids {sorted(set(invalid))} "
                f"are not among the query's {len(fragments)} fragments; dropped"
            )
        fragment_texts = [f.sql for f in chosen] if label == "Technical" else []
        turn.relevance, turn.fragments = label, fragment_texts

        answerers = [v["member"] for v in votes if v["label"] == label] if self.candidate_filter == "label" else []
        if not answerers:
            answerers = list(self.council.member_names)
        amsgs = prompts.user_answer_messages(schema_context, q, turns, clarification, label, fragment_texts)
        atag = dict(stage="interaction_user_answer", label=label, **tag)
        answers = [self.council.ask(m, amsgs, prompts.UserAnswer, tag=atag) for m in answerers]
        candidates = [
            {"member": m, "answer": (r.parsed.answer.strip() if r.ok else None), **_call_fields(r)}
            for m, r in zip(answerers, answers)
        ]
        turn.candidates = candidates
        usable = [c for c in candidates if c["answer"]]
        failures = _unusable(candidates, "answer")
        if failures:
            return _failed(turn, "; ".join(failures))
        if not usable:
            return _failed(turn, f"no readable answer from any of the {len(candidates)} answering members")
        if len(usable) == 1 or len({c["answer"] for c in usable}) == 1:
            turn.answer, turn.winner_member = usable[0]["answer"], usable[0]["member"]
            return turn
        rng = random.Random(f"{self.seed}:{conversation_id}:{step}")
        judge_votes, records = [], []
        for i, j in itertools.combinations(range(len(usable)), 2):
            a, b = (i, j) if rng.random() < 0.5 else (j, i)
            tmsgs = prompts.tournament_messages(
                schema_context, q, turns, clarification, label, fragment_texts, usable[a]["answer"], usable[b]["answer"]
            )
            ttag = dict(stage="interaction_user_tournament", pair=f"{a}-{b}", **tag)
            for member, r in zip(
                self.council.member_names, self.council.ask_all(tmsgs, prompts.PairwiseChoice, tag=ttag)
            ):
                winner = None
                if r.ok:
                    winner = a if r.parsed.answer == "A" else b
                    judge_votes.append(winner)
                records.append(
                    {
                        "judge": member,
                        "candidate_a": usable[a]["member"],
                        "candidate_b": usable[b]["member"],
                        "winner": usable[winner]["member"] if winner is not None else None,
                        **_call_fields(r),
                    }
                )
        turn.tournament = records
        failures = _unusable(records, "judge")
        if failures:
            return _failed(turn, "; ".join(failures))
        best, tallies = tournament(len(usable), judge_votes)
        ordered = sorted(tallies, reverse=True)
        turn.answer, turn.winner_member = usable[best]["answer"], usable[best]["member"]
        turn.margin = ordered[0] - ordered[1]
        return turn
