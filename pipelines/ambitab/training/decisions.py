"""From rolled-out episodes to training decisions (Appendix D.1), plain Python.

- The reward of a trajectory: question F1 (Eq. 2, ``reward_f1``) or the outcome (Eq. 3,
  ``reward_sr``), from the same episode row ``ambitab eval`` stores. A request without ambiguities
  gets one decision meant for stopping; anything else there (a question, an unreadable output) is
  not abstaining and scores 0, although the episode records it as a fallback stop with n = 0.
- Group-standardised advantages per request (``group_advantages``: zero-advantage groups dropped,
  one kept if all are; ``Batch.groups_signal`` counts the groups whose rewards differ, which the
  trainer's ``zero_signal`` rule reads).
- Every decision the asker emitted in a retained trajectory, the stop and a fallback included,
  carries the trajectory's advantage; oracle responses and SQL are context, never decisions, so
  they carry no loss by construction (only the asker's own sampled tokens are trained on), and
  within a decision the tokens its grammar forced carry none either (``Decision.chosen``).
"""

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from pipelines.ambitab.protocol.training import group_advantages, has_signal, reward_f1, reward_sr


def trajectory_reward(row: dict, reward: str = "f1") -> float:
    if reward == "sr":
        return reward_sr(row.get("verdict"))
    if reward != "f1":
        raise ValueError(f"reward must be 'f1' or 'sr', got {reward!r}")
    if row["n_amb"] == 0 and row.get("fallback_stop"):
        return 0.0  # a question (or an unreadable output) instead of the stop: not abstaining
    return reward_f1(row["n_amb"], [t["credited"] for t in json.loads(row["turns_json"])])


@dataclass(frozen=True)
class Decision:
    """One sampled asker output: the prompt tokens it saw and the tokens it emitted."""

    episode_id: str
    turn: int
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    advantage: float = 0.0
    forced: tuple[bool, ...] = ()  # per completion token: the grammar allowed only it (no gradient)
    old_logp: tuple[float, ...] = ()  # log π_old(y_t) of the policy that sampled it (empty: recompute)

    @property
    def chosen(self) -> tuple[bool, ...]:
        """Per completion token: sampled by the policy (True) or forced by the grammar (False)."""
        return tuple(not f for f in self.forced) if self.forced else (True,) * len(self.completion_ids)


@dataclass
class Batch:
    decisions: list[Decision]
    rewards: dict[str, float]  # episode_id -> reward
    groups: int  # request groups rolled out
    groups_kept: int  # groups with a non-zero advantage (or the one kept)
    groups_signal: int = 0  # groups whose rewards differ (0: the kept group's advantages are all 0)


def build_batch(
    rows: Sequence[dict], log: Sequence[Decision], reward: str = "f1", reward_fn: Callable[[dict], float] | None = None
) -> Batch:
    """Rewards, group advantages (a group = the K trajectories of one request) and the retained
    decisions, in rollout order. ``log`` holds every asker output of the rollout (any order);
    ``reward_fn`` (an episode row -> reward) replaces the named reward (tests, toy tasks)."""
    rewards = {r["episode_id"]: (reward_fn(r) if reward_fn else trajectory_reward(r, reward)) for r in rows}
    groups: dict[str, list[str]] = {}
    for r in rows:
        groups.setdefault(r["record_id"], []).append(r["episode_id"])
    by_group = {g: [rewards[e] for e in eids] for g, eids in groups.items()}
    adv = group_advantages(by_group)
    per_episode = {e: a for g, a_list in adv.items() for e, a in zip(groups[g], a_list)}
    by_episode: dict[str, list[Decision]] = {}
    for d in log:
        by_episode.setdefault(d.episode_id, []).append(d)
    out = []
    for r in rows:
        e = r["episode_id"]
        if e not in per_episode:
            continue
        for d in sorted(by_episode.get(e, []), key=lambda d: d.turn):
            out.append(replace(d, advantage=per_episode[e]))
    return Batch(out, rewards, len(groups), len(adv), sum(has_signal(rs) for rs in by_group.values()))
