"""What every council check returns (the shared names of :mod:`.council_checks` and
:mod:`.verifier`): the checks and their error types, the three verdicts, the verdict row, and an
item as the ABISS cascade's stages read a candidate."""

from __future__ import annotations

import json
from dataclasses import dataclass

from pipelines.abiss.stages import ANS
from pipelines.benchmark_audit.records import Item

COUNCIL_CHECKS = {
    "council_gold_unsatisfying": "E1",
    "council_evidence_unneeded": "E3",
    "council_rewrites_differ": "E4",
    "council_verifier": "E1",  # opt-in: validators probe the data (bounded) before voting (verifier.py)
}
DEFAULT_COUNCIL_CHECKS = ["council_gold_unsatisfying", "council_evidence_unneeded", "council_rewrites_differ"]
FLAG, PASS, UNDECIDED = "flag", "pass", "undecided"


@dataclass(frozen=True)
class CouncilVerdict:
    item_index: int
    check: str
    verdict: str  # flag | pass | undecided
    reason: str
    votes: list  # {member, comparison, vote, parsed_ok, llm_call_id}

    @property
    def error_type(self) -> str:
        return COUNCIL_CHECKS[self.check]

    def to_row(self) -> dict:
        return {
            "item_index": self.item_index,
            "check": self.check,
            "error_type": self.error_type,
            "verdict": self.verdict,
            "reason": self.reason,
            "votes": json.dumps(self.votes),
        }


def candidate_row(item: Item, digest: str) -> dict:
    """An item as the cascade's stages read a candidate (an answerable question, with evidence or not)."""
    return {
        "candidate_id": f"audit-{digest[:12]}-{item.index}",
        "group": ANS,
        "subcategory": "answerable_with_evidence" if item.evidence else "answerable",
        "question": item.question,
        "evidence": item.evidence or None,
        "hidden_knowledge": item.hidden_knowledge or None,
        "sql": item.gold_sql,
    }
