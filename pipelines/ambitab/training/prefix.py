"""Batches of sequences that share a long prefix, the prefix computed once (#40).

The K trajectories of a request see the same ~1.6k-token prompt at turn 1 and prompts that
differ only in their last turns later, so most of every forward pass is the same prefix. The
prefix runs once (with its autograd graph when grad is on), its KV cache is repeated for each
row, and the rows' suffixes follow left-padded, so each row ends at the last column: the same
values as one forward per sequence at a fraction of the compute. Used by the rollout sampler and
the loss.
"""

from dataclasses import dataclass

import torch

SHARED_PREFIX_MIN = 32  # tokens: below this, the sequences run whole


def common_prefix(seqs) -> int:
    """Length of the longest prefix all of ``seqs`` share."""
    first, n = seqs[0], min(len(s) for s in seqs)
    for s in seqs[1:]:
        i = 0
        while i < n and s[i] == first[i]:
            i += 1
        n = i
    return n


@dataclass
class PrefixBatch:
    x: torch.Tensor  # rows × width: each row's suffix, left-padded
    mask: torch.Tensor  # rows × (shared + width): the prefix, then the suffix's real tokens
    pos: torch.Tensor  # rows × width: position ids of the suffix tokens
    cache: object | None  # the prefix's KV cache, one copy per row (one in all when not repeated; None: no prefix)
    shared: int  # prefix length

    def rows(self, idx: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The suffix input, mask and positions of rows ``idx``, cut to their own widest suffix."""
        sel = torch.tensor(idx, device=self.x.device)
        real = self.mask[sel, self.shared :]
        cut = int(real.any(0).nonzero()[0])  # left padding: the chunk's first real column
        mask = torch.cat([self.mask[sel, : self.shared], real[:, cut:]], dim=1)
        return self.x[sel, cut:], mask, self.pos[sel, cut:]


def prefix_batch(model, seqs, prompt_lens, pad: int, repeat: bool = True) -> PrefixBatch:
    """``seqs`` as one batch whose shared prefix (within every prompt, leaving each row at least
    one prompt token) has run through ``model`` once. Shared = 0, no cache, when that prefix is
    under SHARED_PREFIX_MIN tokens, there is one row, or the model keeps no cache (gradient
    checkpointing in training). ``repeat=False`` leaves the cache at one row (the caller expands
    it for the rows it runs: the loss runs a group's rows a few at a time)."""
    n, device = len(seqs), next(model.parameters()).device
    shared = min(common_prefix(seqs), min(prompt_lens) - 1) if n > 1 else 0
    cache = None
    if shared >= SHARED_PREFIX_MIN:
        out = model(input_ids=torch.tensor([list(seqs[0][:shared])], device=device), use_cache=True, logits_to_keep=1)
        cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
    if cache is None:
        shared = 0
    elif repeat:
        cache.batch_repeat_interleave(n)
    width = max(len(s) for s in seqs) - shared
    x = torch.full((n, width), pad, dtype=torch.long)
    mask = torch.zeros((n, shared + width), dtype=torch.long)
    mask[:, :shared] = 1
    for i, s in enumerate(seqs):
        rest = len(s) - shared
        x[i, width - rest :] = torch.tensor(list(s[shared:]))
        mask[i, shared + width - rest :] = 1
    pos = shared + (mask[:, shared:].cumsum(-1) - 1).clamp(min=0)
    return PrefixBatch(x.to(device), mask.to(device), pos.to(device), cache, shared)
