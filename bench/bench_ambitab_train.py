"""Benchmark the asker trainer (#29, #40): does training help, and what does it cost here?

Trains a preset (cpu-small by default: embedded SmolLM2-135M, LoRA, the decision decoded under
its JSON grammar, the question a phrase of the user query) on one corpus's training split with the deterministic oracle for as many
updates as fit in ``--minutes``, validating every 8 updates (question F1 of the current policy on
a few held-out validation records, as the paper). Then evaluates the base policy
(``checkpoint:<id>@0``, the zero-initialised adapter) and the trained one on held-in (training)
and held-out records through the same episode code as ``ambitab eval`` (deterministic oracle,
asking metrics only), and reports the paired AVT-cluster bootstrap interval of the gain in
question F1 (Eq. 2) on each.

    .venv/bin/python bench/bench_ambitab_train.py [--corpus ambrosia] [--minutes 20] [--heldin 24]
        [--heldout 24] [--requests R] [--trajectories K] [--out DIR] [--device cpu|cuda]
        [--preset cpu-small|paper] [--model PATH] [--threads N] [--eval-seeds S]
    .venv/bin/python bench/bench_ambitab_train.py --smoke      # seconds: a tiny random model

Writes ``report.json``, ``learning_curve.png`` (training reward per update, validation question
F1 every 8 updates) and ``gain.png`` (base vs trained with 95 % intervals) under ``--out``.
Reports seconds per update, peak memory (max RSS) and the load average: the machine is shared,
so the timings are of this machine at that load. Checkpoints go to a temporary $QUANDARY_HOME.
"""

import argparse
import json
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("QUANDARY_HOME", tempfile.mkdtemp(prefix="quandary-train-bench-"))

from pipelines.ambitab.corpora import build_corpus  # noqa: E402
from pipelines.ambitab.protocol.episode import RunSettings  # noqa: E402
from pipelines.ambitab.protocol.oracles import make_oracle  # noqa: E402
from pipelines.ambitab.protocol.solver import NoSolver  # noqa: E402
from pipelines.ambitab.protocol.task import Task  # noqa: E402
from pipelines.ambitab.protocol.verifier import Verifier  # noqa: E402
from pipelines.ambitab.training import asker_names  # noqa: E402, F401  (registers checkpoint:)
from pipelines.ambitab.training.checkpoints import new_run_dir  # noqa: E402
from pipelines.ambitab.training.decisions import trajectory_reward  # noqa: E402
from pipelines.ambitab.training.local_asker import batched_episodes  # noqa: E402
from pipelines.ambitab.training.model import (  # noqa: E402
    load_model,
    load_tokenizer,
    resolve_device,
    set_threads,
    tiny_random_model,
)
from pipelines.ambitab.training.presets import get_preset, resolve_model  # noqa: E402
from pipelines.ambitab.training.serving import checkpoint_asker  # noqa: E402
from pipelines.ambitab.training.trainer import Trainer, update_line  # noqa: E402
from pipelines.core.stats import cluster_bootstrap  # noqa: E402
from storage.charts import png_chart  # noqa: E402

SPLITS = {"ambrosia": ("slice_train", "slice_test")}
VALIDATE_EVERY = 8  # updates, as the paper


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class PhaseMemory:
    """Peak RSS per phase (load, validation, rollout, update, evaluation), sampled every 0.1 s
    from /proc/self/statm (Linux; elsewhere nothing is sampled): where the process's peak is."""

    def __init__(self):
        self.phase, self.peaks = "load", {}
        self._page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        if Path("/proc/self/statm").is_file():
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            rss = int(Path("/proc/self/statm").read_text().split()[1]) * self._page / 2**20
            self.peaks[self.phase] = max(self.peaks.get(self.phase, 0.0), rss)

    def stop(self) -> dict:
        self._stop.set()
        return {k: round(v) for k, v in self.peaks.items()}


def evaluate(make, sampler, tasks, oracle, seeds: int) -> list[dict]:
    """Episodes of ``tasks`` with seeds 0 … seeds−1 through the episode code of ``ambitab eval``
    (its settings), a record's seeds sampled together: ``make(batcher)`` is the asker."""
    return batched_episodes(tasks, make, sampler, oracle, NoSolver(), Verifier(), range(seeds), RunSettings())


def evaluate_checkpoint(name: str, tasks, oracle, seeds: int) -> list[dict]:
    return evaluate(lambda b: checkpoint_asker(name, b), checkpoint_asker(name).sampler(), tasks, oracle, seeds)


def interval(rows: list[dict]) -> dict:
    iv = cluster_bootstrap([r["avt_id"] for r in rows], [trajectory_reward(r) for r in rows])
    return {"mean": iv.estimate, "lo": iv.low, "hi": iv.high, "text": iv.fmt(3)}


def summary(rows: list[dict]) -> dict:
    clusters = [r["avt_id"] for r in rows]
    out = {"question_f1": interval(rows)}
    for key in ("precision", "recall"):
        out[key] = cluster_bootstrap(clusters, [r[key] for r in rows]).fmt(3)
    out["questions_per_episode"] = round(sum(r["n_questions"] for r in rows) / max(1, len(rows)), 2)
    out["fallback_stops"] = sum(bool(r["fallback_stop"]) for r in rows)
    return out


def paired_gain(trained: list[dict], base: list[dict]) -> dict:
    iv = cluster_bootstrap(
        [r["avt_id"] for r in trained],
        [trajectory_reward(r) for r in trained],
        [r["avt_id"] for r in base],
        [trajectory_reward(r) for r in base],
    )
    return {"mean": iv.estimate, "lo": iv.low, "hi": iv.high, "text": iv.fmt(3)}


def tiny_model_dir(folder: Path) -> str:
    """--smoke: a tiny random Llama with the embedded model's tokenizer, saved as a local folder."""
    tok = load_tokenizer(resolve_model("embedded:smollm2"))
    tiny_random_model(tok, initializer_range=0.2).save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


def curve_png(curve: list[dict], validation: list[dict], path: Path) -> None:
    with png_chart(path, figsize=(7, 4), dpi=110) as ax:
        ax.plot([r["update"] for r in curve], [r["reward"] for r in curve], marker="o", ms=3, label="training reward")
        if validation:
            ax.errorbar(
                [v["update"] for v in validation],
                [v["mean"] for v in validation],
                yerr=[
                    [v["mean"] - v["lo"] for v in validation],
                    [v["hi"] - v["mean"] for v in validation],
                ],
                marker="s",
                capsize=3,
                label="validation question F1 (95% CI)",
            )
        ax.set_xlabel("update")
        ax.set_ylabel("question F1 (Eq. 2)")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(loc="upper left", fontsize=8)
        ax.set_title("asker training: learning curve")


def gain_png(results: dict, path: Path) -> None:
    with png_chart(path, figsize=(6, 3.5), dpi=110) as ax:
        labels, xs = [], 0
        for where in ("held_in", "held_out"):
            for label in ("base", "trained"):
                q = results[where][label]["question_f1"]
                ax.errorbar([xs], [q["mean"]], yerr=[[q["mean"] - q["lo"]], [q["hi"] - q["mean"]]], fmt="o", capsize=4)
                labels.append(f"{where}\n{label}")
                xs += 1
        ax.set_xticks(range(xs), labels, fontsize=8)
        ax.set_ylabel("question F1 (95% CI)")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title("base vs trained asker")


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default="ambrosia", choices=sorted(SPLITS))
    ap.add_argument("--preset", default="cpu-small")
    ap.add_argument("--model", help="a local model folder, .gguf or hub id (default: the preset's)")
    ap.add_argument("--minutes", type=float, default=20.0, help="training time budget (at most 30 on this CPU)")
    ap.add_argument("--max-updates", type=int, help="stop after this many updates")
    ap.add_argument("--heldin", type=int, default=24, help="training records evaluated (first N by AVT)")
    ap.add_argument("--heldout", type=int, default=24, help="held-out records evaluated (first N by AVT)")
    ap.add_argument("--validation", type=int, default=6, help="held-out records validated every 8 updates")
    ap.add_argument(
        "--eval-seeds",
        type=int,
        default=1,
        help="episodes per record in validation and evaluation (a record's seeds are sampled together)",
    )
    ap.add_argument("--train-limit", type=int, help="train on the first N training records only")
    ap.add_argument("--requests", type=int, help="requests per rollout batch (default: the preset's)")
    ap.add_argument("--trajectories", type=int, help="trajectories per request (default: the preset's)")
    ap.add_argument("--lr", type=float, help="peak learning rate (default: the preset's)")
    ap.add_argument("--device", help="cpu, cuda (default: cuda when present)")
    ap.add_argument(
        "--threads", type=int, help="torch threads (default: the cores free at start, from the load average)"
    )
    ap.add_argument("--out", help="folder for report.json and the figures (default: a temporary folder)")
    ap.add_argument("--smoke", action="store_true", help="seconds: a tiny random model, 2 updates, 2 records each")
    args = ap.parse_args(argv)
    out = Path(args.out or tempfile.mkdtemp(prefix="ambitab-train-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()
    mem = PhaseMemory()
    t0 = time.monotonic()
    device = resolve_device(args.device)
    threads = set_threads(args.threads)
    train_split, test_split = SPLITS[args.corpus]
    tasks = [Task.from_record(r) for r in build_corpus(args.corpus).records]
    train = sorted((t for t in tasks if t.split == train_split), key=lambda t: (t.avt_id, t.record_id))
    heldout_all = sorted((t for t in tasks if t.split == test_split), key=lambda t: (t.avt_id, t.record_id))
    model = args.model
    overrides = dict(requests_per_rollout=args.requests, trajectories=args.trajectories, lr=args.lr)
    if args.smoke:
        model = tiny_model_dir(out / "tiny-model")
        args.heldin, args.heldout, args.validation, args.train_limit, args.eval_seeds = 2, 2, 2, 4, 2
        args.max_updates = 2
        overrides.update(requests_per_rollout=1, trajectories=2, max_new_tokens=32, checkpoint_every=1)
    if args.train_limit:
        train = train[: args.train_limit]
    heldin = train[: args.heldin]
    validation = heldout_all[-args.validation :] if args.validation else []
    heldout = heldout_all[: args.heldout]
    assert not {t.db_id for t in train} & {t.db_id for t in heldout_all}, "held-out split shares a database"
    assert not {t.record_id for t in validation} & {t.record_id for t in heldout}, "validation overlaps held-out"
    preset = get_preset(args.preset, model=model, **overrides)
    src = resolve_model(preset.model)
    tok = load_tokenizer(src)
    oracle = make_oracle("det", args.corpus)
    run_dir = new_run_dir(args.corpus, preset.name)
    tr = Trainer(preset, train, oracle, run_dir, load_model(src, device=device), tok, model_ref=src.ref, progress=print)
    tr.start({"corpus": args.corpus, "split": train_split})
    print(
        f"setup {time.monotonic() - t0:.0f}s on {device} ({threads} threads); {len(train)} training records, "
        f"{len(heldin)} held in, {len(heldout)} held out, {len(validation)} validation",
        flush=True,
    )
    val_rows: list[dict] = []

    def validate() -> None:
        if not validation:
            return
        tr.policy.eval()
        mem.phase = "validation"
        rows = evaluate(lambda b: tr.asker(None, b), tr.sampler, validation, oracle, args.eval_seeds)
        val_rows.append({"update": tr.update, **interval(rows)})
        print(f"validation at update {tr.update}: question F1 {val_rows[-1]['text']}", flush=True)

    rollout = tr.rollout

    def phased_rollout(update: int):  # the rollout, then the loss + backward + step, apart
        mem.phase = "rollout"
        out = rollout(update)
        mem.phase = "update"
        return out

    tr.rollout = phased_rollout
    validate()
    budget = args.minutes * 60
    horizon = preset.updates if args.max_updates is None else min(preset.updates, args.max_updates)
    t_train = time.monotonic()
    while tr.update < horizon:
        done = time.monotonic() - t_train
        per = done / tr.update if tr.update else 0
        if tr.update and done + per > budget:
            break
        s = tr.step()
        print(
            f"{update_line(s)} · P {s.precision} R {s.recall} clip {s.clip_fraction} tokens {s.tokens} "
            f"(rollout {s.rollout_s:.0f}s, update {s.update_s:.0f}s)",
            flush=True,
        )
        if tr.update % VALIDATE_EVERY == 0:
            validate()
    train_s = time.monotonic() - t_train
    if tr.update % VALIDATE_EVERY:
        validate()
    tr.save()
    curve = tr.curve
    tr = None  # the evaluation loads each checkpoint on its own
    run_id = run_dir.name
    results: dict = {}
    mem.phase = "evaluation"
    for where, records in (("held_in", heldin), ("held_out", heldout)):
        results[where] = {}
        for label, name in (("base", f"checkpoint:{run_id}@0"), ("trained", f"checkpoint:{run_id}")):
            te = time.monotonic()
            rows = evaluate_checkpoint(name, records, oracle, args.eval_seeds)
            results[where][label] = {**summary(rows), "eval_s": round(time.monotonic() - te), "rows": rows}
            q = results[where][label]["question_f1"]["text"]
            print(f"{where} {label}: question F1 {q}", flush=True)
        results[where]["gain"] = paired_gain(results[where]["trained"]["rows"], results[where]["base"]["rows"])
        print(f"{where} gain (trained − base, paired cluster bootstrap): {results[where]['gain']['text']}", flush=True)
    curve_png(curve, val_rows, out / "learning_curve.png")
    gain_png(results, out / "gain.png")
    report = {
        "corpus": args.corpus,
        "preset": preset.name,
        "model": src.ref,
        "device": device,
        "torch_threads": threads,
        "train_records": len(train),
        "requests_x_trajectories": f"{preset.requests_per_rollout} x {preset.trajectories}",
        "lr": preset.lr,
        "question_form": preset.question,
        "validation_records": len(validation),
        "eval_seeds": args.eval_seeds,
        "zero_signal": preset.zero_signal,
        "updates_stepped": sum(r.get("stepped", True) for r in curve),
        "updates": len(curve),
        "train_s": round(train_s),
        "s_per_update": round(train_s / max(1, len(curve)), 1),
        "peak_rss_mib": round(peak_mib()),
        "peak_rss_mib_by_phase": mem.stop(),
        "load_avg_start": [round(x, 2) for x in load0],
        "load_avg_end": [round(x, 2) for x in os.getloadavg()],
        "curve": [
            {
                k: r[k]
                for k in ("update", "reward", "kl", "entropy", "clip_fraction", "groups_kept", "groups", "stepped")
            }
            for r in curve
        ],
        "validation": val_rows,
        **{
            where: {
                **{
                    label: {k: v for k, v in results[where][label].items() if k != "rows"}
                    for label in ("base", "trained")
                },
                "question_f1_gain": results[where]["gain"],
            }
            for where in results
        },
        "figures": [str(out / "learning_curve.png"), str(out / "gain.png")],
    }
    (out / "report.json").write_text(json.dumps(report, indent=1))
    print(json.dumps({k: v for k, v in report.items() if k != "curve"}, indent=1))
    return report


if __name__ == "__main__":
    main()
