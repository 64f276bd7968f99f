"""Frames of the interaction artifacts and the reference results-layout export (plain polars).

* ``turns_frame``: one row per system turn (system response, the user's answer, relevancy, every
  label vote / answer candidate / judge vote with its ``llm_call_id``), plus the conversation's
  outcome repeated on each of its rows (so scores need nothing else);
* ``scores_frame``: one row per conversation;
* ``metrics_frame``: the long metrics table of :func:`pipelines.interaction.metrics.metric_rows`;
* ``results_json``: the reference code's ``Results`` layout, one document per agent.
"""

from __future__ import annotations

import polars as pl

from pipelines.abiss.outputs import reference_category, to_abiss_records
from pipelines.interaction.ends import INCOMPLETE_ENDS
from pipelines.interaction.modes import REFERENCE_CATEGORY_USE

# every vote keeps its call's status (ok / parse_failed / call_failed) and error, for the audit trail
_CALL = {"parsed_ok": pl.Boolean, "llm_call_id": pl.String, "status": pl.String, "error": pl.String}
LABEL_VOTE = pl.Struct({"member": pl.String, "label": pl.String, "node_ids": pl.List(pl.Int64), **_CALL})
CANDIDATE = pl.Struct({"member": pl.String, "answer": pl.String, **_CALL})
JUDGE_VOTE = pl.Struct(
    {"judge": pl.String, "candidate_a": pl.String, "candidate_b": pl.String, "winner": pl.String, **_CALL}
)
FB_VOTE = pl.Struct({"member": pl.String, "vote": pl.String, **_CALL})

TURN_SCHEMA = {
    "conversation_id": pl.String,
    "question_id": pl.String,
    "db_id": pl.String,
    "agent": pl.String,
    "agent_spec": pl.String,
    "mode": pl.String,
    "step": pl.Int64,
    "system_question": pl.String,
    "system_sql": pl.String,
    "system_feedback": pl.String,
    "system_status": pl.String,
    "system_raw": pl.String,
    "system_call_id": pl.String,
    "terminal": pl.Boolean,
    "relevance": pl.String,
    "user_response": pl.String,
    "short_circuit": pl.Boolean,
    "label_votes": pl.List(LABEL_VOTE),
    "candidates": pl.List(CANDIDATE),
    "tournament": pl.List(JUDGE_VOTE),
    "fragments": pl.List(pl.String),
    "winner_member": pl.String,
    "margin": pl.Int64,
    "user_status": pl.String,
    "user_error": pl.String,
    "invalid_node_ids": pl.List(pl.Int64),
    "withheld_node_ids": pl.List(pl.Int64),
    "end": pl.String,
    "n_turns": pl.Int64,
    "predicted_sql": pl.String,
    "predicted_feedback": pl.String,
    "category_given": pl.String,
    "predicted_subcategory": pl.String,
    "classification_status": pl.String,
    "classification_call_id": pl.String,
    "max_steps": pl.Int64,
}
CONVERSATION_FIELDS = (
    "agent_spec",
    "end",
    "n_turns",
    "predicted_sql",
    "predicted_feedback",
    "category_given",
    "predicted_subcategory",
    "classification_status",
    "classification_call_id",
)

GOLD_KEY = ("gold_sha256", "db_fingerprint", "digest_version")
GOLD_SCHEMA = {
    "gold_sha256": pl.String,
    "db_fingerprint": pl.String,
    "digest_version": pl.String,
    "n_columns": pl.Int64,
    "row_total": pl.Int64,
    "bag_digest": pl.String,
    "ordered_digest": pl.String,
    "beyond_cap": pl.Boolean,
    "elapsed_s": pl.Float64,  # the gold's own time: a prediction gets at least twice it (#38 item 4)
}


def gold_frame(rows: list[dict]) -> pl.DataFrame:
    """The ``interaction_gold`` table: one row per gold query and database version (no result rows)."""
    return pl.DataFrame(rows, schema=GOLD_SCHEMA)


SCORE_SCHEMA = {
    "conversation_id": pl.String,
    "question_id": pl.String,
    "db_id": pl.String,
    "agent": pl.String,
    "mode": pl.String,
    "subcategory": pl.String,
    "group": pl.String,
    "style": pl.String,
    "difficulty": pl.String,
    "end": pl.String,
    "n_turns": pl.Int64,
    "predicted_subcategory": pl.String,
    "predicted_sql": pl.String,
    "predicted_feedback": pl.String,
    "recognition": pl.Boolean,
    "classification": pl.Boolean,
    "solved": pl.Boolean,
    "ex_status": pl.String,
    "ex_reason": pl.String,
    "explained": pl.Boolean,
    "fb_status": pl.String,
    "fb_reason": pl.String,
    "fb_votes": pl.List(FB_VOTE),
    "fb_judges": pl.List(pl.String),
    "fb_unusable_judges": pl.List(pl.String),
    "n_clarifications": pl.Int64,
    "n_relevant": pl.Int64,
    "n_technical": pl.Int64,
    "n_irrelevant": pl.Int64,
    "air_cases": pl.Int64,
    "air_terminal": pl.Int64,
}
METRIC_SCHEMA = {
    "db_id": pl.String,
    "table": pl.String,
    "agent": pl.String,
    "mode": pl.String,
    "subcategory": pl.String,
    "metric": pl.String,
    "value": pl.Float64,
    "numerator": pl.Int64,
    "denominator": pl.Int64,
    # leakage rows: which answers (all / member=... / label=...) and the bootstrap interval
    "slice": pl.String,
    "low": pl.Float64,
    "high": pl.Float64,
    # EX / FB items left out of the rate because they could not be decided (#38 item 2)
    "undecided": pl.Int64,
}


def turns_frame(conversations: list[dict], max_steps: int) -> pl.DataFrame:
    rows = []
    for c in conversations:
        for t in c["turns"]:
            rows.append({**t, **{k: c[k] for k in CONVERSATION_FIELDS}, "max_steps": max_steps})
    return pl.DataFrame(rows, schema=TURN_SCHEMA)


def conversations_from_turns(turns: pl.DataFrame) -> list[dict]:
    """Regroup turn rows into conversation dicts (the shape :mod:`dialogue` returns)."""
    out: dict[str, dict] = {}
    for t in turns.sort("conversation_id", "step").iter_rows(named=True):
        c = out.get(t["conversation_id"])
        if c is None:
            c = out[t["conversation_id"]] = {
                k: t[k] for k in ("conversation_id", "question_id", "db_id", "agent", "mode", *CONVERSATION_FIELDS)
            }
            c["turns"] = []
        c["turns"].append(t)
    return list(out.values())


def scores_frame(scores: list[dict]) -> pl.DataFrame:
    return pl.DataFrame([{k: s.get(k) for k in SCORE_SCHEMA} for s in scores], schema=SCORE_SCHEMA)


def metrics_frame(rows: list[dict], db_id: str | None) -> pl.DataFrame:
    return pl.DataFrame([{**dict.fromkeys(METRIC_SCHEMA), "db_id": db_id, **r} for r in rows], schema=METRIC_SCHEMA)


def all_call_ids(turns: pl.DataFrame) -> list[str]:
    """Every llm_call_id a conversation's decisions rest on (system turns, classification, votes)."""
    ids = set(turns["system_call_id"].drop_nulls()) | set(turns["classification_call_id"].drop_nulls())
    for col in ("label_votes", "candidates", "tournament"):
        s = turns[col].explode().drop_nulls()
        if len(s):
            ids |= set(s.struct.field("llm_call_id").drop_nulls())
    return sorted(ids)


def results_json(
    turns: pl.DataFrame, scores: pl.DataFrame, dataset: pl.DataFrame, user_name: str, dataset_name: str
) -> dict[str, dict]:
    """Per agent, the reference ``Results`` document (``category_use``: ground_truth / predicted /
    no_category; Quandary's taxonomy-free mode is written as ``taxonomy_free``)."""

    records = dict(zip(dataset["question_id"].to_list(), to_abiss_records(dataset)))
    score_by = {s["conversation_id"]: s for s in scores.iter_rows(named=True)}
    docs: dict[str, dict] = {}
    for c in conversations_from_turns(turns):
        doc = docs.setdefault(
            c["agent"],
            {"agent_name": c["agent"], "user_name": user_name, "dataset_name": dataset_name, "conversations": []},
        )
        s = score_by.get(c["conversation_id"], {})
        q = {
            k: v
            for k, v in records.get(c["question_id"], {}).items()
            if k not in ("subcategory_id", "group_id", "generator")
        }
        doc["conversations"].append(
            {
                "question": q,
                "category_use": REFERENCE_CATEGORY_USE[c["mode"]],
                "interactions": [
                    {
                        "system_response": {
                            "system_question": t["system_question"],
                            "system_sql": t["system_sql"],
                            "system_feedback": t["system_feedback"],
                        },
                        "user_response": t["user_response"],
                        "relevance": t["relevance"],
                    }
                    for t in c["turns"]
                ],
                "predicted_category": reference_category(c["predicted_subcategory"])
                if c["predicted_subcategory"]
                else None,
                "predicted_sql": c["predicted_sql"],
                "predicted_feedback": c["predicted_feedback"],
                "recognition": s.get("recognition"),
                "classification": s.get("classification"),
                "solved": s.get("solved"),
                "explained": s.get("explained"),
                "complete": c["end"] not in INCOMPLETE_ENDS,
            }
        )
    for doc in docs.values():  # #30 item 5: an export with incomplete conversations says so
        n_incomplete = sum(not c["complete"] for c in doc["conversations"])
        doc["provisional"] = n_incomplete > 0
        doc["incomplete_conversations"] = n_incomplete
    return docs
