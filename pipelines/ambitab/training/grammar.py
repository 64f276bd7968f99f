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
import json
import re

import torch
from llguidance import LLMatcher, LLTokenizer
from llguidance.hf import from_tokenizer
from llguidance.torch import allocate_token_bitmask, fill_next_token_bitmask

_HEAD = r"""
start: "{\"type\": \"" decision
decision: "done\", \"output\": null}" | "clarification\", \"output\": \"" question "\"}"
"""
# "free": one JSON string body (no quote, backslash or control character) that starts with a
# letter and holds no brackets, and never the prompt's placeholder: SmolLM2 copied the example's
# "[YOUR-ONLY-ONE-QUESTION]" as its question (reward 0, no signal) when left free.
_FREE = r"""question[max_tokens=%d]: /[A-Za-z][^"\\\x00-\x1f\[\]{}<>]*/ & ~/(?i).*(your.only|only.one.question).*/
"""
# "query_span": What do you mean by "<words of the user query>"? -- the policy chooses whether to
# ask and which span; the words are the query's (a 135M model's free questions named no part
# of the query: 0 of 12 credited, #40)
_SPAN = r"""question: "What do you mean by \\\"" SPAN "\\\"?"
SPAN: %s
"""
QUESTION_FORMS = ("free", "query_span")

SCAFFOLD_TOKENS = 16  # tokens the grammar's fixed text can take around the question
SPAN_TOKENS = 10  # the fixed words around a query_span question
SPAN_MAX_WORDS = 6  # a phrase of the query, never the whole query (which names every ambiguity)


@functools.lru_cache(maxsize=4)
def _ll_tokenizer(tokenizer) -> LLTokenizer:
    return from_tokenizer(tokenizer)  # ~0.3 s; once per tokenizer


class DecisionGrammar:
    """The decision grammar for one tokenizer and token budget; ``matcher()`` starts a decision."""

    def __init__(self, tokenizer, max_new_tokens: int, question: str = "free"):
        if question not in QUESTION_FORMS:
            raise ValueError(f"question form must be one of {', '.join(QUESTION_FORMS)}, got {question!r}")
        needed = SCAFFOLD_TOKENS + 1 + (SPAN_TOKENS + 3 if question == "query_span" else 0)
        if max_new_tokens < needed:
            raise ValueError(
                f"max_new_tokens {max_new_tokens} leaves no room for a question: the {question!r} form "
                f"needs at least {needed} (the decision's JSON takes up to {SCAFFOLD_TOKENS} tokens)"
            )
        self.ll, self.tokenizer = _ll_tokenizer(tokenizer), tokenizer
        self.question, self.budget = question, max_new_tokens - SCAFFOLD_TOKENS
        self.grammar = LLMatcher.grammar_from_lark(_HEAD + _FREE % self.budget) if question == "free" else None
        self.vocab = self.ll.vocab_size

    @functools.lru_cache(maxsize=512)  # noqa: B019 (one grammar per query; the object lives as long as its sampler)
    def _span_grammar(self, query: str) -> str:
        # the query's words, punctuation dropped (a span is words, never a lone "?"; no quote or
        # backslash can reach the JSON)
        words = re.sub(r"[^\w'.%-]|(?<!\w)[.'%-]|[.'-](?!\w)", " ", query).split()
        room = self.budget - SPAN_TOKENS - 1  # a span that could overrun the token budget is left out
        spans = sorted(
            x
            for x in {" ".join(words[i:j]) for i in range(len(words)) for j in range(i + 1, i + 1 + SPAN_MAX_WORDS)}
            if len(self.tokenizer.encode(x, add_special_tokens=False)) <= room
        )
        if not spans:
            raise ValueError(f"the query_span question form needs a query with words, got {query!r}")
        return LLMatcher.grammar_from_lark(_HEAD + _SPAN % " | ".join(json.dumps(x) for x in spans))

    def matcher(self, query: str | None = None) -> LLMatcher:
        """A matcher for one decision; ``query`` (the user query) is required by "query_span"."""
        if self.question == "query_span":
            if not query or not query.strip():
                raise ValueError("the query_span question form needs the user query")
            grammar = self._span_grammar(query)
        else:
            grammar = self.grammar
        m = LLMatcher(self.ll, grammar)
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
