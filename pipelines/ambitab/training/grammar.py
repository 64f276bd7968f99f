"""The asker's decision under its JSON schema (constrained decoding with llguidance, #40).

A small model rarely writes the asker's strict JSON on its own, so every reward is 0 and nothing
is learned. Decoding under a grammar makes every output one of the two decisions the episode
code reads::

    {"type": "done", "output": null}
    {"type": "clarification", "output": "<question>"}

The policy chooses the decision type and the question's words; the scaffolding (braces, keys,
quotes) has one allowed token at each of its steps. Those *forced* tokens are recorded and kept
out of the loss and the entropy term (:mod:`.loss`): only tokens the policy chose carry gradient.
The question is limited to ``max_question_tokens`` (the grammar closes it then), so a decision
always ends inside the token budget.
"""

import functools

import torch
from llguidance import LLMatcher, LLTokenizer
from llguidance.hf import from_tokenizer
from llguidance.torch import allocate_token_bitmask, fill_next_token_bitmask

# the question is one JSON string body: no quote, backslash or control character
_LARK = r"""
start: "{\"type\": \"" decision
decision: "done\", \"output\": null}" | "clarification\", \"output\": \"" question "\"}"
question[max_tokens=%d]: /[^"\\\x00-\x1f]+/
"""

SCAFFOLD_TOKENS = 16  # tokens the grammar's fixed text can take around the question


@functools.lru_cache(maxsize=4)
def _ll_tokenizer(tokenizer) -> LLTokenizer:
    return from_tokenizer(tokenizer)  # ~0.3 s; once per tokenizer


class DecisionGrammar:
    """The decision grammar for one tokenizer and token budget; ``matcher()`` starts a decision."""

    def __init__(self, tokenizer, max_new_tokens: int):
        if max_new_tokens < SCAFFOLD_TOKENS + 1:
            raise ValueError(
                f"max_new_tokens {max_new_tokens} leaves no room for a question "
                f"(the decision's JSON takes up to {SCAFFOLD_TOKENS} tokens)"
            )
        self.ll = _ll_tokenizer(tokenizer)
        self.grammar = LLMatcher.grammar_from_lark(_LARK % (max_new_tokens - SCAFFOLD_TOKENS))
        self.vocab = self.ll.vocab_size

    def matcher(self) -> LLMatcher:
        m = LLMatcher(self.ll, self.grammar)
        if m.is_error():
            raise ValueError(f"decision grammar: {m.get_error()}")
        return m


class MaskedStep:
    """Masks a batch's next-token logits to what each row's matcher allows (in place)."""

    def __init__(self, rows: int, vocab: int):
        self.vocab = vocab
        self.bitmask = allocate_token_bitmask(rows, vocab)
        self._shifts = torch.arange(32, dtype=torch.int32)

    def apply(self, logits: torch.Tensor, matchers: list) -> list[int]:
        """Mask ``logits`` (rows × V, float, CPU) for the rows whose matcher is not None; returns
        each row's number of allowed tokens (1 = a forced token; 0 for rows without a matcher).
        Logit columns past the tokenizer's vocabulary (padding rows of the embedding) are never
        allowed."""
        self.bitmask.fill_(-1)
        for i, m in enumerate(matchers):
            if m is not None:
                fill_next_token_bitmask(m, self.bitmask, i)
        # bits -> booleans here rather than llguidance's apply kernel, which is torch.compile'd
        # (a compiler run on first use, on a CPU machine)
        n = min(self.vocab, logits.shape[-1])
        allowed = ((self.bitmask.unsqueeze(-1) >> self._shifts) & 1).flatten(1)[:, :n].bool()
        logits[:, :n].masked_fill_(~allowed, float("-inf"))
        logits[:, n:] = float("-inf")
        counts = allowed.sum(-1).tolist()
        return [int(c) if m is not None else 0 for c, m in zip(counts, matchers)]
