"""Scripted councils for the interaction tests: a responder that recognises each task by its prompt opening."""

import json

from pipelines.abiss.taxonomy import subcategory
from pipelines.interaction.prompts import PROMPT_OPENINGS

GARBAGE = "no JSON here"


def kind_of(text: str) -> str:
    for kind, opening in PROMPT_OPENINGS.items():
        if opening in text:
            return kind
    return "other"


class Script:
    """``handlers[kind](member, text, req)`` → dict (sent as JSON) or str; records (kind, member)."""

    def __init__(self, **handlers):
        self.handlers = handlers
        self.seen: list[tuple[str, str]] = []

    def __call__(self, req):
        member = req.model.split("/")[-1]
        text = [m for m in req.messages if m["role"] == "user"][-1]["content"]
        kind = kind_of(text)
        self.seen.append((kind, member))
        h = self.handlers.get(kind)
        if h is None:
            return GARBAGE
        out = h(member, text, req)
        return out if isinstance(out, str) else json.dumps(out)

    def count(self, kind: str) -> int:
        return sum(1 for k, _ in self.seen if k == kind)


def question_row(
    sub: str,
    question: str,
    sql: str | None = None,
    hidden_knowledge: str | None = None,
    feedback: str | None = None,
    qid: str | None = None,
    evidence: str | None = None,
    db_id: str = "university",
    style: str = "formal",
) -> dict:

    s = subcategory(sub)
    return {
        "question_id": qid or f"q-{sub}-{abs(hash(question)) % 10_000}",
        "candidate_id": "c",
        "group_id": "g",
        "db_id": db_id,
        "question": question,
        "evidence": evidence,
        "sql": sql,
        "hidden_knowledge": hidden_knowledge,
        "feedback": feedback,
        "subcategory": sub,
        "category": s.category,
        "group": s.group.value,
        "is_solvable": s.solvable,
        "style": style,
        "difficulty": "simple",
        "generator": "test",
        "interpretation_index": None,
    }


def use_council_file(tmp_path, monkeypatch, councils: dict[str, list[str]]):
    """Write a council file of scripted members (``scripted/<name>``) and point the council layer at it."""
    cfg = tmp_path / "council.yaml"
    member = {"temperature": 0.0, "max_tokens": 64, "seed": 0, "max_in_flight": 8, "timeout_s": 10.0, "max_retries": 0}
    names = sorted({n for members in councils.values() for n in members})
    cfg.write_text(
        json.dumps({"members": {n: {"model": f"scripted/{n}", **member} for n in names}, "councils": councils})
    )
    monkeypatch.setenv("QUANDARY_COUNCIL_CONFIG", str(cfg))
    from resources.llm import reset_councils  # lazy: after the environment above is set

    reset_councils()
    return cfg
