"""Benchmark the asker trainer (issue 29) on this machine: train the cpu-small preset (embedded
SmolLM2-135M, LoRA) on one corpus's training split with the deterministic oracle for as many
updates as fit in ``--minutes``, then evaluate the base policy (``checkpoint:<id>@0``, the
zero-initialised adapter) and the trained one (``checkpoint:<id>``) on a held-out split through
the same episode code as ``ambitab eval`` (deterministic oracle, asking metrics only).

    .venv/bin/python bench/bench_ambitab_train.py [--corpus ambrosia] [--minutes 15] [--heldout 30]
        [--requests R] [--trajectories K]

Reports question-F1 (Eq. 2), precision and recall per asker with 95% AVT-cluster bootstrap
intervals, the paired trained − base difference, seconds per update, peak memory (max RSS) and
the load average (the machine is shared). Checkpoints go to a temporary $QUANDARY_HOME.
"""

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("QUANDARY_HOME", tempfile.mkdtemp(prefix="quandary-train-bench-"))

from pipelines.ambitab.corpora import build_corpus  # noqa: E402
from pipelines.ambitab.protocol.askers import make_asker  # noqa: E402
from pipelines.ambitab.protocol.episode import RunSettings, run_episodes  # noqa: E402
from pipelines.ambitab.protocol.oracles import make_oracle  # noqa: E402
from pipelines.ambitab.protocol.solver import NoSolver  # noqa: E402
from pipelines.ambitab.protocol.task import Task  # noqa: E402
from pipelines.ambitab.protocol.verifier import Verifier  # noqa: E402
from pipelines.ambitab.training import asker_names  # noqa: E402, F401  (registers checkpoint:)
from pipelines.ambitab.training.checkpoints import new_run_dir  # noqa: E402
from pipelines.ambitab.training.decisions import trajectory_reward  # noqa: E402
from pipelines.ambitab.training.model import load_model, load_tokenizer  # noqa: E402
from pipelines.ambitab.training.presets import get_preset, resolve_model  # noqa: E402
from pipelines.ambitab.training.trainer import Trainer  # noqa: E402
from pipelines.core.stats import cluster_bootstrap  # noqa: E402

SPLITS = {"ambrosia": ("slice_train", "slice_test")}


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def evaluate(name: str, tasks, oracle) -> list[dict]:
    return run_episodes(
        tasks, lambda: make_asker(name), oracle, NoSolver(), Verifier(), [0], settings=RunSettings(), concurrency=1
    )


def summary(rows: list[dict]) -> dict:
    clusters = [r["avt_id"] for r in rows]
    out = {}
    for key, vals in (
        ("question_f1", [trajectory_reward(r) for r in rows]),
        ("precision", [r["precision"] for r in rows]),
        ("recall", [r["recall"] for r in rows]),
    ):
        out[key] = cluster_bootstrap(clusters, vals).fmt(3)
    out["questions_per_episode"] = round(sum(r["n_questions"] for r in rows) / len(rows), 2)
    out["fallback_stops"] = sum(bool(r["fallback_stop"]) for r in rows)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default="ambrosia", choices=sorted(SPLITS))
    ap.add_argument("--minutes", type=float, default=15.0, help="training time budget")
    ap.add_argument("--heldout", type=int, default=30, help="held-out records evaluated (first N by AVT)")
    ap.add_argument("--requests", type=int, help="requests per rollout batch (default: the preset's)")
    ap.add_argument("--trajectories", type=int, help="trajectories per request (default: the preset's)")
    args = ap.parse_args()
    load0 = os.getloadavg()
    t0 = time.monotonic()
    train_split, test_split = SPLITS[args.corpus]
    tasks = [Task.from_record(r) for r in build_corpus(args.corpus).records]
    train = [t for t in tasks if t.split == train_split]
    heldout = sorted((t for t in tasks if t.split == test_split), key=lambda t: (t.avt_id, t.record_id))
    heldout = heldout[: args.heldout]
    assert not {t.db_id for t in train} & {t.db_id for t in heldout}, "held-out split shares a database"
    preset = get_preset("cpu-small", requests_per_rollout=args.requests, trajectories=args.trajectories)
    src = resolve_model(preset.model)
    tok = load_tokenizer(src)
    model = load_model(src)
    oracle = make_oracle("det", args.corpus)
    run_dir = new_run_dir(args.corpus, preset.name)
    tr = Trainer(preset, train, oracle, run_dir, model, tok, model_ref=src.ref, progress=print)
    tr.start({"corpus": args.corpus, "split": train_split})
    print(f"setup {time.monotonic() - t0:.0f}s; {len(train)} training records, {len(heldout)} held out", flush=True)
    budget = args.minutes * 60
    t_train = time.monotonic()
    while tr.update < preset.updates:
        done = time.monotonic() - t_train
        per = done / tr.update if tr.update else 0
        if tr.update and done + per > budget:
            break
        s = tr.step()
        print(
            f"update {s.update}: reward {s.reward:.3f} P {s.precision} R {s.recall} KL {s.kl:.5f} "
            f"H {s.entropy:.3f} clip {s.clip_fraction:.3f} decisions {s.decisions} kept {s.groups_kept}/{s.groups} "
            f"rollout {s.rollout_s:.0f}s update {s.update_s:.0f}s",
            flush=True,
        )
    train_s = time.monotonic() - t_train
    tr.save()
    curve = tr.curve
    del tr, model
    run_id = run_dir.name
    results = {}
    for label, name in (("base", f"checkpoint:{run_id}@0"), ("trained", f"checkpoint:{run_id}")):
        te = time.monotonic()
        rows = evaluate(name, heldout, oracle)
        results[label] = {**summary(rows), "eval_s": round(time.monotonic() - te), "rows": rows}
        print(label, {k: v for k, v in results[label].items() if k != "rows"}, flush=True)
    b, t = results["base"]["rows"], results["trained"]["rows"]
    diff = cluster_bootstrap(
        [r["avt_id"] for r in t],
        [trajectory_reward(r) for r in t],
        [r["avt_id"] for r in b],
        [trajectory_reward(r) for r in b],
    ).fmt(3)
    report = {
        "corpus": args.corpus,
        "train_records": len(train),
        "heldout_records": len(heldout),
        "requests_x_trajectories": f"{preset.requests_per_rollout} x {preset.trajectories}",
        "updates": len(curve),
        "train_s": round(train_s),
        "s_per_update": round(train_s / max(1, len(curve)), 1),
        "peak_rss_mib": round(peak_mib()),
        "load_avg_start": [round(x, 2) for x in load0],
        "load_avg_end": [round(x, 2) for x in os.getloadavg()],
        "curve": [
            {k: r[k] for k in ("update", "reward", "precision", "recall", "kl", "entropy", "clip_fraction")}
            for r in curve
        ],
        "base": {k: v for k, v in results["base"].items() if k != "rows"},
        "trained": {k: v for k, v in results["trained"].items() if k != "rows"},
        "question_f1_trained_minus_base": diff,
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
