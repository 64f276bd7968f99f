"""Prompts and output schemas of the interaction benchmark (ABISS §5, reference prompt structure).

Every prompt starts with the shared system message holding the schema context
(:func:`pipelines.abiss.prompts.schema_messages`, DDL + 5 sample rows), so a server with prefix
caching reuses it across the system agent, the simulated user and the judges. The user message
follows the section order of the reference code (see ``../shared/specs/abiss-interaction.md``).
``PROMPT_OPENINGS`` is the first line of each task's user message: tests and the audit command
recognise a task by it. ``PROMPT_VERSION`` is :func:`pipelines.core.prompting.source_version` of this
module (the templates are written inline).
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, Field

from pipelines.abiss.prompts import schema_messages
from pipelines.abiss.taxonomy import STYLE_BY_ID, SUBCATEGORIES, Group, Subcategory, subcategory
from pipelines.core.prompting import source_version

PROMPT_OPENINGS = {
    "classify": "You are an expert in analyzing natural language questions for text-to-SQL systems.",
    "respond": "You are a text-to-SQL assistant talking with a user about their question.",
    "user_classify": "You are the classification engine of a text-to-SQL user simulator.",
    "user_answer": "You are simulating a non-technical user who asked a database question.",
    "tournament": "You are an expert evaluator of simulated user answers to clarification questions.",
    "feedback": "You are judging whether a text-to-SQL system explained why a question cannot be answered.",
}

SUBCATEGORY_IDS = tuple(s.id for s in SUBCATEGORIES)
GROUP_BEHAVIOUR = (
    "## Question Types and Expected Behavior\n"
    "- Answerable: the question maps to one SQL query. Generate the SQL; do not ask for clarification.\n"
    "- Ambiguous: the question has several valid readings. Ask one focused clarification question, then "
    "generate the SQL. Do not ask about what the schema or the evidence already says.\n"
    "- Unanswerable: the schema and evidence cannot answer it. Give feedback explaining what is missing."
)
NL_CONSTRAINT = (
    "You are a non-technical user: NEVER use SQL syntax, column or table names, aliases or code. "
    'Bad: "filter where T1.grade >= 28". Good: "I mean grades of 28 or more".'
)


# ----------------------------------------------------------------------- output schemas


class CategoryPrediction(BaseModel):
    category: Literal[SUBCATEGORY_IDS]  # type: ignore[valid-type]


class SystemTurn(BaseModel):
    """A non-final turn: exactly one field should be non-null (priority question > sql > feedback)."""

    system_question: str | None = Field(None, max_length=400)
    system_sql: str | None = Field(None, max_length=1500)
    system_feedback: str | None = Field(None, max_length=600)


class SystemFinalTurn(BaseModel):
    """The final turn: no clarification question is allowed (priority sql > feedback)."""

    system_sql: str | None = Field(None, max_length=1500)
    system_feedback: str | None = Field(None, max_length=600)


class UserClassifySolvable(BaseModel):
    reasoning: str = Field("", max_length=200)
    relevancy: Literal["Relevant", "Technical", "Irrelevant"]
    node_ids: list[int] = Field(default_factory=list, max_length=20)


class UserClassifyAnswerable(BaseModel):
    reasoning: str = Field("", max_length=200)
    relevancy: Literal["Technical", "Irrelevant"]
    node_ids: list[int] = Field(default_factory=list, max_length=20)


class UserAnswer(BaseModel):
    answer: str = Field(min_length=1, max_length=400)


class PairwiseChoice(BaseModel):
    analysis: str = Field("", max_length=300)
    answer: Literal["A", "B"]


class FeedbackMatch(BaseModel):
    analysis: str = Field("", max_length=600)
    matches: Literal["Yes", "No"]


# ----------------------------------------------------------------------- helpers


def category_label(sub: Subcategory) -> str:
    return sub.name if sub.name == sub.category else f"{sub.category} — {sub.name}"


def history_text(question: str, evidence: str | None, turns: list[tuple[str, str | None]]) -> str:
    """The completed turns as the reference renders them (User / Evidence / System / User ...)."""
    lines = ["The full conversation history is as follows:", f"User: {question}"]
    if evidence:
        lines.append(f"Evidence: {evidence}")
    for system_text, user_text in turns:
        lines.append(f"System: {system_text}")
        if user_text is not None:
            lines.append(f"User: {user_text}")
    return "\n".join(lines)


def _examples(sub: Subcategory) -> str:
    return "\n".join(f"  - {json.dumps(e, ensure_ascii=False)}" for e in sub.examples)


# ----------------------------------------------------------------------- system agent


def classify_messages(schema_context: str, question: str, evidence: str | None) -> list[dict]:
    cats = "\n".join(f"- {s.id}: **{category_label(s)}** [{s.group.value}] — {s.definition}" for s in SUBCATEGORIES)
    user = (
        f"{PROMPT_OPENINGS['classify']}\n"
        "Classify the question below into exactly one category of the taxonomy.\n\n"
        f"## Question to Classify\n**Question:** {question}\n**Additional Context:** {evidence or 'None'}\n\n"
        f"## Available Categories\n{cats}\n\n"
        "## Classification Task\nConsider:\n"
        "- whether every term maps to exactly one schema element;\n"
        "- whether the question has several valid readings;\n"
        "- whether the schema or evidence lacks something the question needs;\n"
        "- whether the question is about this database at all.\n\n"
        '## Output Format\n{"category": "<one category id from the list>"}'
    )
    return schema_messages(schema_context, user)


def respond_messages(
    schema_context: str,
    question: str,
    evidence: str | None,
    turns: list[tuple[str, str | None]],
    mode: str,
    sub: Subcategory | None,
    step: int,
    max_steps: int,
) -> list[dict]:
    """The interactive-turn prompt (reference ``get_system_response_prompt``), one per mode."""
    final = step >= max_steps
    parts = [
        PROMPT_OPENINGS["respond"],
        GROUP_BEHAVIOUR,
        f"## User Question\n**Question:** {question}\n**Evidence:** {evidence or 'None'}\n\n"
        f"### Conversation History\n{history_text(question, evidence, turns)}",
    ]
    if mode in ("ground_truth", "predicted") and sub is not None:
        guidance = {
            Group.ANSWERABLE: "Generate the SQL directly; do not ask for clarification.",
            Group.UNANSWERABLE: "Give feedback naming what is missing, why, and what would have to be added; "
            "no SQL and no questions.",
        }.get(sub.group)
        if guidance is None:
            guidance = (
                "If the user's answers have clarified the ambiguity, generate the SQL; otherwise ask a "
                "follow-up clarification."
                if turns
                else "Ask one clarification question targeting the ambiguity; do not guess."
            )
        parts.append(
            f"## Diagnosed Category\n**Category:** {category_label(sub)}\n**Type:** {sub.group.value}\n"
            f"**Definition:** {sub.definition}\n**Examples:**\n{_examples(sub)}\n\n{guidance}"
        )
    elif mode == "taxonomy_only":
        cats = "\n".join(
            f"- **{category_label(s)}** [{s.group.value}]: {s.definition}\n{_examples(s)}" for s in SUBCATEGORIES
        )
        parts.append(
            "## Taxonomy Reference\nNo category has been diagnosed for this question. Use the taxonomy "
            f"below to decide how to respond.\n{cats}"
        )
    # taxonomy_free: the generic behaviour block above is all the agent gets.
    status = f"## Conversation Status\n**Turn:** {step + 1} of {max_steps + 1}\n"
    if final:
        status += (
            "**This is the final turn.** You MUST provide either a SQL query or feedback; "
            "no clarification question is allowed."
        )
    else:
        status += f"You may ask up to {max_steps - step} more clarification question(s)."
        if turns:
            status += (
                " Do not repeat questions already asked. If the user's response was unhelpful, adapt: "
                "ask differently or answer with what you know."
            )
    parts.append(status)
    options = [
        "- **SQL Query** (`system_sql`): one valid SQLite query answering the question.",
        "- **Feedback** (`system_feedback`): why the question cannot be answered and what is missing.",
    ]
    if not final:
        options.insert(0, "- **Clarification Question** (`system_question`): one question to the user.")
    fields = "system_sql, system_feedback" if final else "system_question, system_sql, system_feedback"
    parts.append("## Response Options\n" + "\n".join(options))
    parts.append(
        f"## Output Format\nA JSON object with the fields {fields}. "
        "Provide exactly ONE non-null field; set the others to null."
    )
    return schema_messages(schema_context, "\n\n".join(parts))


# ----------------------------------------------------------------------- simulated user


def _style_section(style: str | None) -> str:
    s = STYLE_BY_ID.get(style or "formal") or STYLE_BY_ID["formal"]
    return f"**Expected Answer Style (Match Your Original Question):** {s.id}: {s.description}\nExample: {s.example}"


def user_classify_messages(schema_context: str, q: dict, turns, clarification: str, fragments_text: str) -> list[dict]:
    sub = subcategory(q["subcategory"])
    solvable_amb = sub.group is Group.AMBIGUOUS
    ctx = [
        f"**Original Question:** {q['question']}",
        f"**Additional Context:** {q.get('evidence') or 'None'}",
        f"**Question Type:** {sub.group.value}",
    ]
    if solvable_amb and q.get("hidden_knowledge"):
        ctx.append(f"**Hidden Knowledge (Disambiguating Intent):** {q['hidden_knowledge']}")
    labels = (
        "RELEVANT: the clarification targets the semantic ambiguity (which meaning the user intends).\n"
        if solvable_amb
        else ""
    )
    labels += (
        "TECHNICAL: it asks about ordering, limits, grouping, aggregation, or which columns or tables "
        "to use.\nIRRELEVANT: it does not help answer the question, asks for SQL, or is off-topic."
    )
    allowed = "Relevant, Technical or Irrelevant" if solvable_amb else "Technical or Irrelevant"
    user = (
        f"{PROMPT_OPENINGS['user_classify']}\n\n## Context\n"
        + "\n".join(ctx)
        + f"\n\n{history_text(q['question'], q.get('evidence'), turns)}\n\n"
        f"**Clarification Question:** {clarification}\n\n## SQL Reference Nodes\n{fragments_text}\n\n"
        f"## Relevancy Definitions\n{labels}\n\n## Classification Rules\n"
        f"- Answer with one label: {allowed}.\n- Questions about columns or tables are TECHNICAL.\n"
        + ("- For answerable questions, semantic clarifications are IRRELEVANT.\n" if not solvable_amb else "")
        + "- If TECHNICAL, list ALL node ids the clarification concerns in node_ids; otherwise node_ids is [].\n\n"
        "Give brief reasoning (~128 characters), then the JSON "
        '{"reasoning": "...", "relevancy": "...", "node_ids": [...]}.'
    )
    return schema_messages(schema_context, user)


def user_answer_messages(
    schema_context: str, q: dict, turns, clarification: str, label: str, fragments: list[str]
) -> list[dict]:
    history = history_text(q["question"], q.get("evidence") if label != "Irrelevant" else None, turns)
    head = f"{PROMPT_OPENINGS['user_answer']}\n\n## Context\n**Original Question:** {q['question']}\n"
    if label != "Irrelevant":
        head += f"**Evidence:** {q.get('evidence') or 'None'}\n"
    head += f"**Clarification Question:** {clarification}\n\n{history}\n\n"
    if label == "Relevant":
        body = (
            f"## Your Intent\n**What You Actually Mean:** {q.get('hidden_knowledge') or ''}\n\n{NL_CONSTRAINT}\n"
            "Be direct about which interpretation you mean."
        )
    elif label == "Technical":
        want = (
            "\n".join(f"- {f}" for f in fragments)
            if fragments
            else "No specific preferences are defined for this question."
        )
        body = (
            f"## What You Want (Reference)\n{want}\n\n{NL_CONSTRAINT}\n"
            "Paraphrase what the reference expresses in everyday words (e.g. 'ORDER BY count DESC' → "
            "'most popular first'). GROUNDING CONSTRAINT: say only what the reference expresses; add no "
            "extra filters, tie-breaks or dates; where it says nothing, say you have no preference."
            + ("" if fragments else " Say directly that you have no preference.")
        )
    else:
        body = (
            "The clarification is not relevant to your question. Politely but firmly refuse to answer it "
            '(e.g. "That\'s not relevant to my question."). Reveal nothing else.'
        )
    user = head + body + f"\n\n{_style_section(q.get('style'))}\n\n" + 'Answer with the JSON {"answer": "..."}.'
    return schema_messages(schema_context, user)


def tournament_messages(
    schema_context: str,
    q: dict,
    turns,
    clarification: str,
    label: str,
    fragments: list[str],
    answer_a: str,
    answer_b: str,
) -> list[dict]:
    """The pairwise judge. Unlike the reference judge it sees the clarification being answered."""
    extra = ""
    if label == "Relevant":
        extra = f"**Question Type:** Solvable\n**Hidden Knowledge:** {q.get('hidden_knowledge') or ''}\n"
        criteria = (
            "Primary: factual accuracy against the hidden knowledge, completeness, no leakage of SQL or "
            "schema names. Secondary: naturalness and style."
        )
    elif label == "Technical":
        src = "\n".join(f"- {f}" for f in fragments) if fragments else "(no preferences are defined)"
        extra = f"**Source Information (What the User Wants):**\n{src}\n"
        criteria = (
            "Intent accuracy against the source information, no fabrication, no leakage"
            + ("" if fragments else "; appropriate uncertainty, since no preferences are defined")
            + "."
        )
    else:
        criteria = (
            "A refusal is AUTOMATICALLY better; no leakage or fabrication. Secondary: clarity, brevity, politeness."
        )
    user = (
        f"{PROMPT_OPENINGS['tournament']} The clarification was judged {label}.\n\n## Context\n"
        f"{history_text(q['question'], q.get('evidence'), turns)}\n"
        f"**Clarification Question Being Answered:** {clarification}\n{_style_section(q.get('style'))}\n{extra}\n"
        f"**Answer A:** {answer_a}\n**Answer B:** {answer_b}\n\n## Criteria\n{criteria}\n\n"
        'Give a short analysis (~256 characters), then {"analysis": "...", "answer": "A" or "B"}. '
        "In case of a tie, select Answer A."
    )
    return schema_messages(schema_context, user)


def feedback_messages(schema_context: str, q: dict, feedback: str) -> list[dict]:
    sub = subcategory(q["subcategory"])
    expected = q.get("feedback") or q.get("hidden_knowledge") or ""
    user = (
        f"{PROMPT_OPENINGS['feedback']}\n\n## Context\n**Original Question:** {q['question']}\n"
        f"**Evidence:** {q.get('evidence') or 'None'}\n\n## Question Category\n{category_label(sub)}: "
        f"{sub.definition}\n\n## Expected Feedback\n{expected}\n\n## System's Feedback\n{feedback}\n\n"
        "It matches when it identifies the same missing element or reason as the expected feedback; it does not "
        "match when it names a different cause, is vague, or only asks for clarification.\n"
        'Give an analysis (~512 characters), then {"analysis": "...", "matches": "Yes" or "No"}.'
    )
    return schema_messages(schema_context, user)


PROMPT_VERSION = source_version(__file__)
