"""Prompts of the multilayered evaluation: autorater (spec §5.2), LLM-SQL-Solver baselines (§6),
the few-shot LLM splitter (§3) and the candidate generator (§12).

The paper's own templates are on figshare and unreachable here; these are reconstructions from the
paper's description (marked [interp] in the spec). Long shared parts (role, rubric, examples,
schema) come first so servers with prefix caching reuse them. :data:`PROMPT_VERSION`
(:func:`pipelines.core.prompting.source_version` of this module: the templates are written inline)
enters the assets' code versions, so editing a prompt marks the verdicts stale.
"""

import json

from pipelines.core.prompting import messages, source_version

PROMPT_VERSION = source_version(__file__)

# Opening lines, so scripted test providers can tell the tasks apart.
PROMPT_OPENINGS = {
    "judge": "You are an expert judge of AI-augmented SQL.",
    "mm": "You are an expert in SQL semantic equivalence (Miniature & Mull).",
    "ec": "You are an expert in SQL semantic equivalence (Explain & Compare).",
    "splitter": "You split AI-augmented SQL into a structural part and AI parts.",
    "generator": "You translate questions into AI-augmented SQL.",
}

OPERATOR_SEMANTICS = {
    "bigquery": (
        "BigQuery AI operators: AI.IF(prompt) is a boolean LLM filter; AI.SCORE(prompt) returns a number; "
        "AI.GENERATE(prompt).result returns text; AI.CLASSIFY(input, categories) returns one category. "
        "Here they appear as AI_IF/AI_SCORE/AI_GENERATE/AI_CLASSIFY with the prompt tuple concatenated."
    ),
    "thalamusdb": (
        "ThalamusDB AI operators: NLfilter(column, 'condition') is a boolean LLM filter over one column; "
        "NLjoin(c1, c2, 'condition') is a boolean LLM predicate over a pair of rows."
    ),
}

JUDGE_EXAMPLES = [
    (
        "paraphrased prompt (cars)",
        "gold: SELECT car_id FROM cars WHERE make = 'TOYOTA' AND AI_IF('Is the color of this car red?' || image)\n"
        "candidate: SELECT car_id FROM cars WHERE make = 'TOYOTA' AND AI_IF('Car in image is red.' || image)\n"
        "structural parts identical; AI parts return 41 vs 43 rows, 40 shared",
        {
            "scores": {"overall_similarity": 5, "relational_similarity": 5, "ai_similarity": 4},
            "analysis": {"primary_error_source": "none", "justification": "Same filter; the prompt is a paraphrase."},
        },
    ),
    (
        "missing DISTINCT (animals)",
        "gold: SELECT DISTINCT City FROM image_data WHERE AI_IF('Does this image contain a zebra?' || image)\n"
        "candidate: SELECT City FROM image_data WHERE AI_IF('Is there a zebra in the image?' || image)",
        {
            "scores": {"overall_similarity": 2, "relational_similarity": 2, "ai_similarity": 5},
            "analysis": {"primary_error_source": "relational", "justification": "DISTINCT dropped: duplicate cities."},
        },
    ),
    (
        "UNION ALL instead of UNION (cars)",
        "gold: SELECT car_id FROM a UNION SELECT car_id FROM b\ncandidate: SELECT car_id FROM a UNION ALL SELECT car_id FROM b",
        {
            "scores": {"overall_similarity": 2, "relational_similarity": 1, "ai_similarity": 5},
            "analysis": {
                "primary_error_source": "relational",
                "justification": "UNION kind differs; duplicates change.",
            },
        },
    ),
    (
        "negated AI intent (ecomm)",
        "gold: ... WHERE AI_IF('Is this product for children?' || description)\n"
        "candidate: ... WHERE AI_IF('Is this product not for children?' || description)",
        {
            "scores": {"overall_similarity": 1, "relational_similarity": 5, "ai_similarity": 1},
            "analysis": {"primary_error_source": "ai_prompt", "justification": "The prompt asks the opposite."},
        },
    ),
]


def _j(obj) -> str:
    return json.dumps(obj, default=str, ensure_ascii=False)


def judge_messages(*, dialect: str, schema: str, question: str, evidence: dict, compact: bool = False) -> list[dict]:
    """One autorater call: schema + sample rows, NL question, all queries, split parts, results, diffs.

    ``compact`` (for small local models with short contexts): no few-shot examples, no schema, three
    result rows, the diffs' verdict fields only: a quarter of the tokens."""
    if compact:
        return _compact_judge_messages(dialect, question, evidence)
    system = "\n".join(
        [
            PROMPT_OPENINGS["judge"],
            OPERATOR_SEMANTICS[dialect],
            "Decide whether the CANDIDATE query answers the question as well as the GOLD query, under relaxed "
            "semantic correctness: AI operators are LLM calls, so small row differences from prompt wording are fine.",
            "Validators:",
            "- Relational (STRICT): compare the structural parts S_g and S_c (AI calls replaced by placeholders such as "
            "TRUE, identical on both sides): tables, joins, filters, DISTINCT, UNION ALL/DISTINCT, GROUP BY, aggregates, "
            "ORDER BY, LIMIT, projection must match logically; think about other data too (duplicates), not only these "
            "results. Placeholders distort NOT and CASE contexts.",
            "- AI (RELAXED): same meaning and intent of each prompt, an adequate operator and input column. Paraphrases, "
            "an equivalent operator and small A_g/A_c row differences are fine; a changed or negated concept, a wrong "
            "column or a missing AI condition is not.",
            "- Overall (RELAXED RESULT): the full queries. Small differences from LLM variance on borderline rows are "
            "fine; differences from relational logic are not.",
            "Rubric for each score: 5 perfectly aligned; 4 functionally equivalent; 3 ambiguous or partially correct; "
            "2 mostly wrong; 1 unrelated, invalid or not executable.",
            "primary_error_source is one of: none, relational, ai_prompt, ai_operator_or_column, both, execution_error, other.",
            "Examples:",
            *[f"[{name}]\n{body}\n=> {_j(out)}" for name, body, out in JUDGE_EXAMPLES],
        ]
    )
    user = "\n".join(
        [
            f"DB schema with sample rows:\n{schema}",
            f"Question: {question}",
            f"GOLD query: {evidence['gold_sql']}",
            f"CANDIDATE query: {evidence['candidate_sql']}",
            f"S_g (gold structural part): {evidence['gold_split']['structural_sql']}",
            f"S_c (candidate structural part): {evidence['cand_split']['structural_sql']}",
            f"A_g (gold AI parts): {_j(evidence['gold_split']['ai_parts'])}",
            f"A_c (candidate AI parts): {_j(evidence['cand_split']['ai_parts'])}",
            f"Results Q_g: {_j(_brief(evidence['gold']))}",
            f"Results Q_c: {_j(_brief(evidence['candidate']))}",
            f"Results S_g: {_j(_brief(evidence['gold_structural']))}",
            f"Results S_c: {_j(_brief(evidence['candidate_structural']))}",
            f"Results A_g: {_j([_brief(r) for r in evidence['gold_ai']])}",
            f"Results A_c: {_j([_brief(r) for r in evidence['candidate_ai']])}",
            f"Deterministic diffs: full={_j(evidence['full_diff'])} relational={_j(evidence['relational_diff'])}",
            f"Structural verdict (sound; AI calls treated as unknowns, placeholder artefacts excluded): "
            f"{_j(evidence.get('structural'))}",
            f"AI-call alignment and agreement on a shared probe set: {_j(evidence['alignment'])}",
            'Answer JSON only: {"scores":{"overall_similarity":1-5,"relational_similarity":1-5,"ai_similarity":1-5},'
            '"analysis":{"primary_error_source":"...","justification":"..."}}',
        ]
    )
    return messages(system, user)


def _compact_judge_messages(dialect: str, question: str, ev: dict) -> list[dict]:
    system = " ".join(
        [
            PROMPT_OPENINGS["judge"],
            OPERATOR_SEMANTICS[dialect],
            "Compare CANDIDATE with GOLD: relational parts strictly, AI prompts by meaning (paraphrases are fine; a "
            "negated or changed concept, a wrong column or a missing AI call is not), full results loosely.",
            "Scores 1-5 (5 aligned, 4 equivalent, 3 partial, 2 mostly wrong, 1 unrelated). Answer JSON only.",
        ]
    )
    keep = ("set_equal", "multiset_equal", "gold_rows", "candidate_rows")
    diff = lambda d: {k: d.get(k) for k in keep} if d.get("comparable") else d  # noqa: E731
    agree = [
        {k: a.get(k) for k in ("status", "gold_prompt", "candidate_prompt", "gold_inputs", "candidate_inputs")}
        | {"agreement": (a.get("probe") or {}).get("agreement")}
        for a in ev["alignment"]
    ]
    user = "\n".join(
        [
            f"Question: {question}",
            f"GOLD: {ev['gold_sql']}",
            f"CANDIDATE: {ev['candidate_sql']}",
            f"S_g: {ev['gold_split']['structural_sql']}",
            f"S_c: {ev['cand_split']['structural_sql']}",
            f"Q_g rows: {_j((_brief(ev['gold'], 3) or {}).get('rows'))}",
            f"Q_c rows: {_j((_brief(ev['candidate'], 3) or {}).get('rows'))}",
            f"full diff: {_j(diff(ev['full_diff']))}; relational diff: {_j(diff(ev['relational_diff']))}",
            f"structural verdict: {_j({k: (ev.get('structural') or {}).get(k) for k in ('verdict', 'reason')})}",
            f"AI calls: {_j(agree)}",
            '{"scores":{"overall_similarity":..,"relational_similarity":..,"ai_similarity":..},'
            '"analysis":{"primary_error_source":"none|relational|ai_prompt|ai_operator_or_column|both|execution_error|other",'
            '"justification":"one sentence"}}',
        ]
    )
    return messages(system, user)


def _brief(run: dict | None, rows: int = 10) -> dict | None:
    if run is None:
        return None
    return {
        "status": run["status"],
        "error": run["error"][:200],
        "columns": run["columns"],
        "rows": run["rows"][:rows],
        "row_count": run["row_count"],
    }


SOLVER_EXAMPLES = {
    "equivalent": (
        "Q1: SELECT id FROM t WHERE AI_IF('Is this review positive? ' || txt)\n"
        "Q2: SELECT id FROM t WHERE AI_IF('Determine if the review is positive: ' || txt)",
        "EQUIVALENT",
    ),
    "not_equivalent": (
        "Q1: SELECT DISTINCT city FROM t WHERE AI_IF('zebra? ' || img)\n"
        "Q2: SELECT city FROM t WHERE AI_IF('zebra? ' || img)",
        "NOT EQUIVALENT",
    ),
}


def solver_messages(
    method: str,
    *,
    dialect: str,
    schema: str,
    gold_sql: str,
    cand_sql: str,
    results: tuple[dict | None, dict | None] | None = None,
) -> list[dict]:
    """LLM-SQL-Solver prompts (Zhao et al.): schema + the two queries only; optionally their results."""
    if method == "mm":
        task = (
            "Imagine a small database for this schema, mentally run both queries on it, then try to modify the "
            "database so that their outputs differ. AI operators are LLM calls: treat prompts with the same "
            "meaning as the same function. If no such database exists the queries are EQUIVALENT."
        )
    else:
        task = (
            "Explain what Q1 does, then explain what Q2 does, then decide whether the differences in their logic "
            "are significant. AI operators are LLM calls: prompts with the same meaning count as the same."
        )
    examples = "\n".join(f"Example:\n{q}\nAnswer: {a}" for q, a in SOLVER_EXAMPLES.values())
    system = "\n".join(
        [
            PROMPT_OPENINGS[method],
            OPERATOR_SEMANTICS[dialect],
            task,
            'End with exactly one of: "EQUIVALENT" or "NOT EQUIVALENT".',
            examples,
        ]
    )
    parts = [f"Schema:\n{schema}", f"Q1: {gold_sql}", f"Q2: {cand_sql}"]
    if results is not None:
        parts += [
            f"Results of Q1 on the real database: {_j(_brief(results[0]))}",
            f"Results of Q2 on the real database: {_j(_brief(results[1]))}",
        ]
    parts.append('Reply as JSON {"reasoning": "...", "answer": "EQUIVALENT" or "NOT EQUIVALENT"}.')
    return messages(system, "\n".join(parts))


def splitter_messages(sql: str, dialect: str, examples: list[dict]) -> list[dict]:
    system = "\n".join(
        [
            PROMPT_OPENINGS["splitter"],
            OPERATOR_SEMANTICS[dialect],
            "Structural part: the query with every AI call replaced by TRUE (boolean), CAST(NULL AS DOUBLE) (score) or "
            "'<AI>' (text); keep every relational element. AI part: one query per AI call, selecting the call's input "
            "columns from only the table(s) they come from, with the call as WHERE and the query's LIMIT.",
            *[f"Example:\n{_j(e)}" for e in examples],
        ]
    )
    return messages(system, f'SQL: {sql}\nReply as JSON {{"structural_sql": "...", "ai_parts": ["..."]}}.')


def generator_messages(*, dialect: str, schema: str, question: str, examples: list[tuple[str, str]]) -> list[dict]:
    syntax = {
        "bigquery": "Write BigQuery SQL. Use AI.IF((prompt, column), connection_id => '<<connection>>') for semantic "
        "filters and AI.SCORE / AI.GENERATE(...).result / AI.CLASSIFY where a value is needed.",
        "thalamusdb": "Write ThalamusDB SQL. Use NLfilter(column, 'condition') for semantic filters and "
        "NLjoin(c1, c2, 'condition') for semantic pair predicates.",
    }[dialect]
    system = "\n".join(
        [PROMPT_OPENINGS["generator"], syntax, *[f"Example question: {q}\nExample SQL: {s}" for q, s in examples]]
    )
    user = f'Schema with sample rows:\n{schema}\nQuestion: {question}\nReply as JSON {{"sql": "..."}}.'
    return messages(system, user)
