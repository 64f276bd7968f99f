"""Constrained decoding of the asker's decision (#40): every sample is one of the two decisions,
the scaffolding is marked forced, the question ends inside the budget, and a batch samples what
each prompt alone would."""

import json

import pytest

from pipelines.ambitab.protocol.askers import AskerOutput
from tests.lazy_modules import lazy

grammar = lazy("pipelines.ambitab.training.grammar")
local_asker = lazy("pipelines.ambitab.training.local_asker")


def prompts(tokenizer, n):
    out = []
    for i in range(n):
        msgs = [{"role": "user", "content": f"Ask about request {i}: {'which year? ' * (i + 1)}"}]
        ids = tokenizer.apply_chat_template(msgs, add_generation_prompt=True)
        out.append(list(ids["input_ids"] if hasattr(ids, "keys") else ids))
    return out


def test_every_constrained_sample_is_a_decision_and_scaffolding_is_forced(tokenizer, tiny_model):
    budget = grammar.SCAFFOLD_TOKENS + 8
    sample = local_asker.make_sampler(tiny_model, tokenizer, temperature=1.0, max_new_tokens=budget, constrained=True)
    ps = prompts(tokenizer, 2) * 6
    kinds = set()
    for s in sample(ps, list(range(len(ps)))):
        text = tokenizer.decode(s.tokens)
        obj = AskerOutput.model_validate(json.loads(text))  # always the asker's strict JSON
        kinds.add(obj.type)
        assert len(s.tokens) == len(s.forced) == len(s.logp) <= budget
        assert s.forced[0] and not all(s.forced)  # '{"' is scaffolding; the type is chosen
        chosen = tokenizer.decode([t for t, f in zip(s.tokens, s.forced) if not f])
        forced = tokenizer.decode([t for t, f in zip(s.tokens, s.forced) if f])
        assert "type" in forced and "type" not in chosen  # keys are never the policy's choice
        if obj.type == "clarification":
            assert obj.output and obj.output.strip(" ") in text
        assert all(lp <= 0 for lp in s.logp)
    assert kinds == {"done", "clarification"}  # a random policy reaches both decisions


def test_a_batch_samples_what_each_prompt_alone_would(tokenizer, tiny_model):
    sample = local_asker.make_sampler(tiny_model, tokenizer, temperature=1.0, max_new_tokens=24, constrained=True)
    ps = prompts(tokenizer, 3)  # three lengths: left padding in the batch
    together = sample(ps, [7, 8, 9])
    for p, seed, got in zip(ps, [7, 8, 9], together):
        alone = sample([p], [seed])[0]
        assert alone.tokens == got.tokens and alone.forced == got.forced
        assert alone.logp == pytest.approx(got.logp, abs=1e-4)


def test_a_budget_without_room_for_a_question_is_refused(tokenizer):
    with pytest.raises(ValueError, match="no room for a question"):
        grammar.DecisionGrammar(tokenizer, grammar.SCAFFOLD_TOKENS)
    # the message names what the question form needs (it named the scaffold's 16 for both forms)
    with pytest.raises(
        ValueError, match=rf"'query_span' form needs at least {grammar.SCAFFOLD_TOKENS + grammar.SPAN_TOKENS + 4}\b"
    ):
        grammar.DecisionGrammar(tokenizer, grammar.SCAFFOLD_TOKENS + 1, question="query_span")
    grammar.DecisionGrammar(
        tokenizer, grammar.SCAFFOLD_TOKENS + grammar.SPAN_TOKENS + 4, question="query_span"
    )  # the least that fits


def test_free_questions_never_copy_the_prompts_placeholder(tokenizer):
    g = grammar.DecisionGrammar(tokenizer, 48)
    for text, ok in [
        ('{"type": "clarification", "output": "Which year do you mean?"}', True),
        ('{"type": "clarification", "output": "[YOUR-ONLY-ONE-QUESTION]"}', False),
        ('{"type": "clarification", "output": "YOUR-ONLY-ONE-QUESTION"}', False),
    ]:
        m = g.matcher()
        took = all(m.consume_token(t) for t in tokenizer.encode(text, add_special_tokens=False))
        assert (took and m.is_stopped()) == ok, text


def test_query_span_questions_quote_a_phrase_of_the_query(tokenizer, tiny_model):
    from pipelines.ambitab.protocol.text import quoted_spans

    query = 'What film categories does each "film festival" offer?'
    sample = local_asker.make_sampler(tiny_model, tokenizer, 1.0, 48, constrained=True, question="query_span")
    ps = prompts(tokenizer, 1) * 16
    asked = 0
    for s in sample(ps, list(range(16)), [query] * 16):
        obj = AskerOutput.model_validate(json.loads(tokenizer.decode(s.tokens)))
        if obj.type == "clarification":
            asked += 1
            (_, span), *rest = quoted_spans(obj.output)
            assert obj.output.startswith("What do you mean by") and not rest
            assert span in "what film categories does each film festival offer"  # words of the query
            assert 0 < len(span.split()) <= 6
    assert asked  # a random policy asks some of the time
    with pytest.raises(ValueError, match="needs the user query"):
        sample(ps[:1], [0])
