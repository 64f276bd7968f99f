"""The ask-then-solve episode (spec §3) and batch runs over records × seeds.

1. θ (the record) is fixed and hidden; hist = (x).
2. The asker emits a question or stops. For a question the matcher credits at most one
   ambiguity (hidden from the agent), the responder answers, (q, a) is appended.
3. On stop the solver writes SQL from the spec + clarification summary; the verifier scores it.

Budget: m = |Amb| > 0 gives m + 3 decisions, the last reserved for stopping (at most m + 2
questions). m = 0 skips clarification when ``skip_clear`` is set (default, [P]); without it the
asker gets the same m + 3 = 3 decisions. A question on the final decision, or an unparseable asker
output, is a *fallback stop*: the episode continues to the solver, and is flagged so recall and F1
leave it out.

Specification randomisation (π_ask^Q): ``asker_spec`` replaces x in what the asker reads; the
matcher, responder and solver see the real record.

Each episode becomes one flat row (:data:`EPISODE_COLUMNS`); ``turns_json`` keeps every turn with
its credit, response and the ids of the LLM calls behind it.
"""

import asyncio
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import polars as pl

from pipelines.ambitab.protocol.askers import Asker, AskerInput
from pipelines.ambitab.protocol.metrics import episode_scores
from pipelines.ambitab.protocol.oracles import Oracle
from pipelines.ambitab.protocol.prompts import EPISODES_CODE_VERSION
from pipelines.ambitab.protocol.solver import Solver
from pipelines.ambitab.protocol.task import Task
from pipelines.ambitab.protocol.verifier import Verifier
from pipelines.ambitab.record import Spec
from resources.llm.runtime import run_sync

EPISODE_COLUMNS = {
    "episode_id": str,
    "record_id": str,
    "corpus": str,
    "split": str,
    "avt_id": str,
    "db_id": str,
    "seed": int,
    "asker": str,
    "prompt": str,
    "asker_model": str,
    "privileged": bool,  # the asker saw the hidden terms (issue 34 item 10)
    "oracle": str,
    "oracle_model": str,
    "solver": str,
    "solver_model": str,
    "budget": int,
    "options": str,
    "spec_donor": str,
    "n_amb": int,
    "skipped_clarification": bool,
    "fallback_stop": bool,
    "fallback_reason": str,
    "n_questions": int,
    "credited": list,
    "recall": float,
    "precision": float,
    "f1": float,
    "recall_no_response": float,
    "sql": str,
    "verdict": int,
    "verdict_reason": str,
    "status": str,
    "turns_json": str,
    "asker_call_ids": list,
    "solver_call_id": str,
}


def episodes_frame(rows: Sequence[dict]):
    """Episode rows as a polars frame with a fixed schema (an empty run keeps the columns)."""

    types = {str: pl.String, int: pl.Int64, float: pl.Float64, bool: pl.Boolean, list: pl.List(pl.String)}
    schema = {c: types[t] for c, t in EPISODE_COLUMNS.items()}
    return (
        pl.DataFrame([{c: r.get(c) for c in schema} for r in rows], schema=schema, orient="row")
        if rows
        else pl.DataFrame(schema=schema)
    )


def episode_id(
    record_id: str,
    seed: int,
    asker: str,
    prompt: str | None,
    oracle: str,
    spec_donor: str | None = None,
    solver: str = "",
    models: str = "",
    *,
    corpus: str = "",
    budget: int | None = None,
    options: str = "",
) -> str:
    """Content id of an episode: a hash of every field of :data:`EPISODE_KEY`. ``models`` names the
    LLMs behind the asker, the oracle and the solver (member and model string), so a changed council
    config gives new episodes, never stale reuse."""
    key = "\x1f".join(
        [
            record_id,
            str(seed),
            asker,
            prompt or "",
            oracle,
            spec_donor or "",
            solver,
            models,
            corpus,
            "" if budget is None else str(budget),
            options,
        ]
    )
    return hashlib.sha256(key.encode()).hexdigest()[:20]


def models_key(asker, oracle, solver=None) -> str:
    return "|".join(getattr(x, "model_key", "") for x in (asker, oracle, solver))


# Everything that defines an episode (issue 20): the stored episodes are a growing table keyed by
# these columns; a run adds or replaces exactly the rows of its own keys and keeps every other row.
EPISODE_KEY = (
    "corpus",
    "record_id",
    "asker",
    "prompt",
    "asker_model",
    "oracle",
    "oracle_model",
    "solver",
    "solver_model",
    "seed",
    "budget",
    "options",
    "spec_donor",
)
CONDITION_KEY = EPISODE_KEY  # the former name


def _episode_id(task, seed, asker, oracle, solver, spec_donor, settings) -> str:
    # the prompt templates' version is part of the id (not of the key): after a prompt edit the
    # episode runs again and replaces the stored one of the same key, never a stale reuse
    return episode_id(
        task.record_id,
        seed,
        asker.name,
        asker.prompt,
        oracle.name,
        spec_donor,
        solver.name,
        f"{models_key(asker, oracle, solver)}|{EPISODES_CODE_VERSION}",
        corpus=task.corpus,
        budget=settings.extra_questions,
        options=settings.options,
    )


@dataclass
class RunSettings:
    skip_clear: bool = True  # |Amb| = 0 skips clarification
    extra_questions: int = 2  # C in B = |Amb| + C (the paper's 2)
    # training rollouts (Appendix D.1): an |Amb| = 0 request gets a single decision, meant for
    # stopping (a question there is a fallback stop, reward 0); only read when skip_clear is off
    stop_only_clear: bool = False

    @property
    def options(self) -> str:
        """The run options that change an episode, as one stable string (part of the episode key)."""
        base = f"skip_clear={'on' if self.skip_clear else 'off'}"
        return base + (";stop_only_clear=on" if self.stop_only_clear and not self.skip_clear else "")

    def decisions(self, m: int) -> int:
        """Asker decisions of an episode with m ambiguities (the last is reserved for stopping)."""
        return 1 if m == 0 and self.stop_only_clear else m + self.extra_questions + 1


async def arun_episode(
    task: Task,
    asker: Asker,
    oracle: Oracle,
    solver: Solver,
    verifier: Verifier,
    *,
    seed: int = 0,
    settings: RunSettings | None = None,
    asker_spec: Spec | None = None,
    spec_donor: str | None = None,
) -> dict:
    settings = settings or RunSettings()
    m = len(task.amb)
    eid = _episode_id(task, seed, asker, oracle, solver, spec_donor, settings)
    tag = {"episode_id": eid, "record_id": task.record_id, "seed": seed}
    history: list[tuple[str, str, bool]] = []
    turns: list[dict] = []
    resolved: set[str] = set()
    fallback, fallback_reason, asker_calls = False, "", []
    skipped = m == 0 and settings.skip_clear
    if not skipped and oracle.overflows(task):
        # [P] the episode ends before the first question: a failure with zero recall credit
        return _row(
            task,
            asker,
            oracle,
            solver,
            settings,
            eid,
            seed,
            spec_donor,
            m,
            skipped,
            False,
            "",
            [],
            set(),
            episode_scores(m, [], False),
            episode_scores(m, [], False),
            None,
            0 if getattr(solver, "writes_sql", True) else None,
            "oracle context overflow: the episode ends before the first question",
            "context_overflow",
            [],
        )
    if not skipped:
        max_turns = settings.decisions(m)
        for t in range(1, max_turns + 1):
            inp = AskerInput(
                spec=asker_spec or task.spec,
                history=tuple(history),
                turn=t,
                max_turns=max_turns,
                seed=seed,
                terms=task.terms if asker.privileged else (),
                tag=tag,
            )
            decision = await asker.decide(inp)
            if decision.call_id:
                asker_calls.append(decision.call_id)
            if decision.kind == "fallback":
                fallback, fallback_reason = True, decision.reason or "unparseable asker output"
                break
            if decision.kind == "stop":
                break
            if t == max_turns:  # a question on the decision reserved for stopping
                fallback, fallback_reason = True, "question on the final decision"
                break
            reply = await oracle.reply(task, decision.question, frozenset(resolved), seed=seed, tag={**tag, "turn": t})
            new = [c for c in reply.credited if c not in resolved]
            resolved.update(reply.credited)
            history.append((decision.question, reply.response, reply.refused))
            turns.append(
                {
                    "turn": t,
                    "question": decision.question,
                    "credited": list(reply.credited),
                    "new_credit": bool(new),
                    "response": reply.response,
                    "refused": reply.refused,
                    "match_reason": reply.reason,
                    "action": reply.action,
                    "cot": reply.cot,
                    "oracle_call_ids": reply.call_ids,
                    "asker_call_id": decision.call_id,
                    "asker_raw": decision.raw,
                    "credited_no_response": list(
                        reply.credited_no_response if reply.credited_no_response is not None else reply.credited
                    ),
                }
            )
    sol = await solver.solve(task.spec, history, seed=seed, tag=tag)
    if not getattr(solver, "writes_sql", True):  # asking-only run: no SQL, so no verdict (never a 0)
        verdict, reason = None, "no solver: asking metrics only (--solver empty)"
    elif sol.sql is None and sol.error:
        verdict, reason = (0, sol.error) if verifier.can_verify(task) is None else (None, verifier.can_verify(task))
    else:
        v = await asyncio.to_thread(verifier.score, task, sol.sql)
        verdict, reason = v.score, v.reason
    scores = episode_scores(m, [t["credited"] for t in turns], fallback)
    scores_nr = episode_scores(m, [t["credited_no_response"] for t in turns], fallback)
    status = (
        "ok" if verdict is not None else ("no_solver" if not getattr(solver, "writes_sql", True) else "unverifiable")
    )
    return _row(
        task,
        asker,
        oracle,
        solver,
        settings,
        eid,
        seed,
        spec_donor,
        m,
        skipped,
        fallback,
        fallback_reason,
        turns,
        resolved,
        scores,
        scores_nr,
        sol,
        verdict,
        reason,
        status,
        asker_calls,
    )


def _row(
    task,
    asker,
    oracle,
    solver,
    settings,
    eid,
    seed,
    spec_donor,
    m,
    skipped,
    fallback,
    fallback_reason,
    turns,
    resolved,
    scores,
    scores_nr,
    sol,
    verdict,
    reason,
    status,
    asker_calls,
) -> dict:
    return {
        "episode_id": eid,
        "record_id": task.record_id,
        "corpus": task.corpus,
        "split": task.split,
        "avt_id": task.avt_id,
        "db_id": task.db_id,
        "seed": seed,
        "asker": asker.name,
        "prompt": asker.prompt or "",
        "asker_model": getattr(asker, "model_key", ""),
        "privileged": bool(getattr(asker, "privileged", False)),
        "oracle": oracle.name,
        "oracle_model": getattr(oracle, "model_key", ""),
        "solver": solver.name,
        "solver_model": getattr(solver, "model_key", ""),
        "budget": settings.extra_questions,
        "options": settings.options,
        "spec_donor": spec_donor or "",
        "n_amb": m,
        "skipped_clarification": skipped,
        "fallback_stop": fallback,
        "fallback_reason": fallback_reason,
        "n_questions": len(turns),
        "credited": sorted(resolved),
        "recall": scores.recall,
        "precision": scores.precision,
        "f1": scores.f1,
        "recall_no_response": scores_nr.recall,
        "sql": (sol.sql if sol else None) or "",
        "verdict": verdict,
        "verdict_reason": reason,
        "status": status,
        "turns_json": json.dumps(turns, ensure_ascii=False),
        "asker_call_ids": asker_calls,
        "solver_call_id": (sol.call_id if sol else None) or "",
    }


async def arun_episodes(
    tasks: Sequence[Task],
    make_asker: Callable[[], Asker],
    oracle: Oracle,
    solver: Solver,
    verifier: Verifier,
    seeds: Sequence[int],
    *,
    settings: RunSettings | None = None,
    donors: dict[str, Spec] | None = None,
    donor_ids: dict[str, str] | None = None,
    concurrency: int = 8,
    progress: Callable[[int, int], None] | None = None,
    skip: set[str] | None = None,
) -> list[dict]:
    """Every (task, seed) episode, ``concurrency`` at a time, in input order. ``skip`` holds the
    episode ids already stored (a rerun recomputes nothing); ``donors`` maps record_id -> donor spec."""
    sem = asyncio.Semaphore(concurrency)
    settings = settings or RunSettings()
    jobs = [(t, s) for s in seeds for t in tasks]
    done = [0]

    async def one(task: Task, seed: int):
        asker = make_asker()
        donor = donor_ids.get(task.record_id) if donor_ids else None
        if skip and _episode_id(task, seed, asker, oracle, solver, donor, settings) in skip:
            done[0] += 1  # stored already: counts as done for the progress bar, nothing runs
            if progress:
                progress(done[0], len(jobs))
            return None
        async with sem:
            row = await arun_episode(
                task,
                asker,
                oracle,
                solver,
                verifier,
                seed=seed,
                settings=settings,
                asker_spec=(donors or {}).get(task.record_id),
                spec_donor=donor,
            )
        done[0] += 1
        if progress:
            progress(done[0], len(jobs))
        return row

    rows = await asyncio.gather(*(one(t, s) for t, s in jobs))
    return [r for r in rows if r is not None]


def run_episodes(*args, **kwargs) -> list[dict]:
    """Sync twin of :func:`arun_episodes` (runs on the council layer's background loop)."""

    return run_sync(arun_episodes(*args, **kwargs))
