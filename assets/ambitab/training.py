"""AmbiTab asker training (issue 29): one asset, partitioned by corpus.

    ambitab_records ─ ambitab_asker_checkpoint

``ambitab_asker_checkpoint`` trains the asker with multi-turn GRPO (pipelines.ambitab.training)
on the corpus's training split and records the run: the checkpoint name
(``checkpoint:<run_id>``, what ``ambitab eval --asker`` takes), the adapter folder, the model and
tokenizer reference, the preset, the oracle, and the training curve (a table per update and a
PNG). The checkpoint files live in ``$QUANDARY_HOME/ambitab/checkpoints/<run_id>`` (one folder
per run, never shared); the asset's table is the curve.
"""

import json

import polars as pl
from dagster import AssetExecutionContext, AssetIn, Config, Failure, MetadataValue, asset
from pydantic import Field

from assets.ambitab.corpus import RECORDS
from assets.ambitab.partitions import corpus_partitions
from assets.shared.charts import chart_metadata, chart_path
from assets.shared.checked_config import checked_config, op_config
from assets.shared.io_manager import artifact_output, path_markdown, preview_markdown
from assets.shared.progress import step_progress
from assets.shared.resources import CouncilResource
from pipelines.ambitab.protocol.task import Task
from pipelines.ambitab.record import records_from_frame
from pipelines.ambitab.training.checkpoints import checkpoints_root, read_run, read_state
from pipelines.ambitab.training.curve import curve_frame, curve_png
from pipelines.ambitab.training.presets import PRESETS

GROUP = "ambitab_train"
CHECKPOINT = "ambitab_asker_checkpoint"


RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"  # one folder name under the checkpoints root


class AmbitabTrainConfig(Config):
    """One training run (the command creates ``run_id``'s folder; an existing one is resumed)."""

    run_id: str = Field(pattern=RUN_ID_PATTERN, description="the run's folder under $QUANDARY_HOME/ambitab/checkpoints")
    preset: str = Field(default="cpu-small", description=f"one of {', '.join(PRESETS)}")
    model: str | None = Field(default=None, description="model path, hub id, .gguf or embedded:smollm2")
    split: str | None = Field(
        default=None, pattern=r"^[^/\\]+$", description="training split (default: the corpus's *train* split)"
    )
    limit: int | None = Field(default=None, ge=1, description="at most this many training records")
    reward: str = Field(default="f1", description="f1 (question F1, Eq. 2) or sr (outcome, Eq. 3)")
    oracle: str = Field(default="det", description="training oracle (the deterministic one by default)")
    max_updates: int | None = Field(default=None, ge=1, description="stop after this many updates in this run")
    requests: int | None = Field(default=None, ge=1, description="requests per rollout batch (preset's default)")
    trajectories: int | None = Field(default=None, ge=2, description="trajectories per request K (preset's)")
    device: str | None = Field(default=None, description="cpu, cuda or cuda:N (default: cuda when present)")


def training_tasks(
    records: pl.DataFrame, split: str | None, limit: int | None, record_ids: list[str] | None = None
) -> tuple[list[Task], str]:
    """The training records: ``split``, else the one split whose name contains 'train'; a resumed
    run passes its ``record_ids`` (run.json) and gets exactly those, in that order."""
    tasks = [Task.from_record(r) for r in records_from_frame(records)]
    splits = sorted({t.split for t in tasks})
    if split is None:
        trains = [s for s in splits if "train" in s]
        if len(trains) != 1:
            raise ValueError(f"no single training split among {', '.join(splits)}; choose one with --split")
        split = trains[0]
    picked = [t for t in tasks if t.split == split]
    if not picked:
        raise ValueError(f"no records of split {split!r}; splits: {', '.join(splits)}")
    if record_ids is not None:
        by_id = {t.record_id: t for t in picked}
        missing = [r for r in record_ids if r not in by_id]
        if missing:
            raise ValueError(
                f"{len(missing)} training record(s) of this run are no longer in the corpus (e.g. {missing[0]})"
            )
        return [by_id[r] for r in record_ids], split
    return (picked[:limit] if limit else picked), split


@asset(
    name=CHECKPOINT,
    partitions_def=corpus_partitions,
    group_name=GROUP,
    code_version="1",
    ins={"records": AssetIn(RECORDS)},
    config_schema=checked_config(AmbitabTrainConfig),  # run_id, split, model confined before launch (#45 item 1)
    description="A trained asker (LoRA adapter + training curve), multi-turn GRPO on the corpus's training split.",
)
def ambitab_asker_checkpoint(context: AssetExecutionContext, council: CouncilResource, records: pl.DataFrame):
    config = AmbitabTrainConfig(**op_config(context))
    # lazy: torch and transformers load only when a training run executes, never at definitions load
    from pipelines.ambitab.protocol.oracles import make_oracle
    from pipelines.ambitab.protocol.runs import make_solver
    from pipelines.ambitab.training.model import (
        ModelError,
        load_model,
        load_tokenizer,
        resolve_device,
        set_threads,
    )
    from pipelines.ambitab.training.presets import get_preset, resolve_model
    from pipelines.ambitab.training.trainer import Trainer

    corpus = context.partition_key
    run_dir = checkpoints_root() / config.run_id
    if not run_dir.is_dir():
        raise Failure(f"training run folder {run_dir} does not exist; start runs with `quandary ambitab train`")
    run = read_run(run_dir) if (run_dir / "run.json").is_file() else None
    try:
        preset = get_preset(
            config.preset,
            model=config.model,
            reward=config.reward,
            requests_per_rollout=config.requests,
            trajectories=config.trajectories,
        )
        tasks, split = training_tasks(records, config.split, config.limit, run["train_record_ids"] if run else None)
        oracle = make_oracle(config.oracle, corpus)
        # question F1 ends after clarification; the outcome reward needs SQL (the solvers council)
        solver = make_solver("llm", council.get_council) if preset.reward == "sr" else None
        device = resolve_device(config.device)
        threads = set_threads()
        src = resolve_model(preset.model)
        tok = load_tokenizer(src)
        model = load_model(src, device=device)
    except (ValueError, ModelError) as exc:
        raise Failure(f"invalid training config: {exc}") from exc
    context.log.info(f"{src.ref} on {device} ({threads} torch threads); {len(tasks)} {split} records")
    trainer = Trainer(
        preset, tasks, oracle, run_dir, model, tok, model_ref=src.ref, solver=solver, progress=context.log.info
    )
    meta = {"corpus": corpus, "split": split, "limit": config.limit, "tokenizer": src.ref, "oracle_kind": config.oracle}
    start = trainer.start(meta)
    stop_at = preset.updates if config.max_updates is None else min(preset.updates, start + config.max_updates)
    interrupted: BaseException | None = None
    # a line per update in the run log; on the terminal the live bar carries the last update's numbers
    with step_progress(context, total=stop_at - start, step="training", line_every_s=30.0) as p:

        def show(line: str) -> None:
            context.log.info(line)
            p.step = line  # the live bar shows the last update's reward, KL, entropy, kept groups
            p.advance(1)

        trainer.progress = show
        try:
            trainer.train(max_updates=stop_at - start)
        except BaseException as exc:  # Ctrl-C, a termination: keep every finished update
            interrupted = exc
            if trainer.update > (read_state(run_dir) or {}).get("update", 0):
                trainer.save()
            context.log.warning(f"training interrupted after update {trainer.update}; checkpoint saved")
    state = read_state(run_dir) or {}
    df = curve_frame(trainer.curve)
    png = curve_png(df, chart_path(context, CHECKPOINT, df))
    last = df.tail(1).to_dicts()[0] if df.height else {}
    yield artifact_output(
        df,
        checkpoint=f"checkpoint:{run_dir.name}",
        run_id=run_dir.name,
        adapter_dir=path_markdown(str(run_dir / state.get("dir", "") / "adapter")),
        updates=int(state.get("update", 0)),
        horizon=preset.updates,
        model=src.ref,
        tokenizer=src.ref,
        preset=MetadataValue.json(preset.to_dict()),
        oracle=oracle.name,
        split=split,
        train_records=len(tasks),
        reward_last=last.get("reward"),
        **chart_metadata(png, "asker training curve"),
        curve=MetadataValue.md(preview_markdown(df, rows=20) if df.height else "no updates yet"),
        run_json=MetadataValue.json(
            json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").is_file() else {}
        ),
        interrupted=interrupted is not None,
    )
    if interrupted is not None:
        raise interrupted  # the checkpoint above is recorded; the run still reads as interrupted


AMBITAB_TRAIN_ASSETS = [ambitab_asker_checkpoint]
