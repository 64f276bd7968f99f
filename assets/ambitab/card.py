"""The AmbiTab jobs' cards (#28 item 1): the corpus conversion and the evaluation of asking policies."""

import polars as pl

from assets.ambitab.corpus import AmbitabBuildConfig
from assets.ambitab.definitions import ambitab_corpus_job, ambitab_eval_job, ambitab_train_job
from assets.ambitab.evaluation import EPISODES, METRICS, AmbitabEvalConfig
from assets.ambitab.training import CHECKPOINT, AmbitabTrainConfig
from assets.shared.cards import JobCard, Plan, op_config, op_values
from assets.shared.preflight import PreflightError, check_council
from pipelines.ambitab.protocol.oracles import canonical_oracle
from pipelines.ambitab.protocol.runs import check_names, plan_conditions
from pipelines.ambitab.protocol.tables import table8_markdown
from pipelines.ambitab.training.checkpoints import checkpoints_root, read_curve, read_run, read_state
from pipelines.ambitab.training.presets import get_preset
from storage.stores import artifact_store, latest_frame

CORPUS_OP = "ambitab_corpus"


def _metadata(result, node: str, asset: str | None = None) -> dict:
    meta = {}
    for mat in result.asset_materializations_for_node(node):
        if asset is None or mat.asset_key.to_user_string() == asset:
            meta = {k: getattr(v, "value", v) for k, v in mat.metadata.items()}
    return meta


def corpus_config(**values) -> dict:
    """Run config of one conversion (AmbitabBuildConfig fields; None = the default)."""
    return op_config(CORPUS_OP, AmbitabBuildConfig, values)


def corpus_metadata(result) -> dict:
    """What the conversion's ``ambitab_records`` materialization recorded (records, avts, rejects, skipped steps)."""
    return _metadata(result, CORPUS_OP, "ambitab_records")


def corpus_summary(result, partition: str) -> list[str]:
    meta = corpus_metadata(result)
    return [f"{partition}: {meta.get('records')} records, {meta.get('avts')} AVTs, {meta.get('rejects')} rejects"]


def eval_config(**values) -> dict:
    """Run config of one evaluation (AmbitabEvalConfig fields; None = the default)."""
    return op_config(EPISODES, AmbitabEvalConfig, values)


def eval_estimate(partition: str, run_config: dict | None, council_path: str | None = None) -> Plan:
    cfg = AmbitabEvalConfig(**op_values(run_config, EPISODES))
    frame = latest_frame("ambitab_records", partition)
    n = 0
    if frame is not None:
        if cfg.split is not None and "split" in frame.columns:
            frame = frame.filter(pl.col("split") == cfg.split)
        n = frame.height if cfg.limit is None else min(frame.height, cfg.limit)
    conditions = plan_conditions(
        cfg.askers, cfg.oracles, cfg.prompts, diagnostics=cfg.diagnostics, spec_randomisation=cfg.spec_randomisation
    )
    episodes = n * len(conditions) * len(cfg.seeds)
    llm_askers = sum(1 for c in conditions if c.asker == "llm")
    calls = len(cfg.seeds) * n * (len(conditions) * (1 if cfg.solver else 0) + llm_askers)
    return Plan(
        items=f"{episodes} episodes ({n} records × {len(conditions)} conditions × {len(cfg.seeds)} seeds)",
        calls=calls,
        role="solvers",
        detail="a solver call per episode, plus the LLM asker's",
        shrink="--limit 5 --seeds 1 (five records, one seed)",
    )


def eval_preflight(partition: str, run_config: dict | None, council_path: str | None = None) -> None:
    """Every option of an evaluation checked before its run exists, one line each (#31 item 1): a
    record limit and a seed count of at least one, a split the corpus's records have, known askers
    (a custom one a class with ``decide()``), oracles and prompts, and an oracle's ``@member`` in the
    council's oracles role."""
    values = op_values(run_config, EPISODES)
    limit, seeds = values.get("limit"), values.get("seeds")
    if limit is not None and limit < 1:
        raise PreflightError(f"--limit {limit}: give at least 1 record (or leave it out for all)")
    if seeds is not None and not seeds:
        raise PreflightError("--seeds 0: give at least 1 seed (seeds are 0..N-1)")
    if any(not isinstance(s, int) or s < 0 for s in seeds or []):
        raise PreflightError(f"seeds {seeds}: expected whole numbers ≥ 0")
    try:
        cfg = AmbitabEvalConfig(**values)
        check_names(cfg.askers, cfg.oracles, cfg.prompts, cfg.solver)
    except ValueError as exc:  # pydantic's ValidationError is one
        raise PreflightError(f"ambitab eval: {' '.join(str(exc).split())}") from None
    if cfg.split is not None:
        frame = latest_frame("ambitab_records", partition)
        if frame is None:
            raise PreflightError(
                f"--split {cfg.split!r}: no {partition} records materialized; run "
                f"`quandary ambitab build --corpus {partition}` first"
            )
        splits = sorted(set(frame["split"].drop_nulls())) if frame is not None and "split" in frame.columns else []
        if cfg.split not in splits:
            raise PreflightError(
                f"--split {cfg.split!r}: {partition} has no such split; splits: {', '.join(splits) or 'none'}"
            )
    members = [m for o in cfg.oracles if (m := canonical_oracle(o).partition("@")[2])]
    if members:
        council = check_council(council_path)
        known = council.councils.get("oracles", [])
        bad = [m for m in members if m not in known]
        if bad:
            raise PreflightError(
                f"--oracle llm@{bad[0]}: no member {bad[0]!r} in the oracles council of "
                f"{council.source}; members: {', '.join(known) or 'none'}"
            )


def eval_summary(result, partition: str) -> list[str]:
    """Episodes new / reused / replaced, the LLM calls, and the corpus's Table 8 rows."""
    meta = _metadata(result, EPISODES)
    calls = ", ".join(
        f"{k.removeprefix('llm_calls_')} {v}" for k, v in sorted(meta.items()) if k.startswith("llm_calls_")
    )
    return [
        f"episodes: {meta.get('new_episodes', 0)} new, {meta.get('reused_episodes', 0)} reused, "
        f"{meta.get('replaced_episodes', 0)} replaced, {meta.get('kept_episodes', 0)} other stored kept, "
        f"{meta.get('fallback_stops', 0)} fallback stops, {meta.get('unverifiable', 0)} not verifiable here; "
        f"LLM calls: {meta.get('llm_calls', 0)}" + (f" ({calls})" if calls else ""),
        table8_markdown(artifact_store().read_latest(METRICS, partition)),
    ]


def corpus_preflight(partition: str, run_config: dict | None, council_path: str | None = None) -> None:
    """The conversion's options checked before its run exists (#42 item 1): a known corpus, a row
    cap of at least one, a malformed-row allowance of 0 or more, known LLM-step switch."""
    from pipelines.ambitab.record import CORPORA

    if partition not in CORPORA:
        raise PreflightError(f"--corpus {partition}: unknown corpus; corpora: {', '.join(CORPORA)}")
    values = op_values(run_config, CORPUS_OP)
    rows, malformed = values.get("max_rows"), values.get("allow_malformed")
    if rows is not None and rows < 1:
        raise PreflightError(f"--max-rows {rows}: give at least 1 source row (or leave it out for all)")
    if malformed is not None and malformed < 0:
        raise PreflightError(f"--allow-malformed {malformed}: give 0 (none allowed) or more")
    if values.get("llm_steps", "auto") not in ("auto", "on", "off"):
        raise PreflightError(f"--llm {values['llm_steps']}: use auto, on or off")


CORPUS_CARD = JobCard(
    job=ambitab_corpus_job,
    partitions="a source corpus",
    config=corpus_config,
    summary=corpus_summary,
    preflight=corpus_preflight,
)
EVAL_CARD = JobCard(
    job=ambitab_eval_job,
    partitions="a source corpus with built records",
    config=eval_config,
    estimate=eval_estimate,
    summary=eval_summary,
    preflight=eval_preflight,
)


def train_config(**values) -> dict:
    """Run config of one training run (AmbitabTrainConfig fields; None = the default). A model
    folder the CLI's user named is theirs to read: its folder becomes a read root of this process
    (runs launched elsewhere, the UI's, accept only confined paths; #45 item 1)."""
    from assets.shared.checked_config import allow_user_paths

    allow_user_paths(values, "model")
    return op_config(CHECKPOINT, AmbitabTrainConfig, values)


def _shape(preset: dict) -> tuple:
    """What a training update's time depends on: the model and the rollout batch's shape."""
    return tuple(preset.get(k) for k in ("model", "requests_per_rollout", "trajectories", "max_new_tokens"))


def _measured_s_per_update(preset) -> float | None:
    """Median seconds per update of earlier runs of the same model and batch shape (their
    curves), if any: another model's or another shape's timings say nothing about this one."""
    root = checkpoints_root()
    want = _shape(preset.to_dict())
    times = []
    for run in sorted(root.glob("*/run.json")) if root.is_dir() else []:
        try:
            if _shape(read_run(run.parent).get("preset", {})) != want:
                continue
        except (OSError, ValueError, AttributeError):
            continue
        times += [r["rollout_s"] + r["update_s"] for r in read_curve(run.parent)]
    return sorted(times)[len(times) // 2] if times else None


def train_estimate(partition: str, run_config: dict | None, council_path: str | None = None) -> Plan:
    cfg = AmbitabTrainConfig(**op_values(run_config, CHECKPOINT))
    p = get_preset(cfg.preset, model=cfg.model, requests_per_rollout=cfg.requests, trajectories=cfg.trajectories)
    state = read_state(checkpoints_root() / cfg.run_id) or {}
    done = int(state.get("update", 0))
    todo = p.updates - done if cfg.max_updates is None else min(p.updates - done, cfg.max_updates)
    per = _measured_s_per_update(p)
    eta = (
        f"about {per * todo / 60:.0f} min ({per:.0f} s per update measured on earlier runs of this model "
        "and batch shape)"
        if per
        else "time unmeasured for this model and batch shape"
    )
    return Plan(
        items=f"{todo} updates of {p.updates} ({done} done) × {p.requests_per_rollout} requests × "
        f"{p.trajectories} trajectories = {todo * p.requests_per_rollout * p.trajectories} rollouts "
        f"of {p.model}; {eta}",
        calls=0,
        detail="a local model; the deterministic oracle makes no LLM calls",
        shrink="--max-updates 2",
    )


_TRAIN_LEAST = {"limit": ("--limit", 1), "max_updates": ("--max-updates", 1), "requests": ("--requests", 1)}


def train_preflight(partition: str, run_config: dict | None, council_path: str | None = None) -> None:
    """Every training option checked before a run folder exists, one line each (#45 item 4):
    counts of at least one (K at least two: a group needs two trajectories to compare), a run id
    that is one folder name, a known preset, reward and device, and a split the records have."""
    values = op_values(run_config, CHECKPOINT)
    for key, (opt, least) in {**_TRAIN_LEAST, "trajectories": ("--trajectories", 2)}.items():
        v = values.get(key)
        if v is not None and (not isinstance(v, int) or v < least):
            why = " (a group compares K trajectories of a request)" if key == "trajectories" else ""
            raise PreflightError(f"ambitab train: {opt} {v}: give at least {least}{why}")
    split = values.get("split")
    if split is not None and (not isinstance(split, str) or not split or "/" in split or "\\" in split):
        raise PreflightError(f"ambitab train: --split {split!r}: a split name, not a path")
    try:
        cfg = AmbitabTrainConfig(**values)
        get_preset(cfg.preset, model=cfg.model, reward=cfg.reward)
    except ValueError as exc:  # pydantic's ValidationError is one
        raise PreflightError(f"ambitab train: {' '.join(str(exc).split())[:300]}") from None
    if cfg.device not in (None, "auto", "cpu") and not str(cfg.device).startswith("cuda"):
        raise PreflightError(f"ambitab train: --device {cfg.device!r}: use cpu, cuda or cuda:N")
    if cfg.split is not None:
        frame = latest_frame("ambitab_records", partition)
        splits = sorted(set(frame["split"].drop_nulls())) if frame is not None and "split" in frame.columns else []
        if cfg.split not in splits:
            raise PreflightError(
                f"ambitab train: --split {cfg.split!r}: {partition} has no such split; "
                f"splits: {', '.join(splits) or 'none'}"
            )


def train_summary(result, partition: str) -> list[str]:
    meta = _metadata(result, CHECKPOINT)
    return [
        f"{meta.get('checkpoint')}: {meta.get('updates')}/{meta.get('horizon')} updates on {meta.get('train_records')} "
        f"{meta.get('split')} records (oracle {meta.get('oracle')}; last reward {meta.get('reward_last')})",
        f"  adapter: {meta.get('adapter_dir')}",
        f"  evaluate on a held-out split: quandary ambitab eval --corpus {partition} --asker {meta.get('checkpoint')} "
        "--split <held-out split>",
    ]


TRAIN_CARD = JobCard(
    job=ambitab_train_job,
    partitions="a source corpus with built records",
    config=train_config,
    estimate=train_estimate,
    summary=train_summary,
    preflight=train_preflight,
)
