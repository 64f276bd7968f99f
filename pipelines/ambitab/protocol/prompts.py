"""Prompts of the AmbiTab LLM roles, after the paper's Appendix G (asker, oracle, solver).

One builder per role; each returns chat messages (:func:`pipelines.core.prompting.messages`).
``PROMPT_VERSIONS`` holds each role's :func:`pipelines.core.prompting.prompt_version` of its templates, so
a prompt edit marks the episode assets stale (code_version), as in the ABISS assets.
"""

import json

from pipelines.ambitab.record import Spec
from pipelines.core.prompting import messages, prompt_version

ASKER_PROMPTS = ("direct", "checklist_chat", "checklist_ledger")
DEFAULT_ASKER_PROMPT = "checklist_ledger"  # [P] the paper's default

_OPENING = (
    'You are a good data scientist with great {engine} writing ability. You have a DB called "{db}". '
    "You are given a Text-to-SQL task whose user query is under-specified."
)

_INPUT_INFO = """## Input Information:
You will be provided with:
- Task Description: The type of task you are trying to accomplish.
- DB Schema Information: The detailed DB schema with data examples.
- DB Column Meanings: The detailed DB column meanings explanation.
- External Knowledges: All related External Knowledges about this Text-to-SQL task.
- Text-to-SQL Question: The Text-to-SQL question of this Text-to-SQL task."""

_CHECKLIST_METHOD = """You are clarifying an under-specified user query before it is handed off to a SEPARATE SQL generator. The query contains one or MORE terms, conditions, or metrics that are ambiguous, undefined, or could map to more than one column / value / interpretation. Your job is to surface and resolve ALL of them, not just the first one. You have {max_turn} turns; each turn you may ask only ONE question.
Method (apply every turn, before you answer):
1. **Build the checklist.** Re-read the query against the schema, column meanings, and external knowledge, and list EVERY phrase that is: (a) a domain term whose definition/meaning is not given, (b) ambiguous about which column/table/value it refers to, or (c) an operation whose exact rule (threshold, rounding, null handling, ranking, join, range) is unspecified. Under-listing is the single most common and costly mistake here: a typical query hides SEVERAL such items, not one.
2. **Cross off what is resolved.** Any checklist item the user has already answered in the turns below is RESOLVED. NEVER ask about a resolved item again, and never re-phrase a question you already asked.
3. **Ask one OPEN item.** Ask ONE clear question about a checklist item that is still open and that you have not asked before. Set type to "clarification". Example: {{"type": "clarification", "output": "[YOUR-ONLY-ONE-QUESTION]"}}
4. **Signal done only when the checklist is clear.** Set type to "done" ONLY when every checklist item is resolved, {stop_rule}or you have no turns left. Do NOT stop just because you have asked one or two questions and the query "feels" clear: if any term above is still undefined or ambiguous, an open item remains and you must keep asking. Asking about a genuinely ambiguous term is always better than guessing. Example: {{"type": "done", "output": null}}
NOTE: You are NOT generating SQL; a separate SQL generation model will handle that using the resolved conversation. Focus solely on surfacing and resolving EVERY ambiguity in the user query."""

_DIRECT_METHOD = """You are clarifying an under-specified user query before it is handed off to a SEPARATE SQL generator. You have {max_turn} turns; each turn you may ask only ONE question.
- If the query is still ambiguous, ask ONE clear clarification question about it. Set type to "clarification". Example: {{"type": "clarification", "output": "[YOUR-ONLY-ONE-QUESTION]"}}
- Once the request is clear, or no different ambiguity remains to ask about, set type to "done". Example: {{"type": "done", "output": null}}
NOTE: You are NOT generating SQL; a separate SQL generation model will handle that using the conversation."""

_OUTPUT_FORMAT = """## Output Format (STRICTLY REQUIRED):
You MUST output ONLY ONE of the following two JSON structures:
1. If asking for clarification: {"type": "clarification", "output": "[YOUR-ONLY-ONE-QUESTION]"}
2. If done asking questions: {"type": "done", "output": null}
Do NOT deviate from these formats. Do NOT generate SQL here."""


def _json_block(value) -> str:
    return (
        "```json\n"
        + json.dumps(value if value is not None else {}, ensure_ascii=False, indent=1, default=str)
        + "\n```"
    )


def spec_blocks(spec: Spec, knowledge_title: str = "External Knowledge") -> str:
    return "\n".join(
        [
            "<|The Start of DB Schema Information|>",
            spec.db_schema,
            "<|The End of DB Schema Information|>",
            "<|The Start of DB Column Meanings|>",
            _json_block(spec.column_meanings),
            "<|The End of DB Column Meanings|>",
            f"<|The Start of {knowledge_title}|>",
            _json_block(spec.external_knowledge),
            f"<|The End of {knowledge_title}|>",
            "<|The Start of Text-to-SQL Question|>",
            spec.user_query,
            "<|The End of Text-to-SQL Question|>",
        ]
    )


def _qa_lines(pairs) -> str:
    return "\n".join(f"- You asked: {q} User answered: {a}" for q, a in pairs) or "- (none)"


def asker_messages(
    prompt: str, spec: Spec, history: list[tuple[str, str, bool]], turn: int, max_turn: int
) -> list[dict]:
    """``history``: (question, answer, was_refused) per earlier turn. ``turn`` is 1-based; on the
    last turn (turn == max_turn) the prompt tells the asker to stop."""
    if prompt not in ASKER_PROMPTS:
        raise ValueError(f"unknown asker prompt {prompt!r}; choose one of {', '.join(ASKER_PROMPTS)}")
    left = max_turn - turn + 1
    if prompt == "direct":
        method = _DIRECT_METHOD.format(max_turn=max_turn)
    else:
        stop_rule = "or no distinct unasked item remains, " if prompt == "checklist_chat" else ""
        method = _CHECKLIST_METHOD.format(max_turn=max_turn, stop_rule=stop_rule)
    head = "\n".join(
        [
            _OPENING.format(engine=spec.sql_engine_name, db=spec.db_name),
            _INPUT_INFO,
            "Inputs:",
            "<|The Start of Task Description|>",
            method,
            "<|The End of Task Description|>",
            spec_blocks(spec),
        ]
    )
    if turn >= max_turn:
        instruction = (
            f"### Turn {turn} (this is your LAST turn): you have no turns left, so you must signal done: "
            '{"type": "done", "output": null}'
        )
    elif prompt == "checklist_ledger":
        instruction = (
            f"### Turn {turn} ({left} turns left): Ask about a checklist item that is still OPEN (not in either "
            "list above). Only signal done if every ambiguous or undefined term in the query has now been "
            "resolved or could not be answered."
        )
    else:
        instruction = f"### Turn {turn} ({left} turns left): ask ONE question or signal done."
    if prompt == "checklist_ledger":
        resolved = [(q, a) for q, a, refused in history if not refused]
        open_ = [(q, a) for q, a, refused in history if refused]
        ledger = "\n".join(
            [
                "### Already asked and RESOLVED (do NOT ask about any of these again):",
                _qa_lines(resolved),
                "### Already asked but NOT answered (the user could not answer these; do NOT ask about any of them again):",
                _qa_lines(open_),
            ]
        )
        return messages(None, "\n".join([head, ledger, instruction, _OUTPUT_FORMAT]))
    # Direct and Checklist (chat): earlier turns arrive as chat messages.
    chat = messages(None, head + "\n" + _OUTPUT_FORMAT)
    for q, a, _refused in history:
        chat.append({"role": "assistant", "content": json.dumps({"type": "clarification", "output": q})})
        chat.append({"role": "user", "content": a})
    if history:
        chat[-1] = {"role": "user", "content": chat[-1]["content"] + "\n\n" + instruction}
    else:
        chat[0] = {"role": "user", "content": chat[0]["content"] + "\n" + instruction}
    return chat


# ------------------------------------------------------------------------------- solver

_SOLVER = """You are a good data scientist with great {engine} writing ability. You have a DB called "{db}".
## Task Description:
Based on the clarification summary and the information below, generate the final {engine} statement that answers the user's intent. Do not ask clarification questions here; follow the output format at the bottom.{single}
## DB Schema Information:
<|The Start of DB Schema Information|>
{schema}
<|The End of DB Schema Information|>
## DB Column Meanings:
<|The Start of DB Column Meanings|>
{meanings}
<|The End of DB Column Meanings|>
## External Knowledges:
<|The Start of External Knowledges|>
{knowledge}
<|The End of External Knowledges|>
## Text-to-SQL Question:
<|The Start of Text-to-SQL Question|>
{query}
<|The End of Text-to-SQL Question|>
<|The Start of Clarification Summary|>
{summary}
<|The End of Clarification Summary|>
## Output Format (STRICTLY REQUIRED):
{{"reasoning": "[YOUR-REASONING]", "type": "final_sql", "output": "[YOUR-SQL]"}}
Fill in the `reasoning` field FIRST: think step by step about schema linking, ambiguity resolution, and your join/filter plan before writing the final SQL in `output`. Do NOT deviate from this format. Do NOT ask clarification questions here."""


def clarification_summary(user_query: str, history) -> str:
    """The original request followed by each question and answer ([P] C.4)."""
    lines = [f"Original request: {user_query}"]
    for i, (q, a, *_rest) in enumerate(history, 1):
        lines.append(f"Q{i}: {q}")
        lines.append(f"A{i}: {a}")
    return "\n".join(lines)


def solver_messages(spec: Spec, history) -> list[dict]:
    single = (
        " The answer must be a single SQLite statement (exactly one SELECT; no semicolon-separated statements)."
        if spec.sql_engine_name.lower() == "sqlite"
        else ""
    )
    content = _SOLVER.format(
        engine=spec.sql_engine_name,
        db=spec.db_name,
        single=single,
        schema=spec.db_schema,
        meanings=_json_block(spec.column_meanings),
        knowledge=_json_block(spec.external_knowledge),
        query=spec.user_query,
        summary=clarification_summary(spec.user_query, history),
    )
    return messages(None, content)


# ------------------------------------------------------------------------------- oracle

_USER_OPENING = (
    "You are role-playing as a human USER interacting with an AI collaborator to complete a Text-to-SQL task. "
    "The AI collaborator may ask one question about this task. Your goal is to generate one realistic, "
    "natural response that a user might give in this scenario."
)

_ACTIONS = """1. **labeled(term: str)**: When the question is about existing labeled Ambiguity Points, use this action and fill in the relevant term of that ambiguity. Format: **labeled("Amb")**.
2. **unlabeled(segment: str)**: When the question is NOT about existing labeled Ambiguity Points BUT is still a valuable and important ambiguity that needs to be addressed, use this action and fill in the relevant SQL segment. Format: **unlabeled("[RELEVANT_SQL_CLAUSE]")**.
3. **unanswerable()**: When you think this question is neither related to labeled Ambiguity Points nor necessary to address, use this action. Format: **unanswerable()**."""


def _block(title: str, body: str, hidden: bool = True) -> str:
    tag = " (Not visible to the AI)" if hidden else ""
    return f"<|The Start of {title}{tag}|>\n{body}\n<|The End of {title}|>"


def _ambiguity_json(labeled: dict) -> str:
    return _json_block(labeled)


_EVIDENCE_TITLE = "Withheld Evidence"
_EVIDENCE_INFO = (
    "- Withheld Evidence: The external knowledge (evidence) of this Text-to-SQL task that was removed "
    "from what the AI collaborator sees."
)


def _evidence_block(evidence: list[str]) -> str:
    return _block(_EVIDENCE_TITLE, "\n".join(evidence) or "(none)")


def matcher_messages(
    question: str, labeled: dict, sql_segments: list[str] | None, withheld_evidence: list[str] | None = None
) -> list[dict]:
    """Stage 1: the action for the current question only (no earlier turns). ``None`` fields are
    omitted; the unfiltered oracle also gets the withheld evidence ([P] Table 6)."""
    parts = [
        _USER_OPENING,
        "## Input Information:",
        "You will be provided with:",
        "- Task Description: The type of task you are trying to accomplish.",
        "- Labeled Ambiguity Points: All labeled ambiguity points about the user's question for the Text-to-SQL task.",
    ]
    if sql_segments is not None:
        parts.append("- Ground-truth SQL Segments: All ground-truth SQL segments.")
    if withheld_evidence is not None:
        parts.append(_EVIDENCE_INFO)
    parts += [
        "- Question from AI Collaborator: The question from AI collaborator to ask for clarification on the ambiguity in the Text-to-SQL task.",
        "Inputs:",
        _block(
            "Task Description",
            "The question from AI collaborator maybe related to existing Labeled Ambiguity Points or "
            "related to unlabeled ambiguity or even irrelevant. So, you should choose one action at this turn.\n"
            "Action Choices:\n" + _ACTIONS,
        ),
        _block("All Labeled Ambiguity Points", _ambiguity_json(labeled)),
    ]
    if sql_segments is not None:
        parts.append(_block("Ground-truth SQL Segments", "\n".join(sql_segments)))
    if withheld_evidence is not None:
        parts.append(_evidence_block(withheld_evidence))
    parts += [
        _block("Question from AI Collaborator", question, hidden=False),
        "## Guidelines:\n- You MUST choose only **one action** listed above.\n- You should NOT tell any thoughts about "
        "solution nor any ground-truth SQL information.\n- If you can do it well, you will get 10 thousand USD bonus!",
        "## Output Format:\nYou should replace [STEP-BY-STEP THOUGHT] in the json below with your step-by-step thought. "
        "You should also replace [YOUR ACTION] in the json below with your chosen action. You MUST output ONLY the "
        'following JSON structure:\n{"action": "[YOUR ACTION]", "cot": "[STEP-BY-STEP THOUGHT]"}\n'
        "Do NOT deviate from these formats. Do NOT use any other output format.",
    ]
    return messages(None, "\n".join(parts))


def responder_messages(
    question: str,
    action: str,
    labeled: dict,
    query_text: str,
    *,
    schema: str | None,
    gt_sql: str | None,
    sql_segments: list[str] | None,
    withheld_evidence: list[str] | None = None,
) -> list[dict]:
    """Stage 2: the response for the chosen action. ``query_text`` is the clear query (unfiltered)
    or the matched frozen intent (scoped); ``None`` fields are omitted from the prompt."""
    parts = [
        _USER_OPENING,
        "Inputs:",
        _block(
            "Task Description",
            "The question from AI collaborator maybe related to existing Labeled Ambiguity "
            "Points or related to unlabeled ambiguity or even irrelevant. So, one action was chosen at previous "
            "turn.\nAction Space:\n" + _ACTIONS + "\nYour Task: You should generate response to answer the AI "
            "Collaborator's question based on the action used and original clear text-to-SQL question below. "
            "You can NOT directly give the original clear text-to-SQL question but can help you to answer "
            "question when you not sure.",
        ),
    ]
    if schema is not None:
        parts.append(_block("DB Schema Information", schema, hidden=False))
    parts.append(_block("All Labeled Ambiguity Points", _ambiguity_json(labeled)))
    parts.append(_block("Original Text-to-SQL Question", query_text or "", hidden=False))
    if gt_sql is not None:
        parts.append(_block("Ground-truth SQL", "```sql\n" + gt_sql + "\n```"))
    if sql_segments is not None:
        parts.append(_block("Ground-truth SQL Segments", "\n".join(sql_segments)))
    if withheld_evidence is not None:
        parts.append(_evidence_block(withheld_evidence))
    parts += [
        _block("Question from AI Collaborator", question, hidden=False),
        _block("Action Chosen", action),
        "## Guidelines:\n**Remember**: If you can do the following points well, you will get 10 thousand USD bonus!\n"
        "1. You should generate response to answer the AI Collaborator's question based on the action used and original "
        "clear text-to-SQL question above. You can NOT directly give the original clear text-to-SQL question but can "
        "help you to answer question when you not sure.\n2. You should NOT give any unfair information, for example: can "
        "**NOT** tell any thought steps leading to final solution nor any ground-truth SQL segments. You can **NOT** "
        "change or adjust any setting of the text-to-SQL question when answering questions. The response should be "
        "concise.\n3. You should NOT ask any question.",
        "## Output Format (STRICTLY REQUIRED):\nYou MUST output ONLY ONE of the following JSON structures. [action] must "
        'be taken from the action space above.\n{"type": "[action]", "output": "[Fill-in-Your-Response]"}\nFor example, '
        'if the action is "unanswerable()", you should respond: {"type": "unanswerable()", "output": "Sorry, this '
        'question is out of scope, so I can not answer your question."}\nDo NOT deviate from these formats. Do NOT use '
        "any other output format.",
    ]
    return messages(None, "\n".join(parts))


PROMPT_VERSIONS = {
    "asker": prompt_version(_OPENING, _INPUT_INFO, _CHECKLIST_METHOD, _DIRECT_METHOD, _OUTPUT_FORMAT),
    "solver": prompt_version(_SOLVER),
    "oracle": prompt_version(_USER_OPENING, _ACTIONS, _EVIDENCE_INFO, "table6-fields-v1"),
}
EPISODES_CODE_VERSION = prompt_version(*PROMPT_VERSIONS.values())
