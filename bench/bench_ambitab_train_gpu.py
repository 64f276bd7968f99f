"""A short paper-preset training run and its evaluation on one GPU (#40 item 5).

    .venv/bin/python bench/bench_ambitab_train_gpu.py --model /models/Qwen3-8B --out DIR
        [--updates 8] [--minutes 60] [--heldin 32] [--heldout 32] [--corpus ambrosia]
    .venv/bin/python bench/bench_ambitab_train_gpu.py --smoke   # seconds, CPU: the same path on a tiny model

The `paper` preset (Table 11: 8 requests × 16 trajectories, B = 512, LoRA r 32, peak LR 5e-5,
bf16 weights on the device, gradient checkpointing) for ``--updates`` updates, validation every 8,
then base vs trained on held-in and held-out records with the paired cluster bootstrap; report.json,
learning_curve.png and gain.png under ``--out``. It is bench_ambitab_train.py with the paper's
settings, refusing to start without a CUDA device (install torch's CUDA build first:
docs/ambitab.md, "On a GPU"). Untested on a GPU with real weights; the CUDA path and the preset's
size on one H200 were checked by bench_ambitab_train_gpu_shape.py (bench/README.md).
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_ambitab_train  # noqa: E402


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="a local folder of the weights (default: the preset's hub id, Qwen/Qwen3-8B)")
    ap.add_argument("--out", help="folder for report.json and the figures")
    ap.add_argument("--corpus", default="ambrosia")
    ap.add_argument("--updates", type=int, default=8, help="training updates (the paper trains 136)")
    ap.add_argument("--minutes", type=float, default=60.0, help="training time budget")
    ap.add_argument("--heldin", type=int, default=32)
    ap.add_argument("--heldout", type=int, default=32)
    ap.add_argument("--smoke", action="store_true", help="seconds on the CPU: a tiny random model, same code path")
    args = ap.parse_args(argv)
    common = ["--preset", "paper", "--corpus", args.corpus] + (["--out", args.out] if args.out else [])
    if args.smoke:
        return bench_ambitab_train.main([*common, "--smoke", "--device", "cpu"])
    import torch

    if not torch.cuda.is_available():
        raise SystemExit(
            f"bench_ambitab_train_gpu: torch {torch.__version__} sees no CUDA GPU; install torch's CUDA build "
            "(docs/ambitab.md, 'On a GPU') or run bench_ambitab_train.py on the CPU"
        )
    model = ["--model", args.model] if args.model else []
    return bench_ambitab_train.main(
        [
            *common,
            *model,
            "--device",
            "cuda",
            "--max-updates",
            str(args.updates),
            "--minutes",
            str(args.minutes),
            "--heldin",
            str(args.heldin),
            "--heldout",
            str(args.heldout),
        ]
    )


if __name__ == "__main__":
    main()
