"""Prompts and output schemas for ABISS generation (§4.1) and validation (§4.2).

Every prompt starts with the same system message holding the schema context
(:func:`schema_messages`), so servers with prefix caching reuse it across requests and stages.
``PROMPT_VERSIONS`` holds each stage's :func:`pipelines.core.prompting.prompt_version` (its templates, the
system message and the taxonomy); assets use it as their code version, so editing a prompt marks
the stage and its downstream stale in the Dagster UI.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from pipelines.abiss.taxonomy import DIFFICULTY_BY_ID, STYLE_BY_ID, STYLES, Subcategory, subcategory
from pipelines.core.prompting import messages, prompt_version

SYSTEM = (
    "You are an expert in relational databases, SQL and natural-language questions over data. "
    "Answer with a single JSON object that follows the requested schema.\n\n"
    "Database schema (each table's DDL followed by sample rows):\n\n{schema}"
)


def schema_messages(schema_context: str, user: str) -> list[dict]:
    """The shared system message (schema context) and ``user``: every ABISS and interaction prompt."""
    return messages(SYSTEM.format(schema=schema_context), user)


def _category_block(sub: Subcategory) -> str:
    lines = [
        f"Category: {sub.category} / {sub.name} ({sub.group.value})",
        f"Definition: {sub.definition}",
        "Distinguishing characteristics:",
        *[f"- {c}" for c in sub.characteristics],
        "Examples:",
        *[f"- {json.dumps(e, ensure_ascii=False)}" for e in sub.examples],
    ]
    return "\n".join(lines)


# ----------------------------------------------------------------------- output schemas


class SqlGrounding(BaseModel):
    schema_links: list[str] = Field(
        default_factory=list, max_length=12, description="table.column items the question needs"
    )
    sub_questions: list[str] = Field(default_factory=list, max_length=4, description="optional decomposition")
    sql: str = Field(min_length=1, max_length=1200, description="one SQLite SELECT query")


# A council member's yes/no answer (stages 3, 4, 8 and stage 7's ground-truth check). No docstring
# (it would enter the JSON schema) and the schema keeps its title "Verdict": the schema is part of
# every call's cache key and of the prompt, so renaming the class must not change either.
class YesNoVerdict(BaseModel):
    model_config = ConfigDict(title="Verdict")

    verdict: Literal["yes", "no"]
    # bounded so constrained decoding cannot ramble past max_tokens (a cut-off JSON costs a repair call)
    reason: str = Field("", max_length=160)


class SqlAttempt(BaseModel):
    sql: str = Field(min_length=1, max_length=1200)


class SolveAttempt(BaseModel):
    answerable: bool
    sql: str = Field("", max_length=1200)


class CategoryChoice(BaseModel):
    choice: Literal["A", "B"]


@cache
def style_label_model(labels: tuple[str, ...]) -> type[BaseModel]:
    """A StyleLabel restricted to ``labels`` (stage 10 asks only about the run's styles)."""
    return create_model("StyleLabel", style=(Literal[labels], ...))


# ----------------------------------------------------------------------- generation


GENERATE_QUESTION = """Write one natural-language question for the database above.

{category}

Style: {style} — {style_description}
Target SQL difficulty: {difficulty} — {difficulty_description}
{group_instruction}
Return JSON matching this schema:
{schema}"""

GROUP_INSTRUCTIONS = {
    "answerable": "The question must be answerable with exactly one SQL query on this database{evidence}.",
    "ambiguous": (
        "The question must have exactly two valid, different SQL readings on this database. Give the two "
        "interpretations, each with the hidden knowledge that selects it (what the user would say if asked)."
    ),
    "unanswerable": (
        "The question must be impossible to answer with SQL on this database for the reason the category "
        "describes. Give feedback that explains exactly what is missing and what the user could do."
    ),
}


def question_generation_messages(schema_context: str, sub_id: str, style: str, difficulty: str) -> list[dict]:
    sub = subcategory(sub_id)
    instruction = GROUP_INSTRUCTIONS[sub.group.value].format(
        evidence=" once the evidence (a definition of a concept it uses) is given" if sub.has_evidence else ""
    )
    user = GENERATE_QUESTION.format(
        category=_category_block(sub),
        style=style,
        style_description=STYLE_BY_ID[style].description,
        difficulty=difficulty,
        difficulty_description=DIFFICULTY_BY_ID[difficulty].description,
        group_instruction=instruction,
        schema=json.dumps(sub.output_model.model_json_schema()),
    )
    return schema_messages(schema_context, user)


GROUND_SQL = """Write the SQLite query that answers the question. Think step by step:
1. schema linking: list the tables and columns the question needs;
2. if useful, decompose the question into sub-questions;
3. write one SELECT query.

Question: {question}
Evidence: {evidence}
Hidden knowledge (the intended interpretation): {hidden_knowledge}

Return JSON: {{"schema_links": [...], "sub_questions": [...], "sql": "..."}}"""


def sql_grounding_messages(
    schema_context: str, question: str, evidence: str | None, hidden_knowledge: str | None
) -> list[dict]:
    return schema_messages(
        schema_context,
        GROUND_SQL.format(question=question, evidence=evidence or "none", hidden_knowledge=hidden_knowledge or "none"),
    )


# ----------------------------------------------------------------------- validation

CONFORMANCE = """Does this question clearly conform to the category below, rather than fitting it only superficially?

{category}

Question: {question}
Evidence: {evidence}
Ground-truth SQL: {sql}
Hidden knowledge / feedback: {hidden}

Return JSON: {{"verdict": "yes" or "no", "reason": "..."}}"""

GROUND_TRUTH = """Does the SQL query, with the result it returns, correctly answer the question?

Question: {question}
Evidence: {evidence}
Intended interpretation (hidden knowledge): {hidden_knowledge}
SQL: {sql}
Result (first rows): {result}

Return JSON: {{"verdict": "yes" or "no", "reason": "..."}}"""

WRITE_SQL = """Write one SQLite SELECT query that answers the question.

Question: {question}
Evidence: {evidence}

Return JSON: {{"sql": "..."}}"""

SOLVE = """Try to answer the question with one SQLite SELECT query on this database. If it cannot be
answered with this database, set "answerable" to false.

Question: {question}
Evidence: {evidence}

Return JSON: {{"answerable": true or false, "sql": "..."}}"""

FEEDBACK = """The question below cannot be answered on this database ({category}). Is the feedback accurate,
specific and actionable: does it identify what is missing, why the question cannot be answered and
what the user could do?

Question: {question}
Feedback: {feedback}

Return JSON: {{"verdict": "yes" or "no", "reason": "..."}}"""

CONSISTENCY = """Which category better describes the problem of this question?

A: {a_name} — {a_definition}
B: {b_name} — {b_definition}

Question: {question}
Evidence: {evidence}
Hidden knowledge / feedback: {hidden}

Return JSON: {{"choice": "A" or "B"}}"""

STYLE = """Classify the linguistic style of the question. Styles:
{styles}

Question: {question}

Return JSON: {{"style": one of {names}}}"""


def conformance_messages(schema_context: str, row: dict) -> list[dict]:
    return schema_messages(
        schema_context,
        CONFORMANCE.format(
            category=_category_block(subcategory(row["subcategory"])),
            question=row["question"],
            evidence=row.get("evidence") or "none",
            sql=row.get("sql") or "none",
            hidden=row.get("hidden_knowledge") or row.get("feedback") or "none",
        ),
    )


def ground_truth_messages(schema_context: str, row: dict, result_preview: str) -> list[dict]:
    return schema_messages(
        schema_context,
        GROUND_TRUTH.format(
            question=row["question"],
            evidence=row.get("evidence") or "none",
            hidden_knowledge=row.get("hidden_knowledge") or "none",
            sql=row["sql"],
            result=result_preview,
        ),
    )


def write_sql_messages(schema_context: str, question: str, evidence: str | None) -> list[dict]:
    return schema_messages(schema_context, WRITE_SQL.format(question=question, evidence=evidence or "none"))


def solve_messages(schema_context: str, question: str, evidence: str | None) -> list[dict]:
    return schema_messages(schema_context, SOLVE.format(question=question, evidence=evidence or "none"))


def feedback_messages(schema_context: str, row: dict) -> list[dict]:
    sub = subcategory(row["subcategory"])
    return schema_messages(
        schema_context,
        FEEDBACK.format(
            category=f"{sub.category} / {sub.name}", question=row["question"], feedback=row.get("feedback") or ""
        ),
    )


def consistency_messages(schema_context: str, row: dict, a: Subcategory, b: Subcategory) -> list[dict]:
    return schema_messages(
        schema_context,
        CONSISTENCY.format(
            a_name=a.name,
            a_definition=a.definition,
            b_name=b.name,
            b_definition=b.definition,
            question=row["question"],
            evidence=row.get("evidence") or "none",
            hidden=row.get("hidden_knowledge") or row.get("feedback") or "none",
        ),
    )


def style_messages(schema_context: str, question: str, labels: list[str] | None = None) -> list[dict]:
    chosen = [s for s in STYLES if labels is None or s.id in labels]
    styles = "\n".join(f"- {s.id}: {s.description}" for s in chosen)
    return schema_messages(
        schema_context, STYLE.format(styles=styles, question=question, names=", ".join(s.id for s in chosen))
    )


def _opening(template: str) -> str:
    return template.split("\n", 1)[0][:32]


# How each prompt's task text begins: scripted test councils and benchmarks recognise the task by it.
PROMPT_OPENINGS = {
    "generate_question": _opening(GENERATE_QUESTION),
    "ground_sql": _opening(GROUND_SQL),
    "conformance": _opening(CONFORMANCE),
    "ground_truth": _opening(GROUND_TRUTH),
    "write_sql": _opening(WRITE_SQL),
    "solve": _opening(SOLVE),
    "feedback": _opening(FEEDBACK),
    "consistency": _opening(CONSISTENCY),
    "style": _opening(STYLE),
}


def _version(*templates: str) -> str:
    # The taxonomy (definitions, examples, output schemas, styles, difficulties) is part of every
    # prompt, so editing it marks the stages stale like editing a template does.
    from pipelines.abiss.taxonomy import taxonomy_dict

    return prompt_version(SYSTEM, json.dumps(taxonomy_dict(), sort_keys=True), *templates)


PROMPT_VERSIONS = {
    "nlq_objects": _version(GENERATE_QUESTION, *GROUP_INSTRUCTIONS.values()),
    "candidates": _version(GROUND_SQL),
    "s03": _version(CONFORMANCE),
    "s04": _version(GROUND_TRUTH),
    "s05": _version(WRITE_SQL),
    "s06": _version(WRITE_SQL),
    "s07": _version(SOLVE, GROUND_TRUTH),
    "s08": _version(FEEDBACK),
    "s09": _version(CONSISTENCY),
    "s10": _version(STYLE),
}
