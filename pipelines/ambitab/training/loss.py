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

from collections.abc import Callable
from dataclasses import dataclass

from resources.startup import heavy_imports

with heavy_imports():  # torch, transformers, TRL: seconds of import (resources/startup.py)
    import torch
    from transformers import DynamicCache
    from trl.trainer.utils import entropy_from_logits, selective_log_softmax

from pipelines.ambitab.training.prefix import prefix_batch


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


def group_token_stats(model, prompts, completions, temperature: float) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """:func:`token_stats` for several decisions at once, their prompts' shared prefix computed
    once (:mod:`.prefix`: the same values and gradients as one forward per decision); one
    forward per decision when they share no long prefix. Every row's activations are held at
    once: for the reference pass (no grad); the training pass is :func:`backward_group`."""
    seqs = [list(p) + list(c) for p, c in zip(prompts, completions)]
    b = prefix_batch(model, seqs, [len(p) for p in prompts], pad=0)
    if b.cache is None:
        return [token_stats(model, p, c, temperature) for p, c in zip(prompts, completions)]
    return _suffix_stats(model, b.x, b.mask, b.pos, b.cache, completions, temperature)


def _suffix_stats(model, x, mask, pos, cache, completions, temperature: float):
    keep = max(len(c) for c in completions) + 1
    logits = model(
        input_ids=x, attention_mask=mask, position_ids=pos, cache=cache, use_cache=True, logits_to_keep=keep
    ).logits
    width, out = x.shape[1], []
    for i, c in enumerate(completions):
        t = len(c)
        rows = logits[i : i + 1, keep - 1 - t : keep - 1, :].float() / temperature
        out.append((selective_log_softmax(rows, x[i : i + 1, width - t :])[0], entropy_from_logits(rows)[0]))
    return out


def suffix_chunks(widths: list[int], max_tokens: int) -> list[list[int]]:
    """Consecutive rows, as many per chunk as fit ``max_tokens`` padded tokens (at least one)."""
    chunks: list[list[int]] = []
    widest = 0
    for i, w in enumerate(widths):
        if chunks and (len(chunks[-1]) + 1) * max(widest, w) <= max_tokens:
            chunks[-1].append(i)
            widest = max(widest, w)
        else:
            chunks.append([i])
            widest = w
    return chunks


def backward_group(
    model,
    prompts,
    completions,
    temperature: float,
    chunk_loss: Callable[[list[int], list[tuple[torch.Tensor, torch.Tensor]]], torch.Tensor],
    max_tokens: int,
) -> None:
    """Backpropagate Σ ``chunk_loss(idx, stats)`` over chunks of consecutive decisions whose
    suffixes (after the shared prefix, padded to the chunk's widest) hold at most ``max_tokens``
    tokens, one decision at least (``stats``: :func:`token_stats` of decisions ``idx``), the
    shared prefix run forward and backward once. Same gradients as :func:`group_token_stats` + one backward, but only one
    chunk's activations are alive at a time: 14 decisions with 300-token suffixes behind a
    1.5k-token prefix held 17 GiB at once (SmolLM2-135M, float32), every row's attention keys and
    values and MLP activations. How: each chunk runs on a detached copy of the prefix's KV cache
    that collects its gradient; the prefix's graph is backpropagated once with the sum at the end."""
    seqs = [list(p) + list(c) for p, c in zip(prompts, completions)]
    b = prefix_batch(model, seqs, [len(p) for p in prompts], pad=0, repeat=False)
    if b.cache is None:  # no long shared prefix: one forward and backward per decision
        for i, (p, c) in enumerate(zip(prompts, completions)):
            chunk_loss([i], [token_stats(model, p, c, temperature)]).backward()
        return
    kv = [t for layer in b.cache.layers for t in (layer.keys, layer.values)]
    leaves = [t.detach().requires_grad_(t.requires_grad) for t in kv]
    for idx in suffix_chunks([len(s) - b.shared for s in seqs], max_tokens):
        n = len(idx)
        pairs = [(k.expand(n, -1, -1, -1), v.expand(n, -1, -1, -1)) for k, v in zip(leaves[0::2], leaves[1::2])]
        cache = DynamicCache(ddp_cache_data=pairs, config=model.config)
        x, mask, pos = b.rows(idx)
        loss = chunk_loss(idx, _suffix_stats(model, x, mask, pos, cache, [completions[i] for i in idx], temperature))
        if loss.requires_grad:
            loss.backward()
    grads = [(t, leaf.grad) for t, leaf in zip(kv, leaves) if t.requires_grad and leaf.grad is not None]
    if grads:
        torch.autograd.backward([t for t, _ in grads], [g for _, g in grads])


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
