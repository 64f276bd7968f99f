"""Where training runs live and how ``checkpoint:<id>`` names one (plain Python, no torch).

    $QUANDARY_HOME/ambitab/checkpoints/<run_id>/
        run.json                 preset, corpus, oracle, model reference, training record ids
        curve.jsonl              one row per update (reward, precision, recall, KL, entropy, ...)
        state.json               the last complete checkpoint: {"update": n, "dir": "update_0008"}
        update_0008/adapter/     the LoRA adapter (peft) + tokenizer reference in run.json
        update_0008/trainer.pt   optimizer, scheduler and RNG state (resume)

A run id is new for every run (corpus, preset, UTC time, random suffix) and its folder is created
exclusively, so a run never writes into another's; ``--resume RUN_ID`` continues one.
"""

import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from storage.paths import quandary_home

PREFIX = "checkpoint:"


def checkpoints_root() -> Path:
    return quandary_home() / "ambitab" / "checkpoints"


def new_run_dir(corpus: str, preset: str, root: Path | None = None) -> Path:
    root = root or checkpoints_root()
    root.mkdir(parents=True, exist_ok=True)
    while True:
        run_id = f"{corpus}-{preset}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{secrets.token_hex(2)}"
        try:
            (root / run_id).mkdir()  # exclusive: never another run's folder
            return root / run_id
        except FileExistsError:
            continue


def write_json(path: Path, obj) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(obj, indent=1, sort_keys=True))
    os.replace(tmp, path)  # a kill mid-write leaves the previous state


def read_state(run_dir: Path) -> dict | None:
    p = run_dir / "state.json"
    return json.loads(p.read_text()) if p.is_file() else None


def read_run(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())


def read_curve(run_dir: Path, upto: int | None = None) -> list[dict]:
    p = run_dir / "curve.jsonl"
    if not p.is_file():
        return []
    rows = [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
    return [r for r in rows if upto is None or r["update"] <= upto]


@dataclass(frozen=True)
class CheckpointRef:
    run_id: str
    run_dir: Path
    update: int
    adapter_dir: Path
    run: dict

    @property
    def name(self) -> str:
        return f"{PREFIX}{self.run_id}@{self.update}"


def resolve_checkpoint(name: str, root: Path | None = None) -> CheckpointRef:
    """``checkpoint:<run_id>`` (its last checkpoint) or ``checkpoint:<run_id>@<update>``; a
    ValueError in one line when the run or the update does not exist."""
    body = name.removeprefix(PREFIX)
    run_id, _, upd = body.partition("@")
    root = root or checkpoints_root()
    run_dir = root / run_id
    if not run_id or "/" in run_id or not (run_dir / "run.json").is_file():
        raise ValueError(f"unknown checkpoint {name!r}; `quandary ambitab train` prints the run id (see {root})")
    if upd:
        if not upd.isdigit():
            raise ValueError(f"checkpoint {name!r}: the update after @ must be a number")
        update = int(upd)
    else:
        state = read_state(run_dir)
        if state is None:
            raise ValueError(f"checkpoint {name!r}: the run has no complete checkpoint yet")
        update = int(state["update"])
    adapter = run_dir / f"update_{update:04d}" / "adapter"
    if not (adapter / "adapter_config.json").is_file():
        raise ValueError(f"checkpoint {name!r}: no checkpoint at update {update}")
    return CheckpointRef(run_id, run_dir, update, adapter, read_run(run_dir))


def check_held_out(ref: CheckpointRef, tasks) -> None:
    """Evaluation never runs a trained asker on its training split or its training records."""
    run = ref.run
    same_split = [t for t in tasks if t.corpus == run.get("corpus") and t.split == run.get("split")]
    seen = set(run.get("train_record_ids") or []) & {t.record_id for t in tasks}
    if same_split or seen:
        raise ValueError(
            f"{ref.name} was trained on split {run.get('split')!r} of {run.get('corpus')} "
            f"({len({t.record_id for t in same_split} | seen)} of these records); "
            "evaluate it on a held-out split (--split)"
        )
