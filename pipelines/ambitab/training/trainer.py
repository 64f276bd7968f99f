"""Multi-turn GRPO for the asker (Appendix D): rollouts through the evaluation's episode code,
group advantages, the per-token loss of Eq. 6, one AdamW update per rollout batch.

Why not TRL's GRPOTrainer: it generates one completion per prompt and scores it; here a
trajectory is a dialogue whose later prompts depend on the oracle's answers to earlier
decisions, the reward arrives at the end of the dialogue, and every decision of it carries the
trajectory's advantage. The loop below is those few functions on torch + peft; the token
log-probabilities and entropies are TRL's (:mod:`.loss`), the schedule is transformers' cosine
with warmup, the adapter is peft's LoRA.

Per update u: requests u·R … u·R+R−1 of a seeded per-epoch shuffle, K trajectories each with
seeds u·K … u·K+K−1 (a resumed run rolls out exactly what the killed one would have).
"""

import math
import random
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from resources.startup import heavy_imports

with heavy_imports():  # torch, transformers, peft, TRL: seconds of import (resources/startup.py)
    import torch
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file
    from transformers import get_cosine_schedule_with_warmup

from pipelines.ambitab.protocol.episode import RunSettings
from pipelines.ambitab.protocol.oracles import Oracle
from pipelines.ambitab.protocol.solver import NoSolver, Solver
from pipelines.ambitab.protocol.task import Task
from pipelines.ambitab.protocol.verifier import Verifier
from pipelines.ambitab.training.checkpoints import read_curve, read_state, write_json
from pipelines.ambitab.training.decisions import Batch, Decision, build_batch
from pipelines.ambitab.training.local_asker import DecisionBatcher, LocalAsker, batched_episodes, make_sampler
from pipelines.ambitab.training.loss import backward_group, decision_loss, group_token_stats
from pipelines.ambitab.training.model import with_lora
from pipelines.ambitab.training.prefix import SHARED_PREFIX_MIN, common_prefix
from pipelines.ambitab.training.presets import Preset

POLICY_NAME = "policy"  # the asker name in training episodes
GROUP_MAX = 16  # decisions sharing one prefix forward
# suffix tokens (rows x widest) whose activations are held at once in the training pass
# (SmolLM2-135M, float32: ~1.6 MB per token; 1024 tokens ~ 1.7 GiB beside the prefix's)
SUFFIX_TOKENS = 1024


def prefix_groups(decisions: Sequence[Decision], size: int) -> list[list[Decision]]:
    """Consecutive decisions whose prompts share at least SHARED_PREFIX_MIN tokens with the
    group's first (a request's trajectories are consecutive), at most ``size`` per group."""
    groups: list[list[Decision]] = []
    for d in decisions:
        g = groups[-1] if groups else None
        if g and len(g) < size and common_prefix([g[0].prompt_ids, d.prompt_ids]) >= SHARED_PREFIX_MIN:
            g.append(d)
        else:
            groups.append([d])
    return groups


def request_order(n: int, seed: int, epoch: int) -> list[int]:
    idx = list(range(n))
    random.Random(f"{seed}:{epoch}").shuffle(idx)
    return idx


def batch_requests(tasks: Sequence[Task], update: int, per_batch: int, seed: int) -> list[Task]:
    """The requests of rollout batch ``update`` (0-based): consecutive slices of per-epoch shuffles."""
    n = len(tasks)
    out = []
    for i in range(update * per_batch, (update + 1) * per_batch):
        epoch, pos = divmod(i, n)
        out.append(tasks[request_order(n, seed, epoch)[pos]])
    return out


@dataclass
class UpdateStats:
    update: int
    reward: float
    precision: float | None
    recall: float | None
    kl: float | None  # None: no optimizer step (nothing was computed)
    entropy: float | None
    clip_fraction: float | None
    loss: float | None
    grad_norm: float | None
    lr: float
    decisions: int
    tokens: int
    groups: int
    groups_kept: int
    fallback_stops: int
    rollout_s: float
    update_s: float
    stepped: bool = True  # False: no group's rewards differed and the preset skips such batches


def _mean(xs):
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return sum(xs) / len(xs) if xs else None


def update_line(s: UpdateStats, horizon: int | None = None) -> str:
    """One progress line per update; a skipped step says so (its KL and entropy were never computed)."""
    of = f"/{horizon}" if horizon else ""
    if not s.stepped:
        moved = f"no step: no group's rewards differed ({s.groups} groups)"
    else:
        moved = f"KL {s.kl:.4f} · entropy {s.entropy:.3f} · kept {s.groups_kept}/{s.groups} groups"
    return (
        f"update {s.update}{of}: reward {s.reward:.3f} · {moved} · {s.decisions} decisions "
        f"· {s.rollout_s + s.update_s:.0f}s"
    )


class Trainer:
    """One training run in ``run_dir`` (see :mod:`.checkpoints`). ``model`` is the base causal LM
    (a LoRA adapter is added here), ``tokenizer`` its tokenizer (chat template checked earlier)."""

    def __init__(
        self,
        preset: Preset,
        tasks: Sequence[Task],
        oracle: Oracle,
        run_dir: Path,
        model,
        tokenizer,
        *,
        model_ref: str,
        solver: Solver | None = None,
        verifier: Verifier | None = None,
        progress: Callable[[str], None] | None = None,
        reward_fn: Callable[[dict], float] | None = None,
    ):
        if not tasks:
            raise ValueError("no training records")
        if preset.reward == "sr" and (solver is None or not getattr(solver, "writes_sql", True)):
            raise ValueError("the outcome reward (sr) needs a solver that writes SQL")
        self.solver, self.verifier = solver or NoSolver(), verifier or Verifier()
        if preset.reward == "sr":  # an outcome that cannot be verified here is no reward, never a 0
            tasks = [t for t in tasks if self.verifier.can_verify(t) is None]
            if not tasks:
                raise ValueError("the outcome reward (sr) needs records verifiable here; none of these is")
        self.preset, self.tasks, self.oracle, self.run_dir = preset, list(tasks), oracle, Path(run_dir)
        self.tokenizer, self.model_ref, self.progress = tokenizer, model_ref, progress or (lambda s: None)
        self.reward_fn = reward_fn
        torch.manual_seed(preset.seed)
        self.policy = with_lora(model, preset)
        self.sampler = make_sampler(
            self.policy, tokenizer, preset.temperature, preset.max_new_tokens, preset.constrained, preset.question
        )
        self.params = [p for p in self.policy.parameters() if p.requires_grad]
        self.opt = torch.optim.AdamW(
            self.params, lr=preset.lr, betas=preset.betas, eps=preset.eps, weight_decay=preset.weight_decay
        )
        self.sched = get_cosine_schedule_with_warmup(
            self.opt, math.ceil(preset.warmup * preset.updates), preset.updates
        )
        self.settings = RunSettings(skip_clear=False, extra_questions=preset.extra_questions, stop_only_clear=True)
        self.update = 0  # updates done
        self.curve: list[dict] = []

    # -- checkpoints -------------------------------------------------------------------------
    def start(self, meta: dict) -> int:
        """Begin or resume the run: a new run writes run.json (preset, model, records, ``meta``)
        and its zero-initialised adapter as update 0 (the base policy, ``checkpoint:<id>@0``); a
        run with a checkpoint resumes from it. Returns the update count."""
        if (self.run_dir / "run.json").is_file():
            return self.resume()
        write_json(
            self.run_dir / "run.json",
            {
                **meta,
                "run_id": self.run_dir.name,
                "preset": self.preset.to_dict(),
                "model": self.preset.model,
                "model_ref": self.model_ref,
                "train_record_ids": [t.record_id for t in self.tasks],
                "oracle": self.oracle.name,
            },
        )
        self.save()
        return 0

    def resume(self) -> int:
        """Load the last complete checkpoint of ``run_dir``, if any; returns the update count."""
        state = read_state(self.run_dir)
        if state is None:
            return 0
        d = self.run_dir / state["dir"]
        set_peft_model_state_dict(self.policy, load_file(str(d / "adapter" / "adapter_model.safetensors")))
        st = torch.load(d / "trainer.pt", weights_only=False)
        self.opt.load_state_dict(st["optimizer"])
        self.sched.load_state_dict(st["scheduler"])
        torch.set_rng_state(st["torch_rng"])
        self.update = int(state["update"])
        self.curve = read_curve(self.run_dir, upto=self.update)
        self._write_curve()  # updates after the checkpoint are rolled out again
        return self.update

    def save(self) -> Path:
        d = self.run_dir / f"update_{self.update:04d}"
        d.mkdir(parents=True, exist_ok=True)
        self.policy.save_pretrained(str(d / "adapter"))
        torch.save(
            {
                "optimizer": self.opt.state_dict(),
                "scheduler": self.sched.state_dict(),
                "torch_rng": torch.get_rng_state(),
            },
            d / "trainer.pt",
        )
        write_json(self.run_dir / "state.json", {"update": self.update, "dir": d.name})  # last: the commit point
        return d

    def _write_curve(self) -> None:
        import json

        tmp = self.run_dir / ".curve.jsonl.tmp"
        tmp.write_text("".join(json.dumps(r) + "\n" for r in self.curve))
        tmp.replace(self.run_dir / "curve.jsonl")

    # -- one update ----------------------------------------------------------------------------
    def asker(self, log: Callable[[Decision], None] | None, batcher: DecisionBatcher | None = None) -> LocalAsker:
        p = self.preset
        return LocalAsker(
            self.policy,
            self.tokenizer,
            name=POLICY_NAME,
            model_key=self.model_ref,
            temperature=p.temperature,
            max_new_tokens=p.max_new_tokens,
            max_prompt_tokens=p.max_prompt_tokens,
            run_seed=p.seed,
            constrained=p.constrained,
            question=p.question,
            log=log,
            batcher=batcher,
        )

    def rollout(self, update: int) -> tuple[list[dict], list[Decision]]:
        """The K trajectories of each request of batch ``update``, a request's K sampled together
        (one batched forward pass per token across its trajectories)."""
        p = self.preset
        requests = batch_requests(self.tasks, update, p.requests_per_rollout, p.seed)
        seeds = [update * p.trajectories + k for k in range(p.trajectories)]
        log: list[Decision] = []
        rows = batched_episodes(
            requests,
            lambda b: self.asker(log.append, b),
            self.sampler,
            self.oracle,
            self.solver,
            self.verifier,
            seeds,
            self.settings,
        )
        return rows, log

    def accumulate(self, decisions: Sequence[Decision]) -> dict:
        """Backpropagate Eq. 6 over ``decisions`` (gradients accumulate; no optimizer step).
        Decisions whose prompts share a long prefix (a request's trajectories) are computed
        together, the prefix once, their suffixes a few at a time (:func:`.loss.backward_group`:
        the same values and gradients as one forward per decision)."""
        p = self.preset
        self.policy.train()
        loss_sum, kl, ent, clip, tokens = 0.0, [], [], [], 0
        live = [d for d in decisions if d.completion_ids and any(d.chosen)]  # else no term (still in B)
        for group in prefix_groups(live, GROUP_MAX):
            prompts, completions = [d.prompt_ids for d in group], [d.completion_ids for d in group]
            with torch.no_grad(), self.policy.disable_adapter():
                refs = group_token_stats(self.policy, prompts, completions, p.temperature)

            def chunk_loss(idx, stats, group=group, refs=refs):
                nonlocal loss_sum, tokens
                chunk = 0.0
                for d, (logp, entropy), (ref_logp, _) in zip([group[i] for i in idx], stats, [refs[i] for i in idx]):
                    # π_old: the log-probs the sampler recorded (the weights that sampled, in the
                    # sampler's numerics: batched, cached, bf16 on a GPU), else the current weights
                    old = torch.tensor(d.old_logp, dtype=logp.dtype) if d.old_logp else logp.detach()
                    terms = decision_loss(
                        logp,
                        old.to(logp.device),
                        ref_logp,
                        entropy,
                        d.advantage,
                        clip_low=p.clip_low,
                        clip_high=p.clip_high,
                        beta=p.beta,
                        entropy_coef=p.entropy_coef,
                        chosen=torch.tensor(d.chosen),
                    )
                    chunk = chunk + terms.loss / p.nominal_batch  # summed, divided by the nominal B
                    loss_sum += float(terms.loss.detach()) / p.nominal_batch
                    kl.append(terms.kl)
                    ent.append(terms.entropy)
                    clip.append(terms.clipped)
                    tokens += terms.tokens
                return chunk

            # a few decisions' activations at a time (all of a group's at once peaked at 17 GiB)
            backward_group(self.policy, prompts, completions, p.temperature, chunk_loss, SUFFIX_TOKENS)
        return {
            "loss": loss_sum,
            "kl": _mean(kl) or 0.0,
            "entropy": _mean(ent) or 0.0,
            "clip_fraction": _mean(clip) or 0.0,
            "tokens": tokens,
        }

    def optimize(self, batch: Batch) -> dict:
        if batch.groups_signal == 0 and self.preset.zero_signal == "skip":
            # no policy-gradient signal: no loss, no step (AdamW's moments stay put); the schedule
            # still advances, so the LR of update u does not depend on how many were skipped
            lr = self.sched.get_last_lr()[0]
            with warnings.catch_warnings():  # "lr_scheduler.step() before optimizer.step()": meant
                warnings.simplefilter("ignore", UserWarning)
                self.sched.step()
            return {
                "loss": None,
                "kl": None,
                "entropy": None,
                "clip_fraction": None,
                "tokens": 0,
                "grad_norm": None,
                "lr": lr,
                "stepped": False,
            }
        self.opt.zero_grad(set_to_none=True)
        stats = self.accumulate(batch.decisions)
        grad_norm = (
            float(torch.nn.utils.clip_grad_norm_(self.params, self.preset.grad_clip)) if batch.decisions else 0.0
        )
        lr = self.sched.get_last_lr()[0]
        self.opt.step()
        self.sched.step()
        return {**stats, "grad_norm": grad_norm, "lr": lr, "stepped": True}

    def step(self) -> UpdateStats:
        t0 = time.monotonic()
        rows, log = self.rollout(self.update)
        t1 = time.monotonic()
        batch = build_batch(rows, log, self.preset.reward, self.reward_fn)
        opt = self.optimize(batch)
        self.update += 1
        stats = UpdateStats(
            update=self.update,
            reward=_mean(list(batch.rewards.values())) or 0.0,
            precision=_mean([r["precision"] for r in rows]),
            recall=_mean([r["recall"] for r in rows]),
            decisions=len(batch.decisions),
            groups=batch.groups,
            groups_kept=batch.groups_kept,
            fallback_stops=sum(bool(r["fallback_stop"]) for r in rows),
            rollout_s=t1 - t0,
            update_s=time.monotonic() - t1,
            **opt,
        )
        self.curve.append(stats.__dict__)
        self._write_curve()
        return stats

    def train(self, max_updates: int | None = None) -> list[dict]:
        """Updates until the preset's horizon (or ``max_updates`` more); a checkpoint every
        ``checkpoint_every`` updates and at the end. Ctrl-C propagates: the last complete
        checkpoint is what a resume starts from."""
        p = self.preset
        stop_at = p.updates if max_updates is None else min(p.updates, self.update + max_updates)
        while self.update < stop_at:
            s = self.step()
            self.progress(update_line(s, p.updates))
            if self.update % p.checkpoint_every == 0 or self.update == stop_at:
                self.save()
        return self.curve
