"""`quandary ambitab train` through a real Dagster run (tiny model saved as a local model folder),
the checkpoint evaluated by `ambitab eval` on a held-out split, and bad input refused in one line
before any run exists."""

import pytest

from cli import main
from pipelines.ambitab.training.checkpoints import checkpoints_root, read_curve, read_run, read_state
from storage.stores import latest_frame

pytestmark = pytest.mark.integration


@pytest.fixture
def tiny_dir(tmp_path, tokenizer, tiny_model):
    d = tmp_path / "tiny"
    tiny_model.save_pretrained(d)
    tokenizer.save_pretrained(d)
    return d


@pytest.fixture
def built(stored_corpus):
    stored_corpus("ambrosia")


def test_train_then_eval_the_checkpoint_beside_the_base(built, tiny_dir, capsys):
    small = ["--limit", "2", "--requests", "1", "--trajectories", "2"]
    args = ["ambitab", "train", "--corpus", "ambrosia", "--model", str(tiny_dir), *small]
    assert main([*args, "--max-updates", "1"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "plan for ambitab_train_job on ambrosia: 1 updates of 40 (0 done) × 1 requests × 2 trajectories" in out
    runs = sorted(p.name for p in checkpoints_root().iterdir())
    assert len(runs) == 1 and f"checkpoint:{runs[0]}: 1/40 updates on 2 slice_train records" in out
    run_dir = checkpoints_root() / runs[0]
    assert read_run(run_dir)["train_record_ids"] and read_state(run_dir)["update"] == 1
    curve = latest_frame("ambitab_asker_checkpoint", "ambrosia")
    assert curve.height == 1 and {"reward", "precision", "recall", "kl", "entropy", "clip_fraction"} <= set(
        curve.columns
    )
    # a second run gets its own folder; --resume continues the first to the same count
    assert main([*args, "--max-updates", "1"]) == 0
    assert len(list(checkpoints_root().iterdir())) == 2
    assert main(["ambitab", "train", "--corpus", "ambrosia", "--resume", runs[0], "--max-updates", "1"]) == 0
    assert read_state(run_dir)["update"] == 2 and [r["update"] for r in read_curve(run_dir)] == [1, 2]
    resumed = capsys.readouterr().out
    assert "× 1 requests × 2 trajectories" in resumed
    assert f"checkpoint:{runs[0]}: 2/40 updates on 2 slice_train records" in resumed  # --limit kept (#40 item 4)
    # the trained asker and its base on held-out records, side by side in Table 8
    name = f"checkpoint:{runs[0]}"
    ev = ["ambitab", "eval", "--corpus", "ambrosia", "--solver", "empty", "--seeds", "1", "--limit", "1"]
    assert main([*ev, "--asker", f"{name},{name}@0", "--split", "slice_test", "--no-diagnostics"]) == 0, (
        capsys.readouterr().err
    )
    table = capsys.readouterr().out
    assert f"{name}@2" in table and f"{name}@0" in table
    # never on its own training records
    assert main([*ev, "--asker", name, "--split", "slice_train", "--no-diagnostics"]) == 1
    assert "held-out split" in capsys.readouterr().err


def test_bad_input_is_refused_before_a_run(built, tiny_dir, tmp_path, tokenizer, capsys):
    capsys.readouterr()  # the fixtures' own output

    def refused(*extra):
        code = main(["ambitab", "train", *extra])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1, err
        assert not checkpoints_root().exists() or not list(checkpoints_root().iterdir())
        return err

    assert "unknown preset 'huge'" in refused("--corpus", "ambrosia", "--preset", "huge")
    assert "unknown corpus 'nope'" in refused("--corpus", "nope")
    assert "no config.json" in refused("--corpus", "ambrosia", "--model", str(tmp_path / "missing"))
    plain = tmp_path / "plain"
    tokenizer.save_pretrained(plain)
    (plain / "config.json").write_text((tiny_dir / "config.json").read_text())
    cfg = plain / "tokenizer_config.json"
    cfg.write_text(cfg.read_text().replace('"chat_template"', '"_unused_chat_template"'))
    for f in plain.glob("chat_template.*"):
        f.unlink()
    assert "no chat template" in refused("--corpus", "ambrosia", "--model", str(plain))
    assert "unknown run" in refused("--corpus", "ambrosia", "--resume", "nope")


REFUSALS = [
    (["--limit", "0"], "--limit 0: give at least 1"),
    (["--limit", "-1"], "--limit -1: give at least 1"),
    (["--max-updates", "-5"], "--max-updates -5: give at least 1"),
    (["--max-updates", "0"], "--max-updates 0: give at least 1"),
    (["--requests", "0"], "--requests 0: give at least 1"),
    (["--trajectories", "1"], "--trajectories 1: give at least 2"),
    (["--split", "../../x"], "a split name, not a path"),
    (["--split", "slice_tset"], "no such split; splits: slice_test, slice_train"),
    (["--resume", ""], "unknown run ''"),
    (["--resume", "../../../tmp"], "unknown run '../../../tmp'"),
    (["--device", "tpu"], "--device 'tpu': use cpu, cuda or cuda:N"),
    (["--model", "nobody/no-such-model"], "not in the local model cache"),
]


def test_every_training_option_is_checked_before_a_run_folder_exists(built, tiny_dir, capsys, monkeypatch):
    """#45 item 4: one line, exit 2, no run folder; an uncached hub id offline is refused without
    a download attempt (transformers retried for ~86 s)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    capsys.readouterr()
    for extra, says in REFUSALS:
        model = [] if "--model" in extra else ["--model", str(tiny_dir)]
        code = main(["ambitab", "train", "--corpus", "ambrosia", *model, *extra])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1 and says in err, (extra, err)
        assert not checkpoints_root().exists() or not list(checkpoints_root().iterdir()), extra


def test_a_model_config_nested_deeply_is_refused_in_one_line(built, tiny_dir, tmp_path, capsys):
    deep = tmp_path / "deep"
    deep.mkdir()
    (deep / "config.json").write_text('{"a": ' + "[" * 50_000 + "]" * 50_000 + "}")
    capsys.readouterr()
    assert main(["ambitab", "train", "--corpus", "ambrosia", "--model", str(deep)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nested too deeply" in err, err
    assert not checkpoints_root().exists() or not list(checkpoints_root().iterdir())


def test_without_the_training_extra_the_command_says_how_to_install_it(capsys, monkeypatch):
    """#42 item 3: after `make demo` (no torch) one line naming `make install-train`, exit 2."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    assert main(["ambitab", "train", "--corpus", "ambrosia"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "make install-train" in err and "'torch'" in err, err
