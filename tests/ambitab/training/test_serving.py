"""A checkpoint served as an asker through the evaluation's own asker names and episode code."""

import pytest

from pipelines.ambitab.protocol.askers import make_asker
from pipelines.ambitab.protocol.episode import RunSettings, run_episodes
from pipelines.ambitab.protocol.oracles import deterministic_oracle_for
from pipelines.ambitab.protocol.runs import check_names
from pipelines.ambitab.protocol.solver import NoSolver
from pipelines.ambitab.protocol.verifier import Verifier
from pipelines.ambitab.training import asker_names  # noqa: F401  (registers checkpoint:)
from pipelines.ambitab.training.checkpoints import check_held_out, new_run_dir, resolve_checkpoint
from pipelines.ambitab.training.presets import get_preset
from tests.ambitab.records import amb, task
from tests.lazy_modules import lazy

trainer = lazy("pipelines.ambitab.training.trainer")


def test_checkpoint_asker_runs_held_out_episodes(tmp_path, monkeypatch, tokenizer, tiny_model):
    monkeypatch.setenv("QUANDARY_HOME", str(tmp_path))
    model_dir = tmp_path / "tiny"
    tiny_model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    train = [task([amb("top")], query="List the top earners.", split="train")]
    heldout = [task([amb("year")], query="Sales per year.", db_id="other", split="test")]
    also_train = task([amb("month")], query="Sales per month.", db_id="other", split="train")
    p = get_preset(
        "cpu-small", model=str(model_dir), requests_per_rollout=1, trajectories=2, max_new_tokens=20, question="free"
    )
    run = new_run_dir("ambrosia", p.name)
    tr = trainer.Trainer(p, train, deterministic_oracle_for("ambrosia"), run, tiny_model, tokenizer, model_ref="tiny")
    assert tr.start({"corpus": "ambrosia", "split": "train"}) == 0
    tr.train(max_updates=1)
    name = f"checkpoint:{run.name}"
    assert check_names([name, f"{name}@0"], ["det"], ["checklist_ledger"], "empty")[0] == [name, f"{name}@0"]
    with pytest.raises(ValueError, match="unknown checkpoint"):
        check_names(["checkpoint:missing-run"], ["det"], ["checklist_ledger"], "empty")
    ref = resolve_checkpoint(name)
    assert ref.update == 1
    for records in (train, [also_train]):  # its records, or any record of its training split
        with pytest.raises(ValueError, match="held-out"):
            check_held_out(ref, records)
    check_held_out(ref, heldout)
    for n in (name, f"{name}@0"):
        rows = run_episodes(
            heldout,
            lambda n=n: make_asker(n),
            deterministic_oracle_for("ambrosia"),
            NoSolver(),
            Verifier(),
            [0],
            settings=RunSettings(),
        )
        assert len(rows) == 1 and rows[0]["asker"] == resolve_checkpoint(n).name
        assert rows[0]["asker_model"].endswith(f"@{resolve_checkpoint(n).update}")
