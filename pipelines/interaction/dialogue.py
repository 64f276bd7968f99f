"""The dialogue loop (ABISS §5, reference ``Benchmark.run``), one conversation per question × mode × agent.

* Classification first: one prediction per (agent, question), shared by the predicted mode.
* System turns ``step = 0 .. max_steps`` (default 3 clarifications + 1 final turn). SQL or feedback
  ends the conversation; a clarification is answered by the simulated user; an empty, failed or
  unparseable answer ends it as a ``give_up`` (raw text kept): scored against the system. A user
  turn that could not be produced (a council call failed, :mod:`pipelines.interaction.user`) ends it
  as ``user_failed``; a system call that got no answer at all (its endpoint failed after the
  council's retries) ends it as ``system_failed`` — an outage is not the agent's answer (#38 item 3).
  Both are incomplete conversations (:mod:`pipelines.interaction.ends`), kept out of the metrics
  and retried by the next run. On the final
  turn the schema has no question field, so a conversation never exceeds ``max_steps + 1`` system
  turns.
* Conversations run concurrently in threads (the council bounds in-flight calls per member);
  every call is cached, so an interrupted run that is started again repeats no call, and an
  interrupt stops every thread at once (``call_threads``) instead of waiting for calls in flight.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import as_completed
from dataclasses import asdict

from pipelines.abiss.ids import stable_id
from pipelines.interaction.agents import AgentHandle, ClassifyResult, Question, SystemResponse, Turn
from pipelines.interaction.ends import SYSTEM_FAILED, TRANSPORT_FAILURE, USER_FAILED
from pipelines.interaction.modes import Mode
from pipelines.interaction.user import SimulatedUser
from resources.llm.runtime import call_threads

MAX_STEPS = 3


def conversation_id(agent: str, mode: str, question_id: str) -> str:
    return stable_id("conv", agent, mode, question_id)


def to_question(row: dict, schema_context: str, db_path: str) -> Question:
    return Question(
        row["question_id"],
        row["db_id"],
        row["question"],
        row.get("evidence"),
        schema_context,
        db_path,
        row.get("style"),
    )


def classify_all(
    agent: AgentHandle, rows: list[dict], schema_context: str, db_path: str, workers: int = 8
) -> dict[str, ClassifyResult]:
    with call_threads(workers) as pool:
        results = list(pool.map(lambda r: agent.classify(to_question(r, schema_context, db_path)), rows))
    return {r["question_id"]: c for r, c in zip(rows, results)}


def run_conversation(
    agent: AgentHandle,
    row: dict,
    mode: str,
    prediction: ClassifyResult | None,
    user: SimulatedUser,
    schema_context: str,
    db_path: str,
    max_steps: int = MAX_STEPS,
) -> dict:
    """One dialogue; returns the conversation summary with its turn rows under ``turns``."""
    q = to_question(row, schema_context, db_path)
    cid = conversation_id(agent.name, mode, q.question_id)
    category = (
        row["subcategory"]
        if mode == Mode.GROUND_TRUTH.value
        else prediction.subcategory
        if mode == Mode.PREDICTED.value and prediction
        else None
    )
    history: list[tuple[str, str | None]] = []
    turns: list[dict] = []
    end, out_sql, out_fb = "give_up", None, None
    # the predicted-mode dialogue needs the system's classification: when its endpoint gave no
    # answer, the dialogue is not held without a category (it would be another mode) but left
    # incomplete at its first turn, for the next run to classify and hold
    unclassified = mode == Mode.PREDICTED.value and prediction is not None and prediction.status == TRANSPORT_FAILURE
    for step in range(max_steps + 1):
        if unclassified:
            resp = SystemResponse(status=TRANSPORT_FAILURE, raw=prediction.raw, call_id=prediction.call_id)
        else:
            resp = agent.respond(Turn(q, tuple(history), mode, category, step, max_steps))
        base = {
            "conversation_id": cid,
            "question_id": q.question_id,
            "db_id": q.db_id,
            "agent": agent.name,
            "mode": mode,
            "step": step,
            "system_question": resp.question,
            "system_sql": resp.sql,
            "system_feedback": resp.feedback,
            "system_status": resp.status,
            "system_raw": resp.raw,
            "system_call_id": resp.call_id,
            "terminal": resp.kind != "question",
            "relevance": None,
            "user_response": None,
            "short_circuit": False,
            "label_votes": [],
            "candidates": [],
            "tournament": [],
            "fragments": [],
            "winner_member": None,
            "margin": None,
            "user_status": None,
            "user_error": None,
            "invalid_node_ids": [],
            "withheld_node_ids": [],
        }
        turns.append(base)
        if resp.kind == "sql":
            end, out_sql = "sql", resp.sql
            break
        if resp.kind == "feedback":
            end, out_fb = "feedback", resp.feedback
            break
        if resp.kind is None:
            # no answer arrived (transport failure): incomplete; an answer that came but is empty or
            # unreadable is the agent's own and counts against it
            end = SYSTEM_FAILED if resp.status == TRANSPORT_FAILURE else "give_up"
            break
        u = user.answer(row, schema_context, history, resp.question, cid, step)
        base.update(
            relevance=u.relevance,
            user_response=u.answer,
            short_circuit=u.short_circuit,
            label_votes=u.label_votes,
            candidates=u.candidates,
            tournament=u.tournament,
            fragments=u.fragments,
            winner_member=u.winner_member,
            margin=u.margin,
            user_status=u.status,
            user_error=u.error,
            invalid_node_ids=u.invalid_node_ids,
            withheld_node_ids=u.withheld_node_ids,
        )
        if u.failed:
            end = USER_FAILED
            break
        history.append((resp.question, u.answer))
    return {
        "conversation_id": cid,
        "question_id": q.question_id,
        "db_id": q.db_id,
        "agent": agent.name,
        "agent_spec": agent.spec,
        "mode": mode,
        "category_given": category,
        "predicted_subcategory": prediction.subcategory if prediction else None,
        "classification_status": prediction.status if prediction else None,
        "classification_call_id": prediction.call_id if prediction else None,
        "end": end,
        "predicted_sql": out_sql,
        "predicted_feedback": out_fb,
        "n_turns": len(turns),
        "turns": turns,
    }


def run_benchmark(
    agents: list[AgentHandle],
    rows: list[dict],
    modes: list[str],
    user: SimulatedUser,
    schema_context: str,
    db_path: str,
    max_steps: int = MAX_STEPS,
    workers: int = 8,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[dict], list[dict]]:
    """All conversations; returns (conversations, skipped) where skipped lists agent × mode × question
    combinations that cannot run (predicted mode for an agent that did not classify the question)."""
    jobs, skipped = [], []
    label_modes = {Mode.PREDICTED.value, Mode.GROUND_TRUTH.value}
    for agent in agents:
        # a council agent always has a classification phase: classify only for the predicted mode;
        # a custom agent's classify is local code, asked whenever a label mode is requested (§5.1)
        need = Mode.PREDICTED.value in modes or (agent.kind != "council" and label_modes & set(modes))
        predictions = classify_all(agent, rows, schema_context, db_path, workers) if need else {}
        for row in rows:
            for mode in modes:
                pred = predictions.get(row["question_id"])
                no_phase = agent.kind != "council" and (pred is None or pred.status == "no_classification")
                # an agent without a classification phase runs only the label-free modes; a failed
                # classification still runs (no category given) and counts as wrong for Rec/Cls
                if (mode == Mode.PREDICTED.value and (pred is None or pred.status == "no_classification")) or (
                    mode == Mode.GROUND_TRUTH.value and no_phase
                ):
                    skipped.append(
                        {
                            "agent": agent.name,
                            "mode": mode,
                            "question_id": row["question_id"],
                            "reason": pred.status if pred else "no_classification",
                        }
                    )
                    continue
                jobs.append((agent, row, mode, pred))
    done, out = 0, [None] * len(jobs)

    def work(i):
        agent, row, mode, pred = jobs[i]
        return i, run_conversation(agent, row, mode, pred, user, schema_context, db_path, max_steps)

    with call_threads(workers) as pool:
        # progress counts conversations as they finish, not in job order
        for future in as_completed([pool.submit(work, i) for i in range(len(jobs))]):
            i, conv = future.result()
            out[i] = conv
            done += 1
            if progress:
                progress(done, len(jobs))
    return out, skipped


def prediction_dict(p: ClassifyResult | None) -> dict:
    return asdict(p) if p else {}
