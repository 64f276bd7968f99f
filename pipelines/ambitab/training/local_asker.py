"""The asker served locally from a transformers model (the policy in training, a checkpoint in
evaluation) behind the same :class:`Asker` interface the episode code calls, so rollouts for
training and episodes for ``ambitab eval`` run one code path (same prompt, parser, budget).

Each decision samples at the preset's temperature from a generator seeded by (run seed, record,
seed, turn): a rerun reproduces it. The sampled token ids are logged for the trainer; the output
is read with the council's parser (``parse_structured``) into the asker's strict JSON, and anything
unreadable is a fallback stop, as for the LLM asker.
"""

import hashlib
from collections.abc import Callable

import torch

from pipelines.ambitab.protocol.askers import Asker, AskerDecision, AskerInput, AskerOutput, decision_from_output
from pipelines.ambitab.protocol.prompts import DEFAULT_ASKER_PROMPT, asker_messages
from pipelines.ambitab.training.decisions import Decision
from resources.llm.parsing import parse_structured


def prompt_ids(tokenizer, messages: list[dict], max_prompt_tokens: int) -> list[int]:
    # thinking off (Table 11); templates without the switch ignore the keyword
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, enable_thinking=False, tokenize=True)
    if hasattr(ids, "keys"):  # transformers 5 returns a BatchEncoding
        ids = ids["input_ids"]
    ids = list(ids)
    if len(ids) > max_prompt_tokens:
        raise ValueError(f"asker prompt of {len(ids)} tokens exceeds the context of {max_prompt_tokens}")
    return ids


def decision_seed(run_seed: int, inp: AskerInput) -> int:
    key = f"{run_seed}|{inp.tag.get('record_id', '')}|{inp.seed}|{inp.turn}"
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") >> 1


class LocalAsker(Asker):
    def __init__(
        self,
        model,
        tokenizer,
        *,
        name: str,
        model_key: str,
        temperature: float = 0.8,
        max_new_tokens: int = 256,
        max_prompt_tokens: int = 32768,
        run_seed: int = 0,
        prompt: str = DEFAULT_ASKER_PROMPT,
        log: Callable[[Decision], None] | None = None,
    ):
        self.model, self.tokenizer = model, tokenizer
        self.name, self.model_key, self.prompt = name, model_key, prompt
        self.temperature, self.max_new_tokens, self.max_prompt_tokens = temperature, max_new_tokens, max_prompt_tokens
        self.run_seed, self.log = run_seed, log

    def generate(self, ids: list[int], seed: int) -> list[int]:
        device = next(self.model.parameters()).device
        gen = torch.Generator(device="cpu").manual_seed(seed)
        eos = self.tokenizer.eos_token_id
        past, out = None, []
        x = torch.tensor([ids], device=device)
        # a plain sampling loop with the KV cache: generate() takes no per-call generator, and a
        # per-decision seed is what makes a rollout reproducible whatever ran before it
        with torch.no_grad():
            for _ in range(self.max_new_tokens):
                o = self.model(input_ids=x, cache=past, use_cache=True)
                past = o.cache
                logits = o.logits[0, -1].float().cpu()
                if self.temperature > 0:
                    probs = torch.softmax(logits / self.temperature, dim=-1)
                    tok = int(torch.multinomial(probs, 1, generator=gen))
                else:
                    tok = int(torch.argmax(logits))
                out.append(tok)
                if tok == eos:
                    break
                x = torch.tensor([[tok]], device=device)
        return out

    async def decide(self, inp: AskerInput) -> AskerDecision:
        messages = asker_messages(self.prompt, inp.spec, list(inp.history), inp.turn, inp.max_turns)
        ids = prompt_ids(self.tokenizer, messages, self.max_prompt_tokens)
        was_training = self.model.training
        self.model.eval()
        try:
            completion = self.generate(ids, decision_seed(self.run_seed, inp))
        finally:
            self.model.train(was_training)
        if self.log is not None:
            self.log(Decision(str(inp.tag.get("episode_id", "")), inp.turn, tuple(ids), tuple(completion)))
        text = self.tokenizer.decode(completion, skip_special_tokens=True)
        parsed = parse_structured(text, AskerOutput)
        if not parsed.ok:
            return AskerDecision("fallback", raw=text, reason=f"unparseable asker output: {parsed.error}")
        return decision_from_output(parsed.value, raw=text)
