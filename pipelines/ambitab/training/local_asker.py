"""The asker served locally from a transformers model (the policy in training, a checkpoint in
evaluation) behind the same :class:`Asker` interface the episode code calls, so rollouts for
training and episodes for ``ambitab eval`` run one code path (same prompt, parser, budget).

Each decision samples at the preset's temperature from a generator seeded by (run seed, record,
seed, turn): a rerun reproduces it. With ``constrained`` (the default) the decision is decoded
under its JSON grammar (:mod:`.grammar`), so it is always readable; the tokens the grammar forced
are logged as such and carry no gradient. The sampled token ids are logged for the trainer; the
output is read with the council's parser (``parse_structured``) into the asker's strict JSON, and
anything unreadable is a fallback stop, as for the LLM asker.

Decisions that are pending at the same time (the K trajectories of one request, rolled out
together) are sampled in one batched forward pass per token (:class:`DecisionBatcher`).
"""

import asyncio
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from pipelines.ambitab.protocol.askers import Asker, AskerDecision, AskerInput, AskerOutput, decision_from_output
from pipelines.ambitab.protocol.episode import RunSettings, arun_episodes
from pipelines.ambitab.protocol.oracles import Oracle
from pipelines.ambitab.protocol.prompts import DEFAULT_ASKER_PROMPT, asker_messages
from pipelines.ambitab.protocol.solver import Solver
from pipelines.ambitab.protocol.task import Task
from pipelines.ambitab.protocol.verifier import Verifier
from pipelines.ambitab.training.decisions import Decision
from resources.llm.parsing import parse_structured
from resources.llm.runtime import run_sync


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


@dataclass(frozen=True)
class Sampled:
    tokens: tuple[int, ...]
    forced: tuple[bool, ...]  # True where the grammar allowed one token only
    logp: tuple[float, ...]  # log π(y_t) under the sampling policy (temperature-scaled, unmasked)


@dataclass(frozen=True)
class Sampler:
    """Samples completions for a batch of prompts: one forward pass per token for the whole batch
    (left-padded, KV cache, logits of the last position only)."""

    model: object
    tokenizer: object
    temperature: float
    max_new_tokens: int
    grammar: object | None = None  # a DecisionGrammar, or None for free decoding up to EOS

    def __call__(
        self, prompts: list[list[int]], seeds: list[int], queries: list[str | None] | None = None
    ) -> list[Sampled]:
        """``queries``: each prompt's user query (the query_span grammar's words)."""
        from pipelines.ambitab.training.grammar import MaskedStep
        from pipelines.ambitab.training.prefix import prefix_batch

        model, n = self.model, len(prompts)
        device = next(model.parameters()).device
        gens = [torch.Generator(device="cpu").manual_seed(s) for s in seeds]
        eos = self.tokenizer.eos_token_id
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else eos
        queries = queries or [None] * n
        matchers = [self.grammar.matcher(q) for q in queries] if self.grammar else [None] * n
        step = MaskedStep(n, self.grammar.vocab) if self.grammar else None
        out: list[list[int]] = [[] for _ in prompts]
        forced: list[list[bool]] = [[] for _ in prompts]
        logps: list[list[float]] = [[] for _ in prompts]
        live = [True] * n
        # a plain sampling loop: generate() takes no per-row generator, and a per-decision seed is
        # what makes a rollout reproducible whatever ran before it or beside it in the batch
        with torch.no_grad():
            # the prompts' shared prefix (a request's trajectories: the whole prompt at turn 1,
            # all but the last turns later) is prefilled once, its KV cache repeated per row
            b = prefix_batch(model, prompts, [len(p) for p in prompts], pad)
            x, mask, pos, cache = b.x, b.mask, b.pos, b.cache
            for _ in range(self.max_new_tokens):
                o = model(
                    input_ids=x, attention_mask=mask, position_ids=pos, cache=cache, use_cache=True, logits_to_keep=1
                )
                cache = o.cache
                logits = o.logits[:, -1].float().cpu()
                # π_old of Eq. 6: the model's own distribution at the rollout temperature, as the
                # trainer recomputes π_φ (the grammar's renormalisation is not part of either)
                lsm = torch.log_softmax(logits / max(self.temperature, 1e-6), dim=-1)
                counts = step.apply(logits, [m if live[i] else None for i, m in enumerate(matchers)]) if step else None
                nxt = []
                for i in range(n):
                    if not live[i]:
                        nxt.append(pad)
                        continue
                    if counts is not None and counts[i] == 1:
                        tok = int(torch.argmax(logits[i]))  # the grammar's only choice
                    elif self.temperature > 0:
                        probs = torch.softmax(logits[i] / self.temperature, dim=-1)
                        tok = int(torch.multinomial(probs, 1, generator=gens[i]))
                    else:
                        tok = int(torch.argmax(logits[i]))
                    out[i].append(tok)
                    forced[i].append(counts is not None and counts[i] == 1)
                    logps[i].append(float(lsm[i, tok]))
                    if matchers[i] is not None:
                        if not matchers[i].consume_token(tok):
                            raise RuntimeError(f"decision grammar refused its own token: {matchers[i].get_error()}")
                        done = matchers[i].is_stopped()
                    else:
                        done = tok == eos
                    if done:
                        live[i] = False
                    nxt.append(tok)
                if not any(live):
                    break
                x = torch.tensor(nxt, device=device).unsqueeze(-1)
                mask = torch.cat([mask, torch.ones((n, 1), dtype=mask.dtype, device=device)], dim=-1)
                pos = pos[:, -1:] + 1
        return [Sampled(tuple(o), tuple(f), tuple(lp)) for o, f, lp in zip(out, forced, logps)]


class DecisionBatcher:
    """Collects the decisions of episodes running concurrently and samples them in one batch.

    ``live`` is the number of episodes still running (the caller lowers it with ``episode_done``);
    a batch is sampled when every live episode is waiting for a decision, so K trajectories of a
    request advance turn by turn together, and an episode that ended early never stalls the rest."""

    def __init__(self, sampler: Sampler, live: int):
        self.sampler, self.live = sampler, live
        self.pending: list[tuple[list[int], int, str | None, asyncio.Future]] = []

    async def sample(self, ids: list[int], seed: int, query: str | None = None) -> Sampled:
        fut = asyncio.get_running_loop().create_future()
        self.pending.append((ids, seed, query, fut))
        self._maybe_flush()
        return await fut

    def episode_done(self) -> None:
        self.live -= 1
        self._maybe_flush()

    def _maybe_flush(self) -> None:
        if not self.pending or len(self.pending) < self.live:
            return
        batch, self.pending = self.pending, []
        try:
            results = self.sampler([b[0] for b in batch], [b[1] for b in batch], [b[2] for b in batch])
        except BaseException as exc:  # every waiting episode sees the failure
            for *_, fut in batch:
                fut.set_exception(exc)
            return
        for (*_, fut), r in zip(batch, results):
            fut.set_result(r)


def batched_episodes(
    requests: Sequence[Task],
    make_asker: Callable[[DecisionBatcher], Asker],
    sampler: Sampler,
    oracle: Oracle,
    solver: Solver,
    verifier: Verifier,
    seeds: Sequence[int],
    settings: RunSettings,
) -> list[dict]:
    """The episodes of every request for ``seeds``, a request's episodes sampled together (one
    batched forward pass per token across them, the prompt's shared prefix once): the trainer's
    K trajectories, or S evaluation seeds of a checkpoint at the cost of about one."""
    rows: list[dict] = []
    for req in requests:
        batcher = DecisionBatcher(sampler, live=len(seeds))
        rows += run_sync(
            arun_episodes(
                [req],
                lambda b=batcher: make_asker(b),
                oracle,
                solver,
                verifier,
                seeds,
                settings=settings,
                concurrency=len(seeds),
                progress=lambda done, total, b=batcher: b.episode_done(),
            )
        )
    return rows


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
        constrained: bool = True,
        question: str = "free",
        log: Callable[[Decision], None] | None = None,
        batcher: DecisionBatcher | None = None,
    ):
        self.model, self.tokenizer = model, tokenizer
        self.name, self.model_key, self.prompt = name, model_key, prompt
        self.temperature, self.max_new_tokens, self.max_prompt_tokens = temperature, max_new_tokens, max_prompt_tokens
        self.run_seed, self.log, self.batcher = run_seed, log, batcher
        self.constrained, self.question = constrained, question

    def sampler(self) -> Sampler:
        return make_sampler(
            self.model, self.tokenizer, self.temperature, self.max_new_tokens, self.constrained, self.question
        )

    async def decide(self, inp: AskerInput) -> AskerDecision:
        messages = asker_messages(self.prompt, inp.spec, list(inp.history), inp.turn, inp.max_turns)
        ids = prompt_ids(self.tokenizer, messages, self.max_prompt_tokens)
        seed = decision_seed(self.run_seed, inp)
        was_training = self.model.training
        self.model.eval()
        try:
            if self.batcher is not None:
                s = await self.batcher.sample(ids, seed, inp.spec.user_query)
            else:
                s = self.sampler()([ids], [seed], [inp.spec.user_query])[0]
        finally:
            self.model.train(was_training)
        if self.log is not None:
            self.log(
                Decision(
                    str(inp.tag.get("episode_id", "")), inp.turn, tuple(ids), s.tokens, forced=s.forced, old_logp=s.logp
                )
            )
        text = self.tokenizer.decode(s.tokens, skip_special_tokens=True)
        parsed = parse_structured(text, AskerOutput)
        if not parsed.ok:
            return AskerDecision("fallback", raw=text, reason=f"unparseable asker output: {parsed.error}")
        return decision_from_output(parsed.value, raw=text)


def make_sampler(
    model, tokenizer, temperature: float, max_new_tokens: int, constrained: bool, question: str = "free"
) -> Sampler:
    grammar = None
    if constrained:
        from pipelines.ambitab.training.grammar import DecisionGrammar

        grammar = DecisionGrammar(tokenizer, max_new_tokens, question)
    return Sampler(model, tokenizer, temperature, max_new_tokens, grammar)
