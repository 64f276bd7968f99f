"""The trainer on a tiny random Llama with the real tokenizer: the gradient of one update against a
brute-force Eq. 6, the stop-only decision, checkpoints that never overwrite another run, and a
resumed run that ends where an uninterrupted one does."""

import json
from dataclasses import replace

import pytest

from pipelines.ambitab.protocol.episode import RunSettings
from pipelines.ambitab.protocol.oracles import deterministic_oracle_for
from pipelines.ambitab.training.checkpoints import new_run_dir, resolve_checkpoint
from pipelines.ambitab.training.decisions import Decision
from pipelines.ambitab.training.presets import get_preset
from tests.ambitab.records import amb, task
from tests.lazy_modules import lazy

torch = lazy("torch")
trainer = lazy("pipelines.ambitab.training.trainer")

TASKS = [task([amb("top"), amb("earners")], query="List the top earners."), task([], query="All rows.", db_id="d2")]


def preset(**kw):
    base = dict(
        requests_per_rollout=2,
        trajectories=2,
        max_new_tokens=20,
        updates=4,
        checkpoint_every=1,
        seed=3,
        question="free",
    )
    return get_preset("cpu-small", **{**base, **kw})


def make(tmp_path, tokenizer, model, **kw):
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    return trainer.Trainer(
        preset(**kw), TASKS, deterministic_oracle_for("ambrosia"), run, model, tokenizer, model_ref="tiny"
    )


def _perturb(tr):
    with torch.no_grad():  # move the adapter off its zero init so π_φ ≠ π_ref
        for n, p in tr.policy.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.05)


def _brute_force_grads(tr, decisions):
    """Eq. 6 written out: full-vocabulary log-softmax, only the tokens the policy chose, π_old =
    the sampler's log-probs when recorded (else detached π_φ)."""
    tr.policy.zero_grad()
    total = 0
    for d in decisions:
        ids = torch.tensor([list(d.prompt_ids + d.completion_ids)])
        n = len(d.prompt_ids)
        logits = tr.policy(input_ids=ids).logits[0, n - 1 : -1] / 0.8
        lsm = torch.log_softmax(logits, -1)
        with tr.policy.disable_adapter(), torch.no_grad():
            ref = torch.log_softmax(tr.policy(input_ids=ids).logits[0, n - 1 : -1] / 0.8, -1)
        idx = torch.tensor(d.completion_ids)
        lp, rp = lsm[range(len(idx)), idx], ref[range(len(idx)), idx]
        old = torch.tensor(d.old_logp) if d.old_logp else lp.detach()
        rho = torch.exp(lp - old)
        pg = -torch.minimum(rho * d.advantage, rho.clamp(0.8, 1.28) * d.advantage)
        h = -(lsm.exp() * lsm).sum(-1)
        keep = [i for i, c in enumerate(d.chosen) if c]
        if keep:
            total = total + (pg + 0.1 * 0.5 * (lp - rp) ** 2 - 0.01 * h)[keep].mean()
    (total / 24).backward()  # cpu-small's nominal B
    return {n: p.grad.clone() for n, p in tr.policy.named_parameters() if p.requires_grad}


def _grads(tr, decisions):
    tr.policy.zero_grad()
    stats = tr.accumulate(decisions)
    return stats, {
        n: torch.zeros_like(p) if p.grad is None else p.grad.clone()
        for n, p in tr.policy.named_parameters()
        if p.requires_grad
    }


def test_gradient_matches_brute_force_eq6(tmp_path, tokenizer, tiny_model):
    tr = make(tmp_path, tokenizer, tiny_model)
    _perturb(tr)
    decisions = [Decision("e", 1, (1, 2, 3, 4), (5, 6, 7), 1.3), Decision("e", 2, (1, 9), (10, 11), -0.4)]
    _, got = _grads(tr, decisions)
    want = _brute_force_grads(tr, decisions)
    for n, g in want.items():
        assert torch.allclose(got[n], g, atol=1e-6, rtol=1e-4), n


def test_forced_tokens_carry_no_gradient(tmp_path, tokenizer, tiny_model):
    tr = make(tmp_path, tokenizer, tiny_model)
    _perturb(tr)
    masked = [
        Decision("e", 1, (1, 2, 3, 4), (5, 6, 7, 8), 1.3, forced=(True, False, True, False)),
        Decision("e", 2, (1, 9), (10, 11), -0.4, forced=(True, True)),  # nothing chosen: no term
    ]
    stats, got = _grads(tr, masked)
    want = _brute_force_grads(tr, masked)
    for n, g in want.items():
        assert torch.allclose(got[n], g, atol=1e-6, rtol=1e-4), n
    assert stats["tokens"] == 2  # the two chosen tokens only
    _, unmasked = _grads(tr, [replace(d, forced=()) for d in masked])
    assert any(not torch.allclose(unmasked[n], got[n]) for n in got)  # the mask changes the gradient
    _, none = _grads(tr, masked[1:])
    assert all(float(g.abs().max()) == 0.0 for g in none.values())


def test_the_clip_bounds_the_ratio_to_the_sampling_policy(tmp_path, tokenizer, tiny_model):
    """π_old ≠ π_φ (the sampler's log-probs recorded on other weights): tokens whose ratio left
    [0.8, 1.28] in the advantage's direction stop carrying the policy-gradient term."""
    tr = make(tmp_path, tokenizer, tiny_model)
    _perturb(tr)
    prompt, completion = (1, 2, 3, 4), (5, 6, 7, 8)
    from pipelines.ambitab.training.loss import token_stats

    with torch.no_grad():
        now = token_stats(tr.policy, prompt, completion, 0.8)[0].tolist()
    # ratios e^0.5 (clipped high), e^-0.5 (below 0.8: clipped only for A < 0), 1.1 and 1 (inside)
    old = (now[0] - 0.5, now[1] + 0.5, now[2] - 0.0953, now[3])
    for adv in (1.0, -1.0):
        d = Decision("e", 1, prompt, completion, adv, old_logp=old)
        stats, got = _grads(tr, [d])
        want = _brute_force_grads(tr, [d])
        for n, g in want.items():
            assert torch.allclose(got[n], g, atol=1e-6, rtol=1e-4), n
        assert stats["clip_fraction"] == pytest.approx(0.5)  # both out-of-range tokens count
        _, unclipped = _grads(tr, [replace(d, old_logp=())])
        assert any(not torch.allclose(unclipped[n], got[n]) for n in got)


def test_clear_requests_get_one_decision_and_the_budget_is_amb_plus_two(tmp_path, tokenizer, tiny_model):
    s = RunSettings(skip_clear=False, stop_only_clear=True)
    assert (s.decisions(0), s.decisions(2)) == (1, 5)
    assert s.options != RunSettings(skip_clear=False).options  # a different episode key
    tr = make(tmp_path, tokenizer, tiny_model)
    rows, log = tr.rollout(0)
    assert len(rows) == 4  # 2 requests × K = 2
    clear = [r for r in rows if r["n_amb"] == 0]
    assert clear and all(not r["skipped_clarification"] for r in clear)
    for r in clear:
        assert [d.turn for d in log if d.episode_id == r["episode_id"]] == [1]
    assert all(len([d for d in log if d.episode_id == r["episode_id"]]) <= 5 for r in rows)


def _adapter(tr):
    return {n: p.detach().clone() for n, p in tr.policy.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("rule", ["skip", "keep_one"])
def test_a_batch_without_signal_is_stepped_only_under_the_specs_keep_one_rule(tmp_path, tokenizer, tiny_model, rule):
    """Every reward equal (no group's rewards differ): "keep_one" (the spec) still steps on the kept
    group's KL and entropy terms; "skip" (cpu-small) leaves the adapter and AdamW's moments alone,
    records no KL, and the schedule still advances."""
    run = tmp_path / "run"
    run.mkdir()
    tr = trainer.Trainer(
        preset(zero_signal=rule, warmup=0.0),
        TASKS,
        deterministic_oracle_for("ambrosia"),
        run,
        tiny_model,
        tokenizer,
        model_ref="tiny",
        reward_fn=lambda row: 0.5,
    )
    _perturb(tr)  # so the kept group's KL term has a gradient
    before, lr0 = _adapter(tr), tr.sched.get_last_lr()[0]
    s = tr.step()
    after = _adapter(tr)
    moved = any(not torch.equal(before[n], after[n]) for n in before)
    assert tr.sched.get_last_lr()[0] < lr0  # the cosine schedule advanced either way
    if rule == "skip":
        assert not s.stepped and not moved and s.kl is None and s.entropy is None and s.grad_norm is None
        assert tr.opt.state == {} or all(int(st["step"]) == 0 for st in tr.opt.state.values())
        assert "no step" in trainer.update_line(s) and tr.curve[-1]["stepped"] is False
    else:
        assert s.stepped and moved and s.kl is not None and s.groups_kept == 1
        assert "KL" in trainer.update_line(s)


def test_checkpoint_runs_never_share_a_folder(tmp_path):
    a, b = new_run_dir("ambrosia", "cpu-small", tmp_path), new_run_dir("ambrosia", "cpu-small", tmp_path)
    assert a != b and a.is_dir() and b.is_dir()
    with pytest.raises(ValueError, match="unknown checkpoint"):
        resolve_checkpoint("checkpoint:nope", tmp_path)


def test_resume_after_a_kill_reaches_the_same_update(tmp_path, tokenizer, tiny_model):
    import copy

    base = copy.deepcopy(tiny_model)
    (tmp_path / "a").mkdir()
    straight = make(tmp_path / "a", tokenizer, copy.deepcopy(base))
    straight.train(max_updates=2)

    (tmp_path / "b").mkdir()
    first = make(tmp_path / "b", tokenizer, copy.deepcopy(base))
    first.train(max_updates=1)
    first.step()  # an update after the last checkpoint, then the process "dies"
    for d in ("a", "b"):
        (tmp_path / d / "run" / "run.json").write_text(json.dumps({"corpus": "ambrosia"}))
    resumed = make(tmp_path / "b", tokenizer, copy.deepcopy(base))
    assert resumed.resume() == 1
    assert [r["update"] for r in resumed.curve] == [1]  # the lost update is rolled out again
    resumed.train(max_updates=1)
    assert resumed.update == straight.update == 2
    for x, y in zip(straight.curve, resumed.curve):
        assert x["reward"] == y["reward"] and x["decisions"] == y["decisions"]
        assert x["loss"] == pytest.approx(y["loss"], rel=1e-5, abs=1e-9)
    sa = {n: p for n, p in straight.policy.named_parameters() if p.requires_grad}
    for n, p in resumed.policy.named_parameters():
        if p.requires_grad:
            assert torch.allclose(sa[n], p, atol=1e-6), n
    ref = resolve_checkpoint("checkpoint:run", tmp_path / "b")
    assert ref.update == 2 and (ref.adapter_dir / "adapter_config.json").is_file()
