"""The asker's training objective (spec §7, paper Appendix D) as plain functions, and an export of
episodes as JSONL rollouts for a trainer elsewhere. The trainer itself is pipelines.ambitab.training.

- ``reward_f1`` (Eq. 2): 1 if |Amb| = 0 and n = 0; 2pr/(p+r) if |Amb| > 0, n > 0 and p + r > 0;
  0 otherwise.
- ``reward_sr``: the verifier's outcome V(θ, ŝ).
- ``group_advantages``: A_k = (R_k − R̄)/(s_R + 1e-6), s_R the sample SD (K − 1) of the group;
  groups with s_R ≤ 1e-6 are dropped; if every group is dropped, the first is kept.
- Every retained decision, the stop included, carries its trajectory's advantage; oracle
  responses and SQL carry no loss (they are context, not decisions).
"""

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

from pipelines.ambitab.protocol.metrics import episode_scores
from pipelines.ambitab.protocol.prompts import ASKER_PROMPTS, DEFAULT_ASKER_PROMPT, asker_messages

ADV_EPS = 1e-6


def reward_f1(n_amb: int, credits: Sequence[Iterable[str]]) -> float:
    n = len(credits)
    if n_amb == 0:
        return 1.0 if n == 0 else 0.0
    if n == 0:
        return 0.0
    s = episode_scores(n_amb, credits)
    p, r = s.precision or 0.0, s.recall or 0.0
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def reward_sr(verdict: int | None) -> float:
    return float(verdict or 0)


def _mean_sd(rewards: Sequence[float]) -> tuple[float, float]:
    rs = [float(r) for r in rewards]
    k = len(rs)
    mean = sum(rs) / k if k else 0.0
    return mean, (math.sqrt(sum((r - mean) ** 2 for r in rs) / (k - 1)) if k > 1 else 0.0)


def has_signal(rewards: Sequence[float]) -> bool:
    """The group's rewards differ (s_R > 1e-6): its advantages carry a policy gradient."""
    return _mean_sd(rewards)[1] > ADV_EPS


def group_advantages(groups: dict[str, Sequence[float]]) -> dict[str, list[float]]:
    """Group-standardised advantages per group id (insertion order decides the keep-one rule)."""
    out: dict[str, list[float]] = {}
    first = None
    for gid, rewards in groups.items():
        mean, sd = _mean_sd(rewards)
        adv = [(float(r) - mean) / (sd + ADV_EPS) for r in rewards]
        if first is None:
            first = (gid, adv)
        if sd > ADV_EPS:  # has_signal
            out[gid] = adv
    if not out and first is not None:
        out[first[0]] = first[1]
    return out


def rollouts(
    episodes: Sequence[dict], reward: str = "f1", tasks: dict | None = None, extra_questions: int = 2
) -> list[dict]:
    """One rollout per episode, grouped by record (K trajectories = the seeds of one record), each
    decision with its trajectory's advantage. ``reward``: ``f1`` (question F1) or ``sr``.

    With ``tasks`` (record_id -> Task), every decision also carries ``messages``: the asker prompt
    of that turn (the Checklist (ledger) prompt unless the episode used another), rebuilt from the
    spec the asker read (the donor's for spec-randomised episodes) and the history so far."""
    if reward not in ("f1", "sr"):
        raise ValueError(f"reward must be 'f1' or 'sr', got {reward!r}")
    by_group: dict[str, list[dict]] = {}
    for ep in episodes:
        by_group.setdefault(f"{ep['record_id']}|{ep['asker']}|{ep['prompt']}|{ep['oracle']}", []).append(ep)
    rewards = {}
    for gid, eps in by_group.items():
        vals = []
        for ep in eps:
            turns = json.loads(ep["turns_json"])
            vals.append(
                reward_f1(ep["n_amb"], [t["credited"] for t in turns]) if reward == "f1" else reward_sr(ep["verdict"])
            )
        rewards[gid] = vals
    adv = group_advantages(rewards)
    out = []
    for gid, eps in by_group.items():
        if gid not in adv:
            continue
        for ep, r, a in zip(eps, rewards[gid], adv[gid]):
            turns = json.loads(ep["turns_json"])
            decisions = [
                {
                    "turn": t["turn"],
                    "output": json.dumps({"type": "clarification", "output": t["question"]}),
                    "context_after": t["response"],
                    "advantage": a,
                }
                for t in turns
            ]
            if not ep["skipped_clarification"]:
                decisions.append(
                    {
                        "turn": len(turns) + 1,
                        "output": json.dumps({"type": "done", "output": None}),
                        "context_after": None,
                        "advantage": a,
                    }
                )
            if tasks:
                _attach_prompts(ep, turns, decisions, tasks, extra_questions)
            out.append(
                {
                    "trajectory_id": ep["episode_id"],
                    "group_id": gid,
                    "record_id": ep["record_id"],
                    "seed": ep["seed"],
                    "reward": r,
                    "advantage": a,
                    "decisions": decisions,
                }
            )
    return out


def _attach_prompts(ep: dict, turns: list[dict], decisions: list[dict], tasks: dict, extra_questions: int) -> None:
    task = tasks.get(ep.get("spec_donor") or ep["record_id"])
    if task is None:
        return
    prompt = ep.get("prompt") if ep.get("prompt") in ASKER_PROMPTS else DEFAULT_ASKER_PROMPT
    max_turns = ep["n_amb"] + extra_questions + 1
    history = [(t["question"], t["response"], bool(t.get("refused"))) for t in turns]
    for d in decisions:
        d["messages"] = asker_messages(prompt, task.spec, history[: d["turn"] - 1], d["turn"], max_turns)


def write_rollouts(rows: Iterable[dict], path: str | Path) -> int:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("w") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n
