"""Pure vote rules for LLM councils (no I/O, no LLM imports).

A *vote* is a label (``True``/``False`` for yes/no questions, or any hashable label) or ``None``
for an unknown vote. The council (:meth:`resources.llm.council.Council.avote`) never casts ``None``
for a member whose call failed or whose answer could not be read: such a member is *lost* and
counted among the ``n_remaining`` unknowns of :func:`is_decided`, so a decision stands only when it
holds whatever the lost members would have said. ``abstain_as_no`` is kept for callers tallying
their own ``None`` votes.

Rules
-----
- ``strict_majority``: yes/no. Passes iff ``yes > no`` strictly (a tie rejects). With
  ``abstain_as_no=True`` abstentions are added to ``no``. No valid votes at all → reject.
- ``unanimous``: yes/no. Passes iff there is at least one yes and no "no" (abstentions as above).
- ``plurality``: any labels. The label with the most votes wins; a tie is resolved by ``tie``:
  ``"reject"`` (decision ``None``), ``"first"`` (the tied label whose first vote came earliest), or
  a sequence of labels giving a preference order (unlisted labels → reject).

Short-circuit
-------------
``is_decided(votes, n_remaining, ...)`` says whether the outcome is already fixed whatever the
remaining members answer (including abstaining). ``min_more_votes(...)`` is a lower bound on how
many more votes are needed before the outcome *can* be fixed, so a council can ask that many
members at once and never ask more than necessary.
"""

from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

RULES = ("strict_majority", "unanimous", "plurality")
Vote = Hashable | None


@dataclass(frozen=True)
class Tally:
    counts: dict[Any, int]
    abstentions: int
    decision: Any  # True/False for yes/no rules; label or None for plurality

    @property
    def n_votes(self) -> int:
        return sum(self.counts.values()) + self.abstentions


def _check_rule(rule: str) -> None:
    if rule not in RULES:
        raise ValueError(f"unknown vote rule {rule!r}; expected one of {RULES}")


def _yes_no(votes: Sequence[Vote]) -> tuple[int, int, int]:
    yes = sum(1 for v in votes if v is True)
    no = sum(1 for v in votes if v is False)
    return yes, no, len(votes) - yes - no


def decide(
    votes: Sequence[Vote],
    rule: str = "strict_majority",
    *,
    abstain_as_no: bool = False,
    tie: str | Sequence[Hashable] = "reject",
) -> Tally:
    """Tally ``votes`` (in the order they were cast) under ``rule``."""
    _check_rule(rule)
    if rule in ("strict_majority", "unanimous"):
        bad = [v for v in votes if v is not None and not isinstance(v, bool)]
        if bad:
            raise ValueError(f"rule {rule!r} takes True/False/None votes, got {bad[:3]!r}")
        yes, no, abstain = _yes_no(votes)
        no_eff = no + (abstain if abstain_as_no else 0)
        if rule == "strict_majority":
            decision = yes > no_eff
        else:
            decision = yes > 0 and no_eff == 0
        return Tally({True: yes, False: no}, abstain, decision)

    counts = Counter(v for v in votes if v is not None)
    abstain = sum(1 for v in votes if v is None)
    return Tally(dict(counts), abstain, _plurality_winner(votes, counts, tie))


def _plurality_winner(votes: Sequence[Vote], counts: Counter, tie) -> Any:
    if not counts:
        return None
    top = max(counts.values())
    leaders = [label for label, c in counts.items() if c == top]
    if len(leaders) == 1:
        return leaders[0]
    if tie == "reject":
        return None
    if tie == "first":
        first_seen = {}
        for i, v in enumerate(votes):
            if v is not None and v not in first_seen:
                first_seen[v] = i
        return min(leaders, key=lambda label: first_seen[label])
    if isinstance(tie, str):
        raise ValueError(f"unknown tie rule {tie!r}; use 'reject', 'first' or a preference list")
    for label in tie:
        if label in leaders:
            return label
    return None


def is_decided(
    votes: Sequence[Vote],
    n_remaining: int,
    rule: str = "strict_majority",
    *,
    abstain_as_no: bool = False,
    tie: str | Sequence[Hashable] = "reject",
) -> bool:
    """True when no answers of the ``n_remaining`` members can change the decision."""
    _check_rule(rule)
    current = decide(list(votes) + [None] * n_remaining, rule, abstain_as_no=abstain_as_no, tie=tie).decision
    if n_remaining == 0:
        return True
    if rule in ("strict_majority", "unanimous"):
        # Only counts matter: try every split of the remaining members into yes/no/abstain.
        for k_yes in range(n_remaining + 1):
            for k_no in range(n_remaining - k_yes + 1):
                extra = [True] * k_yes + [False] * k_no + [None] * (n_remaining - k_yes - k_no)
                if decide(list(votes) + extra, rule, abstain_as_no=abstain_as_no).decision != current:
                    return False
        return True
    # Plurality: a change needs some single label (existing, or a new one) to gain votes; piling
    # k votes on one label while the rest abstain is the strongest such attack (see tests, which
    # check this against brute force).
    new_label = object()
    candidates = list(dict.fromkeys(v for v in votes if v is not None)) + [new_label]
    if isinstance(tie, (list, tuple)):
        candidates += [t for t in tie if t not in candidates]
    for label in candidates:
        for k in range(1, n_remaining + 1):
            extra = [label] * k + [None] * (n_remaining - k)
            if decide(list(votes) + extra, rule, tie=tie).decision != current:
                return False
    return True


def min_more_votes(
    votes: Sequence[Vote],
    n_remaining: int,
    rule: str = "strict_majority",
    *,
    abstain_as_no: bool = False,
    tie: str | Sequence[Hashable] = "reject",
) -> int:
    """Smallest number of further votes after which the outcome could be decided (0 if decided).

    Used to size the next wave of concurrent requests: asking fewer can never decide, asking more
    may waste calls.
    """
    for k in range(n_remaining + 1):
        if _could_decide_after(votes, k, n_remaining, rule, abstain_as_no, tie):
            return k
    return n_remaining


def _could_decide_after(votes, k, n_remaining, rule, abstain_as_no, tie) -> bool:
    if k == 0:
        return is_decided(votes, n_remaining, rule, abstain_as_no=abstain_as_no, tie=tie)
    rest = n_remaining - k
    if rule in ("strict_majority", "unanimous"):
        options = [[True] * k, [False] * k]
        if abstain_as_no:
            options.append([None] * k)
    else:
        options = [[label] * k for label in dict.fromkeys(v for v in votes if v is not None)]
        options.append([object()] * k)
    return any(is_decided(list(votes) + extra, rest, rule, abstain_as_no=abstain_as_no, tie=tie) for extra in options)
