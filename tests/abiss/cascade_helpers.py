"""Helpers for the cascade-stage tests: hand-made candidate rows over the demo university database and
a scripted responder that tells the stage prompts apart."""

import json
import re

from pipelines.abiss.prompts import PROMPT_OPENINGS
from pipelines.abiss.taxonomy import SUBCATEGORY_BY_ID, subcategory
from resources.llm import Council, call_log
from tests.llm_fakes import scripted_member

MARKERS = {k: v for k, v in PROMPT_OPENINGS.items() if k not in ("generate_question", "ground_sql")}


STAGE_KIND = {3: "conformance", 4: "ground_truth", 8: "feedback", 10: "style"}


GARBAGE = "I am not sure what to say here."  # no JSON: parse_failed, i.e. an abstention


_NAME_TO_ID = {s.name: s.id for s in SUBCATEGORY_BY_ID.values()}


def kind_of(text: str) -> str:
    for kind, marker in MARKERS.items():
        if marker in text:
            return kind
    return "other"  # e.g. the client's repair call after an unparseable reply


def field_of(text: str, name: str) -> str | None:
    m = re.search(rf"^{name}: (.*)$", text, re.MULTILINE)
    return m.group(1).strip() if m else None


class Script:
    """Scripted responder: ``handlers[kind](member, text)`` -> dict (sent as JSON), str or exception.

    Records ``(kind, member, question)`` for every request the provider receives.
    """

    def __init__(self, **handlers):
        self.handlers = handlers
        self.seen: list[tuple[str, str, str | None]] = []

    def __call__(self, req):
        member = req.model.split("/")[-1]
        text = [m for m in req.messages if m["role"] == "user"][-1]["content"]
        kind = kind_of(text)
        self.seen.append((kind, member, field_of(text, "Question")))
        handler = self.handlers.get(kind)
        if handler is None:
            return GARBAGE
        out = handler(member, text)
        return json.dumps(out) if isinstance(out, dict) else out

    def count(self, kind: str | None = None, member: str | None = None) -> int:
        return sum((kind is None or k == kind) and (member is None or m == member) for k, m, _ in self.seen)


def council(names="abc", **member_kw) -> Council:
    return Council("validators", [scripted_member(n, **member_kw) for n in names], call_log())


def cand(
    cid: str,
    sub_id: str,
    question: str,
    sql: str | None = None,
    *,
    group_id: str | None = None,
    request_id: str | None = None,
    interpretation_index: int | None = None,
    evidence: str | None = None,
    hidden_knowledge: str | None = None,
    feedback: str | None = None,
    style: str = "formal",
    generator: str = "gen_a",
    difficulty: str = "moderate",
) -> dict:
    """A candidate row with the columns ``ground_sql`` produces."""
    sub = subcategory(sub_id)
    return {
        "candidate_id": cid,
        "group_id": group_id or f"grp_{cid}",
        "request_id": request_id or f"req_{cid}",
        "object_id": f"obj_{cid}",
        "db_id": "university",
        "generator": generator,
        "builder": "llm",
        "subcategory": sub.id,
        "group": sub.group.value,
        "style": style,
        "requested_difficulty": difficulty,
        "difficulty": difficulty,
        "question": question,
        "evidence": evidence,
        "hidden_knowledge": hidden_knowledge,
        "feedback": feedback,
        "interpretation_index": interpretation_index,
        "sql": sql,
        "status": "ok",
        "grounding_status": "ok" if sql else "not_needed",
        "grounding_error": None,
        "grounding_call_id": None,
        "llm_call_id": None,
    }


def ans_row(cid="c_ans", **kw):
    return cand(
        cid,
        "answerable",
        "List the titles of the courses worth 12 credits.",
        "SELECT title FROM courses WHERE credits = 12",
        **kw,
    )


def evid_row(cid="c_evid", **kw):
    return cand(
        cid,
        "answerable_with_evidence",
        "List the names of the senior students.",
        "SELECT first_name, last_name FROM students WHERE credits > 90",
        evidence="Senior students are students with more than 90 credits.",
        **kw,
    )


def amb_pair(gid="g_recent", question="List the titles of the recent courses."):
    return [
        cand(
            f"{gid}_0",
            "lexical_vagueness",
            question,
            "SELECT title FROM courses WHERE year = 2026",
            group_id=gid,
            request_id=f"req_{gid}",
            interpretation_index=0,
            hidden_knowledge="Recent means offered in 2026.",
        ),
        cand(
            f"{gid}_1",
            "lexical_vagueness",
            question,
            "SELECT title FROM courses WHERE year >= 2025",
            group_id=gid,
            request_id=f"req_{gid}",
            interpretation_index=1,
            hidden_knowledge="Recent means offered in 2025 or later.",
        ),
    ]


def una_row(cid="c_una", **kw):
    return cand(
        cid,
        "missing_entity",
        "What is the parking permit number of each student?",
        feedback="The database stores no parking permits; ask about enrollment or credits instead.",
        **kw,
    )


def verdicts(table: dict[str, str | None]):
    """Yes/no handler from a member -> 'yes' | 'no' | None (unparseable) table."""
    return lambda m, t: GARBAGE if table.get(m) is None else {"verdict": table[m]}


def by_id(decisions):
    return {d["candidate_id"]: d for d in decisions}


SOLVING_SQL = "SELECT student_id, credits FROM students"
