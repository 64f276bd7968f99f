"""The per-token loss of Eq. 6 (Appendix D.1) for one decision, on torch.

    L = (1/B) Σ_j (1/T_j) Σ_t [ −min(ρ A_k(j), clip(ρ, 1−ε_low, 1+ε_high) A_k(j))
                                + β · ½ (log π_φ − log π_ref)²  −  c_H · H ]

Token log-probabilities and entropies come from TRL's ``selective_log_softmax`` and
``entropy_from_logits`` (the functions GRPOTrainer uses, with the same temperature scaling). The
reduction is written here because none of TRL's loss types computes it: ``grpo`` averages over
sequences (divides by the decisions in the batch, not the nominal B), ``dapo`` averages over all
tokens of the batch (no per-decision token mean), ``dr_grpo`` divides by a constant completion
length; and TRL's reference penalty is the k3 estimator, not the sampled k2 of Eq. 5.
"""

from dataclasses import dataclass

import torch
from trl.trainer.utils import entropy_from_logits, selective_log_softmax


def token_stats(model, prompt_ids, completion_ids, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Log π(y_t | h_t) and the entropy of π(· | h_t) for every completion token (1-D, length T),
    logits scaled by the rollout temperature as in TRL. Only the T + 1 last positions get logits
    (``logits_to_keep``): the prompt's rows of a vocabulary-wide matrix are never built."""
    device = next(model.parameters()).device
    ids = torch.tensor([list(prompt_ids) + list(completion_ids)], device=device)
    t = len(completion_ids)
    logits = model(input_ids=ids, logits_to_keep=t + 1).logits[:, :t, :].float() / temperature
    target = ids[:, -t:]
    return selective_log_softmax(logits, target)[0], entropy_from_logits(logits)[0]


SHARED_PREFIX_MIN = 32  # tokens: below this, a group's decisions are computed one by one


def common_prefix(seqs) -> int:
    """Length of the longest prefix all of ``seqs`` share."""
    first, n = seqs[0], min(len(s) for s in seqs)
    for s in seqs[1:]:
        i = 0
        while i < n and s[i] == first[i]:
            i += 1
        n = i
    return n


def _cache_of(out):
    return getattr(out, "cache", None) or getattr(out, "past_key_values", None)


def group_token_stats(model, prompts, completions, temperature: float) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """:func:`token_stats` for several decisions at once, the prompts' shared prefix computed once.

    The K trajectories of a request see the same ~1.6k-token prompt at turn 1 and prompts that
    differ only in their last turns later, so most of every forward pass is the same prefix.
    Here the prefix runs once (with its autograd graph), its KV cache is repeated for each
    decision, and the suffixes (left-padded, so each completion ends the row) run in one batch:
    the same values and gradients as one forward per decision, at a fraction of the compute.
    Falls back to one forward per decision when the prefix is short or the model keeps no cache
    (gradient checkpointing in training)."""
    n = len(prompts)
    shared = min(common_prefix(prompts), min(len(p) for p in prompts) - 1)  # every suffix has a prompt token
    if n == 1 or shared < SHARED_PREFIX_MIN:
        return [token_stats(model, p, c, temperature) for p, c in zip(prompts, completions)]
    device = next(model.parameters()).device
    prefix = model(input_ids=torch.tensor([list(prompts[0][:shared])], device=device), use_cache=True, logits_to_keep=1)
    cache = _cache_of(prefix)
    if cache is None:
        return [token_stats(model, p, c, temperature) for p, c in zip(prompts, completions)]
    cache.batch_repeat_interleave(n)
    suffixes = [list(p[shared:]) + list(c) for p, c in zip(prompts, completions)]
    width = max(len(s) for s in suffixes)
    x = torch.zeros((n, width), dtype=torch.long)
    mask = torch.zeros((n, shared + width), dtype=torch.long)
    mask[:, :shared] = 1
    for i, s in enumerate(suffixes):
        x[i, width - len(s) :] = torch.tensor(s)
        mask[i, shared + width - len(s) :] = 1
    pos = shared + (mask[:, shared:].cumsum(-1) - 1).clamp(min=0)
    keep = max(len(c) for c in completions) + 1
    logits = model(
        input_ids=x.to(device),
        attention_mask=mask.to(device),
        position_ids=pos.to(device),
        cache=cache,
        use_cache=True,
        logits_to_keep=keep,
    ).logits
    out = []
    for i, c in enumerate(completions):
        t = len(c)
        rows = logits[i : i + 1, keep - 1 - t : keep - 1, :].float() / temperature
        target = x[i : i + 1, width - t :].to(device)
        out.append((selective_log_softmax(rows, target)[0], entropy_from_logits(rows)[0]))
    return out


@dataclass
class DecisionTerms:
    loss: torch.Tensor  # the decision's token mean (before the 1/B)
    kl: float  # token mean of ½ (log π_φ − log π_ref)²
    entropy: float
    clipped: float  # fraction of tokens whose ratio left [1−ε_low, 1+ε_high] (the clip bound)
    tokens: int


def decision_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    ref_logp: torch.Tensor,
    entropy: torch.Tensor,
    advantage: float,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    beta: float = 0.1,
    entropy_coef: float = 0.01,
    chosen: torch.Tensor | None = None,
) -> DecisionTerms:
    """One decision's term of Eq. 6: the token mean of ℓ_jt (the caller divides by B and sums).

    ``chosen`` (bool, length T) marks the tokens the policy sampled; tokens a grammar forced are
    left out of every term and of T_j (a forced token is no action of the policy: its gradient
    would only teach the scaffolding). None = every token was chosen."""
    if chosen is not None:
        chosen = chosen.to(logp.device)
        logp, old_logp, ref_logp, entropy = logp[chosen], old_logp[chosen], ref_logp[chosen], entropy[chosen]
    if logp.numel() == 0:  # nothing the policy chose: no term
        zero = logp.sum() * 0.0
        return DecisionTerms(loss=zero, kl=float("nan"), entropy=float("nan"), clipped=float("nan"), tokens=0)
    ratio = torch.exp(logp - old_logp)
    unclipped = ratio * advantage
    clipped = torch.clamp(ratio, 1 - clip_low, 1 + clip_high) * advantage
    pg = -torch.min(unclipped, clipped)
    k2 = 0.5 * (logp - ref_logp) ** 2
    per_token = pg + beta * k2 - entropy_coef * entropy
    is_clipped = (ratio < 1 - clip_low) | (ratio > 1 + clip_high)
    return DecisionTerms(
        loss=per_token.mean(),
        kl=float(k2.detach().mean()),
        entropy=float(entropy.detach().mean()),
        clipped=float(is_clipped.float().mean()),
        tokens=int(logp.numel()),
    )
