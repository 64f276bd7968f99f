"""AmbiTab asker training on the command line (issue 29).

| command | what it does |
|---|---|
| `quandary ambitab train --corpus NAME [--preset cpu-small\\|paper] [--model PATH] [--max-updates N]` | trains the asker (multi-turn GRPO) on the corpus's training split; prints the checkpoint name |
| `quandary ambitab train --corpus NAME --resume RUN_ID` | continues a run from its last checkpoint (after Ctrl-C or a kill) |

Needs the `train` extra (`make install-train`); without it the command says so in one line.
Everything is checked before a run exists: the corpus and its records, every option (counts,
split, preset, device), the model path and its config, a hub id's reachability, the model's chat
template. A new run gets a new folder; a run never writes another's.
"""

import importlib.util
import sys

from cli.groups import subgroup

TRAIN_MODULES = ("torch", "transformers", "peft", "trl", "llguidance")


def missing_train_extra() -> str | None:
    """The first module of the `train` extra that is not installed, if any (no import: cheap)."""
    return next((m for m in TRAIN_MODULES if importlib.util.find_spec(m) is None), None)


def _check_model(args):
    """(preset, model source) or a one-line error: the path, its config, a hub id reachable (or
    cached), the device, the chat template."""
    from pipelines.ambitab.training.model import ModelError, check_hub_model, load_tokenizer, resolve_device
    from pipelines.ambitab.training.presets import get_preset, resolve_model

    try:
        preset = get_preset(
            args.preset,
            model=args.model,
            reward=args.reward,
            requests_per_rollout=args.requests,
            trajectories=args.trajectories,
        )
        resolve_device(args.device)
        src = resolve_model(preset.model)
        check_hub_model(src)
        load_tokenizer(src)  # the chat template is checked here, before any rollout
    except (ValueError, ModelError) as exc:
        raise SystemExit(f"ambitab train: {exc}") from None
    return preset, src


def _config(args, run_id: str) -> dict:
    from assets.ambitab.card import TRAIN_CARD

    return TRAIN_CARD.config(
        run_id=run_id,
        preset=args.preset,
        model=args.model,
        split=args.split,
        limit=args.limit,
        reward=args.reward,
        oracle=args.oracle,
        max_updates=args.max_updates,
        requests=args.requests,
        trajectories=args.trajectories,
        device=args.device,
    )


def _refuse(message: str, code: int = 2) -> int:
    print(message, file=sys.stderr)
    return code


def _train(args) -> int:
    missing = missing_train_extra()
    if missing:
        return _refuse(
            f"ambitab train: the training extra is not installed (no module {missing!r}); "
            "install it with `make install-train`"
        )
    from assets.ambitab.card import TRAIN_CARD
    from assets.shared.preflight import PreflightError
    from cli.run_output import execute_cli_run, report_job_result
    from cli.run_plan import print_plan
    from cli.runs import run_job_for_partition
    from pipelines.ambitab.record import CORPORA
    from pipelines.ambitab.training.checkpoints import checkpoints_root, new_run_dir, read_run
    from storage.stores import artifact_store

    if args.corpus not in CORPORA:
        return _refuse(f"ambitab train: unknown corpus {args.corpus!r}; expected one of {', '.join(CORPORA)}")
    if args.oracle not in ("det", "det_intent", "det_knowledge"):
        return _refuse(
            f"ambitab train: oracle {args.oracle!r} is not supported for training here; use det, det_intent "
            "or det_knowledge (the paper's main run uses the deterministic oracle)"
        )
    if args.resume is not None:
        import re

        from assets.ambitab.training import RUN_ID_PATTERN

        run_dir = checkpoints_root() / args.resume
        if not re.match(RUN_ID_PATTERN, args.resume) or not (run_dir / "run.json").is_file():
            return _refuse(
                f"ambitab train: unknown run {args.resume!r} (the runs are the folders of {checkpoints_root()})"
            )
        run = read_run(run_dir)
        if run.get("corpus") != args.corpus:
            return _refuse(f"ambitab train: run {args.resume} trained on {run.get('corpus')}, not {args.corpus}")
        # a resumed run keeps its settings and its records (the device and --max-updates may change)
        args.preset, args.model = run["preset"]["name"], run["model"]
        args.reward, args.split, args.oracle = run["preset"]["reward"], run.get("split"), run.get("oracle_kind", "det")
        args.requests, args.trajectories = run["preset"]["requests_per_rollout"], run["preset"]["trajectories"]
        args.limit = run.get("limit")
    if artifact_store().latest_location("ambitab_records", args.corpus) is None:
        return _refuse(
            f"ambitab train: no {args.corpus} records materialized; run `quandary ambitab build --corpus "
            f"{args.corpus}` first",
            1,
        )
    try:  # every option, then the model, before a run folder exists
        TRAIN_CARD.preflight(args.corpus, _config(args, args.resume or "new-run"), None)
        _check_model(args)
    except PreflightError as exc:
        return _refuse(str(exc))
    except ValueError as exc:  # the config's own field checks
        return _refuse(f"ambitab train: {' '.join(str(exc).split())[:300]}")
    except SystemExit as exc:
        return _refuse(str(exc))
    run_dir = checkpoints_root() / args.resume if args.resume else new_run_dir(args.corpus, args.preset)
    run_config = _config(args, run_dir.name)
    resume = f"quandary ambitab train --corpus {args.corpus} --resume {run_dir.name}"
    print(f"training run {run_dir.name} ({run_dir})", flush=True)

    def start(run_id, level):
        print_plan(TRAIN_CARD.name, args.corpus, run_config)
        return run_job_for_partition(
            TRAIN_CARD.name, args.corpus, run_config=run_config, run_id=run_id, log_level=level
        )

    result = execute_cli_run(start, resume, args.verbose)
    if isinstance(result, int):
        print(f"resume from the last checkpoint with: {resume}", file=sys.stderr)
        return result
    code = report_job_result(result, TRAIN_CARD.name, args.corpus, args.verbose)
    if code:
        print(f"resume from the last checkpoint with: {resume}", file=sys.stderr)
        return code
    for line in TRAIN_CARD.summary(result, args.corpus):
        print(line)
    return 0


def register(sub) -> None:
    group = subgroup(sub, "ambitab", "AmbiTab corpus and evaluation", "ambitab_command")
    t = group.add_parser("train", help="train the asker with multi-turn GRPO (Appendix D) on a training split")
    t.add_argument("--corpus", required=True, help="ambrosia | ambiqt | taco | ew_bird | bird_interact | bird")
    t.add_argument("--preset", default="cpu-small", help="cpu-small (default; this machine) or paper (Table 11)")
    t.add_argument("--model", help="model directory, hub id, .gguf file or embedded:smollm2 (default: the preset's)")
    t.add_argument("--split", help="training split (default: the corpus's one *train* split)")
    t.add_argument("--limit", type=int, help="at most this many training records")
    t.add_argument("--reward", choices=("f1", "sr"), default="f1", help="question F1 (default) or outcome (ablation)")
    t.add_argument("--oracle", default="det", help="training oracle: det (default), det_intent, det_knowledge")
    t.add_argument("--max-updates", type=int, help="stop after this many updates (resume continues)")
    t.add_argument("--requests", type=int, help="requests per rollout batch (default: the preset's)")
    t.add_argument("--trajectories", type=int, help="trajectories per request, K (default: the preset's)")
    t.add_argument("--resume", metavar="RUN_ID", help="continue this run from its last checkpoint")
    t.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda when torch sees a GPU, else cpu)")
    t.add_argument("--verbose", action="store_true", help="show the run's log (one line per update)")
    t.set_defaults(func=_train)
