"""The training plan's estimate comes from earlier runs of the same model and batch shape only
(#40 item 4: it reused the timings of another model)."""

import json

from assets.ambitab.card import TRAIN_CARD, train_config
from pipelines.ambitab.training.checkpoints import checkpoints_root
from pipelines.ambitab.training.presets import get_preset


def _run(name: str, seconds: float, **overrides) -> None:
    d = checkpoints_root() / name
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({"preset": get_preset("cpu-small", **overrides).to_dict()}))
    rows = [{"update": u, "rollout_s": seconds - 1, "update_s": 1.0} for u in (1, 2, 3)]
    (d / "curve.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_the_estimate_is_keyed_by_model_and_batch_shape():
    cfg = train_config(run_id="new", max_updates=10)
    assert "unmeasured for this model and batch shape" in TRAIN_CARD.estimate("ambrosia", cfg).items
    _run("other-model", 600.0, model="/models/other")
    _run("other-shape", 300.0, trajectories=8)
    assert "unmeasured" in TRAIN_CARD.estimate("ambrosia", cfg).items
    _run("same", 60.0)
    plan = TRAIN_CARD.estimate("ambrosia", cfg).items
    assert "about 10 min (60 s per update measured" in plan, plan
    assert "of this shape" not in plan and "10 updates of 40" in plan
