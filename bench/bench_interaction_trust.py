"""Issue #30 before/after: the interaction rules that bent the numbers, measured on the real code.

    .venv/bin/python bench/bench_interaction_trust.py [--turns 1000] [--garbage 0.3] [--seed 7] [--smoke]

``--smoke``: 50 turns, 20 verdicts, no large gold (seconds).

1. **Unreadable label votes** — simulated turns with three honest members (labels drawn per turn:
   unanimous, 2-1, or 1-1-1), one member answering garbage on ``--garbage`` of its calls. *Before*:
   the garbage vote is an abstention and the plurality (tie → Irrelevant) of the other two decides
   (the old rule, reconstructed with ``votes.decide``). *After*: the council's one vote loop
   (``Council.avote``, with a fake transport); a turn without a majority of the configured members
   is not produced (resumable).
2. **Feedback judges** — honest judges, the first of three failing on every call; *before*: the old
   vote loop (a failed judge counted as an abstention that can end the vote); *after*: ``avote``.
3. **WHERE values** — BIRD dev superhero (129 questions, real gold SQL): voters list every node id;
   *before*: the cap kept the lowest 4 ids; *after*: ``technical_fragments`` with the withheld values.
4. **Large gold** — superhero.sqlite, a 100,000+ row gold and an identical prediction; *before*:
   undecided; *after*: compared by digest (the safe executor folds rows, holding none).
"""

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipelines.interaction import metrics as M  # noqa: E402
from pipelines.interaction.fragments import extract_fragments  # noqa: E402
from pipelines.interaction.leakage import gold_only_values  # noqa: E402
from pipelines.interaction.user import holds_withheld_value, technical_fragments  # noqa: E402
from resources.llm.client import CallResult  # noqa: E402
from resources.llm.council import Council  # noqa: E402
from resources.llm.votes import decide, min_more_votes  # noqa: E402
from tests.llm_fakes import scripted_member  # noqa: E402

BIRD = Path(__file__).resolve().parents[2] / "shared" / "data" / "bird" / "dev"
if not BIRD.is_dir():
    BIRD = Path("/work/shared/data/bird/dev")
LABELS = ("Relevant", "Technical", "Irrelevant")


class _Reply:
    def __init__(self, value):
        self.value = value


class FakeCouncil(Council):
    """The real vote loop over scripted answers: ``answers[member]`` is a label or None (unreadable)."""

    answers: dict = {}

    async def aask(self, member_name, messages, output_model, tag=None, **kw):
        v = self.answers[member_name]
        ok = v is not None
        return CallResult("k", member_name, ok, _Reply(v) if ok else None, "", status="ok" if ok else "parse_failed")


def old_label(votes):
    tally = decide(votes, "plurality", tie="reject")  # abstentions dropped, a tie is Irrelevant
    return tally.decision if tally.decision is not None else "Irrelevant"


def labels_part(n: int, garbage: float, rng: random.Random) -> dict:
    council = FakeCouncil("user_simulator", [scripted_member(f"u{i}") for i in range(3)], None)
    changed_before = unproduced_after = changed_after = relevant_to_irrelevant = 0
    for _ in range(n):
        kind = rng.random()
        a = rng.choice(LABELS)
        if kind < 0.6:
            honest = [a, a, a]
        elif kind < 0.9:
            b = rng.choice([x for x in LABELS if x != a])
            honest = rng.sample([a, a, b], 3)
        else:
            honest = rng.sample(list(LABELS), 3)
        truth = old_label(honest)
        seen = list(honest)
        if rng.random() < garbage:
            seen[2] = None
        before = old_label(seen)
        changed_before += before != truth
        relevant_to_irrelevant += truth == "Relevant" and before == "Irrelevant"
        council.answers = dict(zip(council.member_names, seen))
        out = asyncio.run(council.avote([], None, lambda r: r.value, "plurality", short_circuit=False))
        if not out.decided or out.lost:
            unproduced_after += 1  # not produced: the turn waits for the rerun
        else:
            after = out.decision if out.decision is not None else "Irrelevant"
            changed_after += after != truth
    return {
        "turns": n,
        "label changed (before)": changed_before,
        "Relevant -> Irrelevant (before)": relevant_to_irrelevant,
        "label changed (after)": changed_after,
        "turns not produced, resumable (after)": unproduced_after,
    }


def _old_fb(votes3):
    """The pre-#30 vote loop: an unreadable/failed vote is an abstention that counts as cast."""
    votes, asked = [], 0
    while asked < 3:
        k = min_more_votes(votes, 3 - asked, "strict_majority")
        if k == 0:
            break
        votes += votes3[asked : asked + k]
        asked += k
    return M.fb_decision(votes + [None] * (3 - asked), 3)


def feedback_part(n: int, rng: random.Random) -> dict:
    council = FakeCouncil("feedback_judges", [scripted_member(f"j{i}") for i in range(3)], None)
    out = {"yes decided (before)": 0, "no decided (before)": 0, "yes decided (after)": 0, "no decided (after)": 0}
    n_yes = 0
    for _ in range(n):
        truth = rng.random() < 0.5
        n_yes += truth
        votes = [None, truth, truth]
        key = "yes" if truth else "no"
        out[f"{key} decided (before)"] += _old_fb(votes) is not None
        council.answers = dict(zip(council.member_names, votes))
        outcome = asyncio.run(council.avote([], None, lambda r: r.value, "strict_majority"))
        out[f"{key} decided (after)"] += outcome.decided
    return {"verdicts": n, "yes": n_yes, "no": n - n_yes, **out}


def fragments_part() -> dict:
    questions = json.loads((BIRD / "superhero_dev_questions.arcwise.json").read_text())
    before = after = technical = 0
    for q in questions:
        frags = extract_fragments(q["SQL"])
        if not frags:
            continue
        technical += 1
        withheld = gold_only_values(q["SQL"], q["question"], None)  # the user holds the evidence back too
        votes = [{"label": "Technical", "node_ids": [f.id for f in frags]}] * 3
        old = sorted(f.id for f in frags)[:4]
        by_id = {f.id: f for f in frags}
        before += any(holds_withheld_value(by_id[i], withheld) for i in old)
        chosen, _, _ = technical_fragments(votes, frags, 4, withheld)
        after += any(holds_withheld_value(f, withheld) for f in chosen)
    return {
        "Technical turns (every id listed)": technical,
        "grounded on a withheld value (before)": before,
        "(after)": after,
    }


def large_gold_part() -> dict:
    db = str(BIRD.parent / "dev_databases" / "superhero" / "superhero.sqlite")
    gold = "SELECT T1.id, T2.power_id FROM superhero AS T1 CROSS JOIN hero_power AS T2 WHERE T1.id <= 120"
    t0 = time.perf_counter()
    verdict, reason = M.execution_match(db, gold, gold, timeout_s=30.0, golds=M.GoldResults(db, 60.0))
    t1 = time.perf_counter()
    other = "SELECT T1.id, T2.power_id FROM superhero AS T1 CROSS JOIN hero_power AS T2 WHERE T1.id <= 121"
    wrong, why = M.execution_match(db, gold, other, timeout_s=30.0)
    return {
        "identical prediction (before)": "undecided",
        "(after)": verdict,
        "reason": reason,
        "one more hero (after)": wrong,
        "why": why,
        "s": round(t1 - t0, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--garbage", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--smoke", action="store_true", help="50 turns, 20 verdicts, no large gold: seconds")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    turns, verdicts = (50, 20) if args.smoke else (args.turns, 200)
    parts = [
        ("1 labels", lambda: labels_part(turns, args.garbage, rng)),
        ("2 feedback", lambda: feedback_part(verdicts, rng)),
    ]
    if BIRD.is_dir():  # the shared data (../shared/data) is not in a fresh clone
        parts.append(("3 fragments", fragments_part))
        if not args.smoke:
            parts.append(("4 large gold", large_gold_part))
    for name, part in parts:
        print(name, json.dumps(part()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
