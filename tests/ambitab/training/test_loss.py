"""Eq. 6 against a brute-force per-token reference, and the token log-probabilities against a
prefix-by-prefix forward pass (only the asker's own tokens are scored)."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.lazy_modules import lazy

torch = lazy("torch")
loss = lazy("pipelines.ambitab.training.loss")


def brute_force(logp, old, ref, ent, a, lo=0.2, hi=0.28, beta=0.1, c=0.01):
    """ℓ_jt written out token by token in floats, averaged over the decision's tokens."""
    total, clipped = 0.0, 0
    for lp, o, r, h in zip(logp, old, ref, ent):
        rho = math.exp(lp - o)
        pg = -min(rho * a, min(max(rho, 1 - lo), 1 + hi) * a)
        total += pg + beta * 0.5 * (lp - r) ** 2 - c * h
        clipped += rho < 1 - lo or rho > 1 + hi
    return total / len(logp), clipped / len(logp)


floats = st.floats(-3, 0, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(floats, floats, floats, st.floats(0, 5)), min_size=1, max_size=12),
    st.floats(-2, 2, allow_nan=False),
)
def test_decision_loss_matches_brute_force(tokens, advantage):
    logp, old, ref, ent = (torch.tensor([t[i] for t in tokens], dtype=torch.float64) for i in range(4))
    terms = loss.decision_loss(logp, old, ref, ent, advantage)
    want, clip = brute_force(*(x.tolist() for x in (logp, old, ref, ent)), advantage)
    assert float(terms.loss) == pytest.approx(want, rel=1e-9, abs=1e-12)
    assert terms.clipped == pytest.approx(clip)
    assert terms.tokens == len(tokens)


def test_clipping_is_asymmetric_and_stops_the_gradient():
    # ratio 1.5 > 1.28 with A > 0: the clipped branch is the min, its gradient is zero
    lp = torch.tensor([math.log(1.5)], requires_grad=True)
    loss.decision_loss(lp, torch.zeros(1), lp.detach(), torch.zeros(1), 1.0).loss.backward()
    assert float(lp.grad) == pytest.approx(0.0)
    # ratio 1.25 lies inside [0.8, 1.28] (outside a symmetric 0.2 clip): it keeps its gradient −ρA
    lp = torch.tensor([math.log(1.25)], requires_grad=True)
    t = loss.decision_loss(lp, torch.zeros(1), lp.detach(), torch.zeros(1), 1.0)
    t.loss.backward()
    assert float(lp.grad) == pytest.approx(-1.25)
    assert t.clipped == 0.0
    # ratio 0.7 < 0.8 with A < 0: clipped, no gradient
    lp = torch.tensor([math.log(0.7)], requires_grad=True)
    loss.decision_loss(lp, torch.zeros(1), lp.detach(), torch.zeros(1), -1.0).loss.backward()
    assert float(lp.grad) == pytest.approx(0.0)


def test_token_mean_within_a_decision():
    # two tokens with per-token losses 1 and 3 average to 2, whatever the advantage sign convention
    lp = torch.zeros(2)
    ent = torch.tensor([-100.0, -300.0])  # −0.01·H = 1 and 3
    assert float(loss.decision_loss(lp, lp, lp, ent, 0.0).loss) == pytest.approx(2.0)


def test_token_stats_score_exactly_the_completion(tokenizer, tiny_model):
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Which year? The user answered: 2020."}], add_generation_prompt=True
    )
    prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
    completion = tokenizer.encode('{"type": "done", "output": null}', add_special_tokens=False)
    logp, ent = loss.token_stats(tiny_model, prompt, completion, temperature=0.8)
    assert logp.shape == ent.shape == (len(completion),)
    with torch.no_grad():
        for i, tok in enumerate(completion):  # brute force: one forward per prefix
            logits = tiny_model(input_ids=torch.tensor([prompt + completion[:i]])).logits[0, -1] / 0.8
            lsm = torch.log_softmax(logits, -1)
            assert float(logp[i]) == pytest.approx(float(lsm[tok]), abs=1e-4)
            assert float(ent[i]) == pytest.approx(float(-(lsm.exp() * lsm).sum()), abs=1e-4)


def _group(tokenizer):
    """Four decisions behind one long shared prefix, suffixes of different lengths."""

    def chat(*turns):
        msgs = [{"role": "user", "content": "Schema: films(id, title, year, festival). " * 6 + t} for t in turns]
        ids = tokenizer.apply_chat_template(msgs[:1], add_generation_prompt=True)
        return list(ids["input_ids"] if hasattr(ids, "keys") else ids)

    same = chat("Which festival?")
    prompts = [same, same, chat("Which year? The user answered: 2020."), chat("Which title?")]
    completions = [
        tokenizer.encode(t, add_special_tokens=False)
        for t in ('{"type": "done", "output": null}', '{"type": "clarification", "output": "Which one?"}', "x", "ab")
    ]
    return prompts, completions


def test_shared_prefix_gives_the_values_and_gradients_of_one_forward_per_decision(tokenizer, tiny_model):
    from pipelines.ambitab.training.loss import group_token_stats

    prompts, completions = _group(tokenizer)
    weights = [0.3, -1.0, 2.0, 0.7]  # any scalar of the stats: gradients must agree too

    def run(stats):
        tiny_model.zero_grad()
        total = sum(w * (lp.sum() + 0.1 * h.sum()) for w, (lp, h) in zip(weights, stats))
        total.backward()
        return [(lp.detach(), h.detach()) for lp, h in stats], [
            p.grad.clone() for p in tiny_model.parameters() if p.grad is not None
        ]

    alone, g_alone = run([loss.token_stats(tiny_model, p, c, 0.8) for p, c in zip(prompts, completions)])
    grouped, g_grouped = run(group_token_stats(tiny_model, prompts, completions, 0.8))
    for (a, ha), (b, hb), c in zip(alone, grouped, completions):
        assert a.shape == b.shape == (len(c),)
        assert torch.allclose(a, b, atol=1e-4) and torch.allclose(ha, hb, atol=1e-4)
    assert len(g_alone) == len(g_grouped) > 0
    for ga, gb in zip(g_alone, g_grouped):
        assert torch.allclose(ga, gb, atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize("max_tokens", [1, 40, 10_000])  # a row per chunk, a few, all at once
def test_chunked_backward_gives_the_gradients_of_one_forward_per_decision(tokenizer, tiny_model, max_tokens):
    """The training pass runs a group's suffixes a few at a time on a detached copy of the prefix's
    cache and backpropagates the prefix once: the same values and gradients as one full forward
    per decision, whatever the chunking."""
    from pipelines.ambitab.training.loss import backward_group

    prompts, completions = _group(tokenizer)
    weights = [0.3, -1.0, 2.0, 0.7]

    tiny_model.zero_grad()
    alone = [loss.token_stats(tiny_model, p, c, 0.8) for p, c in zip(prompts, completions)]
    sum(w * (lp.sum() + 0.1 * h.sum()) for w, (lp, h) in zip(weights, alone)).backward()
    g_alone = [p.grad.clone() for p in tiny_model.parameters() if p.grad is not None]

    tiny_model.zero_grad()
    seen: dict[int, tuple] = {}

    def chunk_loss(idx, stats):
        for i, (lp, h) in zip(idx, stats):
            seen[i] = (lp.detach(), h.detach())
        return sum(weights[i] * (lp.sum() + 0.1 * h.sum()) for i, (lp, h) in zip(idx, stats))

    backward_group(tiny_model, prompts, completions, 0.8, chunk_loss, max_tokens)
    g_chunked = [p.grad.clone() for p in tiny_model.parameters() if p.grad is not None]
    assert sorted(seen) == [0, 1, 2, 3]
    for i, (lp, h) in enumerate(alone):
        assert torch.allclose(lp.detach(), seen[i][0], atol=1e-4) and torch.allclose(h.detach(), seen[i][1], atol=1e-4)
    assert len(g_alone) == len(g_chunked) > 0
    for ga, gb in zip(g_alone, g_chunked):
        assert torch.allclose(ga, gb, atol=1e-4, rtol=1e-3)


def test_suffix_chunks_pack_rows_up_to_the_padded_budget():
    assert loss.suffix_chunks([5, 3, 7, 2], 14) == [[0, 1], [2, 3]]  # 2x5=10; 3x7>14; 2x7=14
    assert loss.suffix_chunks([20, 1], 10) == [[0], [1]]  # a row wider than the budget runs alone
    assert loss.suffix_chunks([], 10) == []
