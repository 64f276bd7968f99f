"""Evidence that the trainer learns (#40): on a tiny random model with the real tokenizer and the
real rollout (episodes, grammar, oracle), a toy reward — the share of its decision budget the
asker spends asking, so every "done" lowers it — rises over updates, and the policy's probability of
choosing "clarification" at the decision's one free choice rises with it. Deterministic (seeded
rollouts), seconds."""

from pipelines.ambitab.protocol.oracles import deterministic_oracle_for
from pipelines.ambitab.training.presets import get_preset
from tests.ambitab.records import amb, task
from tests.lazy_modules import lazy

torch = lazy("torch")
local_asker = lazy("pipelines.ambitab.training.local_asker")
model = lazy("pipelines.ambitab.training.model")
trainer = lazy("pipelines.ambitab.training.trainer")

TASKS = [
    task([amb("top"), amb("earners")], query="List the top earners."),
    task([amb("recent")], query="Show recent orders.", db_id="d2"),
]


def asked(row: dict) -> float:
    """The share of the decision budget spent asking (a stop anywhere lowers it)."""
    return row["n_questions"] / (row["n_amb"] + 2)


def p_clarification(tr: "trainer.Trainer", tokenizer) -> float:
    """P(type = clarification) under the grammar at the first turn: the policy's mass on the
    tokens that begin "clarification" among the tokens the grammar allows there."""
    from pipelines.ambitab.protocol.prompts import DEFAULT_ASKER_PROMPT, asker_messages
    from pipelines.ambitab.training.grammar import MaskedStep

    msgs = asker_messages(DEFAULT_ASKER_PROMPT, TASKS[0].spec, [], 1, 4)
    prefix = tokenizer.encode('{"type": "', add_special_tokens=False)
    ids = local_asker.prompt_ids(tokenizer, msgs, 4096) + prefix
    m = tr.sampler.grammar.matcher()
    assert m.consume_tokens(prefix)
    tr.policy.eval()
    with torch.no_grad():
        logits = tr.policy(input_ids=torch.tensor([ids])).logits[0, -1:].float() / 0.8
    MaskedStep(1, tr.sampler.grammar.vocab).apply(logits, [m])
    p = torch.softmax(logits[0], -1)
    allowed = torch.nonzero(p > 0).flatten().tolist()
    assert 2 <= len(allowed) <= 12  # the prefixes of "done" and "clarification"
    return float(sum(p[t] for t in allowed if "clarification".startswith(tokenizer.decode([t]))))


def test_a_toy_reward_rises_over_updates(tmp_path, tokenizer):
    preset = get_preset(
        "cpu-small",
        requests_per_rollout=2,
        trajectories=4,
        max_new_tokens=20,
        question="free",  # the toy reward counts asking; the question's words do not matter
        updates=6,
        lr=2e-2,
        warmup=0.0,
        nominal_batch=8,
        checkpoint_every=6,
        seed=1,
    )
    tr = trainer.Trainer(
        preset,
        TASKS,
        deterministic_oracle_for("ambrosia"),
        tmp_path,
        model.tiny_random_model(tokenizer, initializer_range=0.2),  # a LoRA can move its choice
        tokenizer,
        model_ref="tiny",
        reward_fn=asked,
    )
    before = p_clarification(tr, tokenizer)
    curve = tr.train()
    after = p_clarification(tr, tokenizer)
    rewards = [r["reward"] for r in curve]
    print("rewards", rewards, "P(clarification)", before, "->", after)
    assert rewards[-1] > rewards[0] + 0.5 and sum(rewards[-2:]) / 2 > sum(rewards[:2]) / 2 + 0.3
    assert after > before + 0.4
