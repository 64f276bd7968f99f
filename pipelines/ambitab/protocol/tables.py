"""Metric tables like the paper's Table 8 (corpus × oracle) and Table 10 (per asker prompt), as
frames, markdown and a PNG chart.

One metrics row per run key (corpus, solver + model, budget, options, oracle + model, evaluated
asker + prompt + model; runs under different keys never pool): NoDis, Asker and Full SR, Prec, Rec,
F1, asking gain and gap (mean ± sample SD over seeds, %), and the four leakage diagnostics with
their seed SD and 95% AVT-cluster bootstrap interval (points). Hybrid and stress-test runs feed the
diagnostics and are not rows of their own.
"""

from collections.abc import Sequence
from pathlib import Path

import polars as pl

from pipelines.ambitab.protocol.askers import BASELINES
from pipelines.ambitab.protocol.diagnostics import (
    assign_donors,
    diagnostic,
    donor_clusters,
    leakage_diagnostics,
)
from pipelines.ambitab.protocol.metrics import SETTING_KEYS, gain_and_gap, mean_sd, per_seed, with_key_columns
from pipelines.ambitab.protocol.runs import reference_oracle_name
from pipelines.ambitab.protocol.task import Task
from pipelines.core.stats import DEFAULT_RESAMPLES
from storage.charts import png_chart

DIAGNOSTICS = ("d_j_resp", "d_j_full", "d_rec_none", "d_rec_spec")
DIAG_TITLES = {"d_j_resp": "ΔJresp", "d_j_full": "ΔJfull", "d_rec_none": "ΔRecnone", "d_rec_spec": "ΔRecspec"}


def _sr(seeds: pl.DataFrame, asker: str, oracle: str | None, prompt: str | None = None):
    f = seeds.filter((pl.col("asker") == asker) & ~pl.col("spec_donor_run"))
    if oracle is not None:
        f = f.filter(pl.col("oracle") == oracle)
    if prompt is not None:
        f = f.filter(pl.col("prompt") == prompt)
    by_seed = f.group_by("seed").agg(pl.col("sr").mean()).sort("seed")
    return mean_sd([None if v is None else 100 * v for v in by_seed["sr"].to_list()])


def _main_oracles(episodes: pl.DataFrame) -> list[tuple[str, str]]:
    pairs = episodes.select("oracle", "oracle_model").unique().sort("oracle", "oracle_model").rows()
    return [(o, m) for o, m in pairs if not o.startswith("hybrid_") and "+stress" not in o]


def _covers(run: pl.DataFrame, wanted: pl.DataFrame) -> int:
    """How many of the (record, seed) pairs in ``wanted`` ``run`` has an episode for."""
    return wanted.join(run.select("record_id", "seed").unique(), on=["record_id", "seed"], how="semi").height


def metrics_rows(
    episodes: pl.DataFrame, tasks: Sequence[Task], *, n_resamples: int = DEFAULT_RESAMPLES
) -> pl.DataFrame:
    """One row per run key (:data:`~pipelines.ambitab.protocol.metrics.RUN_KEYS` less the baselines):
    runs of different solvers, models, budgets or options never pool. NoDis, Full, gain and gap of a
    row are over the records and seeds of the row's own asker run; when the baseline runs do not
    cover all of them, they are None ("–", cannot decide) and ``notes`` says why."""
    if episodes.height == 0:
        return pl.DataFrame()
    episodes = with_key_columns(episodes)
    rows: list[dict] = []
    for key, eps in episodes.group_by(list(SETTING_KEYS), maintain_order=True):
        rows += _setting_rows(eps, dict(zip(SETTING_KEYS, key)), tasks, n_resamples)
    return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()


def _setting_rows(episodes: pl.DataFrame, setting: dict, tasks: Sequence[Task], n_resamples: int) -> list[dict]:
    corpus = setting["corpus"]
    reference = reference_oracle_name(corpus)
    donors = assign_donors(tasks) if tasks else {}
    clusters = donor_clusters(tasks, donors) if donors else None
    evaluated = (
        episodes.filter(~pl.col("asker").is_in(list(BASELINES)) & (pl.col("spec_donor") == ""))
        .select("asker", "prompt", "asker_model")
        .unique()
        .sort("asker", "prompt", "asker_model")
        .rows()
    )
    # without an evaluated asker, a row per baseline asked for (none, full, full_adv, generic; #24 item 7)
    baselines = sorted(
        set(
            episodes.filter(pl.col("asker").is_in(list(BASELINES)) & (pl.col("spec_donor") == ""))
            .select("asker", "prompt", "asker_model")
            .rows()
        ),
        key=lambda apm: (BASELINES.index(apm[0]), apm[1], apm[2]),
    )
    rows = []
    for oracle, oracle_model in _main_oracles(episodes):
        for asker, prompt, asker_model in evaluated or baselines or [("full", "", "")]:
            # one model per role: the deterministic parts ("") and this row's LLMs
            sub = episodes.filter(
                pl.col("oracle_model").is_in([oracle_model, ""]) & pl.col("asker_model").is_in([asker_model, ""])
            )
            run = sub.filter(
                (pl.col("asker") == asker)
                & (pl.col("oracle") == oracle)
                & (pl.col("prompt") == prompt)
                & (pl.col("asker_model") == asker_model)
                & (pl.col("spec_donor") == "")
            )
            if run.height == 0:
                continue
            wanted = run.select("record_id", "seed").unique()
            sub = sub.join(run.select("record_id").unique(), on="record_id", how="semi")
            seeds = per_seed(sub)
            run_seeds = seeds.filter(
                (pl.col("asker") == asker)
                & (pl.col("oracle") == oracle)
                & (pl.col("prompt") == prompt)
                & ~pl.col("spec_donor_run")
            )
            row = {
                "kind": "main",
                **setting,
                "oracle": oracle,
                "oracle_model": oracle_model,
                "asker": asker,
                "prompt": prompt,
                "asker_model": asker_model,
                # the asker saw the hidden terms (issue 34 item 10): marked in every table and export
                "privileged": bool(run["privileged"].fill_null(False).any()) if "privileged" in run.columns else None,
                "seeds": run_seeds.height,
                "records": run["record_id"].n_unique(),
                "episodes": run.height,
            }
            notes = []
            n_none = _covers(sub.filter((pl.col("asker") == "none") & (pl.col("spec_donor") == "")), wanted)
            n_full = _covers(
                sub.filter((pl.col("asker") == "full") & (pl.col("oracle") == oracle) & (pl.col("spec_donor") == "")),
                wanted,
            )
            none_ok, full_ok = n_none == wanted.height, n_full == wanted.height
            if not none_ok:
                notes.append(f"NoDis/gain: the none run covers {n_none} of {wanted.height} (record, seed) pairs")
            if not full_ok:
                notes.append(f"Full/gap: the full run covers {n_full} of {wanted.height} (record, seed) pairs")
            row["nodis"], row["nodis_sd"] = _sr(seeds, "none", None) if none_ok else (None, None)
            row["asker_sr"], row["asker_sr_sd"] = _sr(seeds, asker, oracle, prompt)
            row["full_sr"], row["full_sr_sd"] = _sr(seeds, "full", oracle) if full_ok else (None, None)
            for m in ("prec", "rec", "f1"):
                row[m], row[f"{m}_sd"] = mean_sd([None if v is None else 100 * v for v in run_seeds[m].to_list()])
            gg = gain_and_gap(sub, corpus, oracle, asker=asker, prompt=prompt)
            if not none_ok:
                gg["gain"] = gg["gain_sd"] = None
            if not full_ok:
                gg["gap"] = gg["gap_sd"] = None
            row.update(gg)
            diag = leakage_diagnostics(
                sub,
                corpus,
                oracle,
                reference,
                deterministic=oracle.startswith("det_"),
                asker=asker,
                prompt=prompt,
                donor_clusters_map=clusters,
                n_resamples=n_resamples,
            )
            for k in DIAGNOSTICS:
                d = diag.get(k)
                row[k] = d["value"] if d else None
                row[f"{k}_sd"] = d["sd"] if d else None
                row[f"{k}_lo"] = d["ci"].low if d else None
                row[f"{k}_hi"] = d["ci"].high if d else None
                row[f"{k}_clusters"] = d["ci"].clusters if d else None
            row["fallback_stops"] = int(run_seeds["fallback_stops"].sum()) if run_seeds.height else 0
            row["unverified"] = int((run_seeds["episodes"] - run_seeds["n_verified"]).sum()) if run_seeds.height else 0
            row["notes"] = "; ".join(notes)
            rows.append(row)
    for r in stress_rows(episodes, [(a, p) for a, p, _ in evaluated], n_resamples=n_resamples):
        rows.append({**r, **setting})
    return rows


def _eps(episodes, asker, oracle, prompt=None):
    f = episodes.filter((pl.col("asker") == asker) & (pl.col("oracle") == oracle) & (pl.col("spec_donor") == ""))
    return f if prompt is None else f.filter(pl.col("prompt") == prompt)


def stress_rows(episodes: pl.DataFrame, evaluated, *, n_resamples: int = DEFAULT_RESAMPLES) -> list[dict]:
    """E.1 stress test, "changed − default" paired by record and seed (Table 15): the matcher is the
    same in both runs, so the hybrid terms cancel and ΔJresp, ΔJfull, ΔRecnone differences are
    differences of the plain runs (evaluated asker, π_full^adv, generic on credits without the
    response)."""
    out = []
    names = sorted(set(episodes["oracle"].to_list()))
    for stressed in (o for o in names if "+stress" in o):
        base = stressed.split("+stress")[0]
        if base not in names:
            continue
        for asker, prompt in evaluated or [("", "")]:
            row = {
                "kind": "stress",
                "corpus": episodes["corpus"][0],
                "oracle": stressed,
                "asker": asker,
                "prompt": prompt,
                "seeds": None,
            }
            parts = {
                "d_j_resp": (asker, "verdict", prompt),
                "d_j_full": ("full_adv", "verdict", None),
                "d_rec_none": ("generic", "recall_no_response", None),
            }
            for k, (a, col, p) in parts.items():
                d = diagnostic(_eps(episodes, a, stressed, p), _eps(episodes, a, base, p), col, n_resamples=n_resamples)
                row[k], row[f"{k}_sd"] = d["value"], d["sd"]
                row[f"{k}_lo"], row[f"{k}_hi"], row[f"{k}_clusters"] = d["ci"].low, d["ci"].high, d["ci"].clusters
            out.append(row)
    return out


# ------------------------------------------------------------------------------ rendering


def _pm(v, sd, digits=1) -> str:
    if v is None:
        return "–"
    return f"{v:.{digits}f}" + (f"±{sd:.{digits}f}" if sd is not None else "")


NOT_ESTIMABLE = "not estimable (one cluster)"


def _diag(row: dict, k: str) -> str:
    if row.get(k) is None:
        return "–"
    if row.get(f"{k}_lo") is not None:
        ci = f" [{row[f'{k}_lo']:.1f}, {row[f'{k}_hi']:.1f}]"
    elif row.get(f"{k}_clusters") == 1:  # the AVT–donor graph is one component: no interval
        ci = f" [{NOT_ESTIMABLE}]"
    else:
        ci = ""
    return _pm(row[k], row.get(f"{k}_sd")) + ci


PRIVILEGED_MARK = " ⚑privileged"
PRIVILEGED_NOTE = (
    "⚑privileged: the asker sees the hidden ambiguous terms (a reference policy, or a custom asker with "
    "`privileged = True`); its Prec / Rec / F1 and SR are an upper bound, not comparable with other askers."
)


def asker_label(r: dict) -> str:
    """The asker as every table shows it: name, prompt, and the privileged mark (issue 34 item 10)."""
    return (
        r["asker"] + (f" ({r['prompt']})" if r.get("prompt") else "") + (PRIVILEGED_MARK if r.get("privileged") else "")
    )


AGGREGATION = (
    "Each row aggregates the episodes of one key: corpus · solver (+ its model) · budget (C in "
    "|Amb| + C) · options · oracle (+ model) · asker (+ prompt, + model); mean ± SD over the row's "
    "seeds. `records` and `episodes` count the row's own asker run; NoDis, Full, gain and gap are over "
    'the same records and seeds ("–" when those runs do not cover them, or no solver wrote SQL).'
)


def _models(r: dict) -> str:
    names = [r.get(k) or "" for k in ("asker_model", "oracle_model", "solver_model")]
    return ", ".join(dict.fromkeys(n for n in names if n)) or "–"


def table8_markdown(metrics: pl.DataFrame, prompt: str | None = None) -> str:
    """Corpus × solver × oracle × asker: NoDis, Asker, Full, Prec, Rec, F1, gain, gap and the four
    diagnostics, with the run key (solver, models, budget, options) and the row's counts."""
    if metrics.height == 0:
        return "_no episodes yet_"
    head = [
        "corpus",
        "solver",
        "oracle",
        "asker",
        "models",
        "budget",
        "options",
        "records",
        "episodes",
        "NoDis",
        "Asker",
        "Full",
        "Prec",
        "Rec",
        "F1",
        "gain",
        "gap",
        *DIAG_TITLES.values(),
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in metrics.iter_rows(named=True):
        if r.get("kind", "main") != "main" or (prompt is not None and r["prompt"] not in (prompt, "")):
            continue
        asker = asker_label(r)
        budget = "–" if r.get("budget") is None else f"+{r['budget']}"
        cells = [
            r["corpus"],
            str(r.get("solver") or "–"),
            r["oracle"],
            asker,
            _models(r),
            budget,
            str(r.get("options") or "–"),
            str(r.get("records", "–")),
            str(r.get("episodes", "–")),
            _pm(r["nodis"], r["nodis_sd"]),
            _pm(r["asker_sr"], r["asker_sr_sd"]),
            _pm(r["full_sr"], r["full_sr_sd"]),
            _pm(r["prec"], r["prec_sd"]),
            _pm(r["rec"], r["rec_sd"]),
            _pm(r["f1"], r["f1_sd"]),
            _pm(r["gain"], r["gain_sd"]),
            _pm(r["gap"], r["gap_sd"]),
            *(_diag(r, k) for k in DIAG_TITLES),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    notes = [
        f"- {r['corpus']} · {r.get('solver')} · {r['oracle']} · {r['asker']}: {r['notes']}"
        for r in metrics.iter_rows(named=True)
        if r.get("kind", "main") == "main" and r.get("notes")
    ]
    if any(r.get("privileged") for r in metrics.iter_rows(named=True)):
        notes.append(f"- {PRIVILEGED_NOTE}")
    return "\n".join(lines + (["", "Notes:", *notes] if notes else []))


def table15_markdown(metrics: pl.DataFrame) -> str:
    """E.1 stress test: the responder's reference-SQL access changed − default, with 95% CIs."""
    if metrics.height == 0 or "kind" not in metrics.columns:
        return "_no stress-test runs_"
    f = metrics.filter(pl.col("kind") == "stress")
    if f.height == 0:
        return "_no stress-test runs_"
    lines = ["| corpus | oracle (changed) | asker | ΔJresp | ΔJfull | ΔRecnone |", "|---|---|---|---|---|---|"]
    for r in f.iter_rows(named=True):
        lines.append(
            f"| {r['corpus']} | {r['oracle']} | {asker_label(r)} | "
            + " | ".join(_diag(r, k) for k in ("d_j_resp", "d_j_full", "d_rec_none"))
            + " |"
        )
    return "\n".join(lines)


def table10_markdown(metrics: pl.DataFrame, oracle_prefix: str = "det_") -> str:
    """Per corpus, SR / Prec / Rec of the LLM asker for each prompt (deterministic oracle)."""
    if metrics.height == 0:
        return "_no episodes yet_"
    f = metrics.filter(pl.col("oracle").str.starts_with(oracle_prefix) & (pl.col("asker") == "llm"))
    if "kind" in f.columns:
        f = f.filter(pl.col("kind") == "main")
    prompts = sorted(set(f["prompt"].to_list()))
    if not prompts:
        return "_no LLM-asker runs under the deterministic oracle_"
    has_solver = "solver" in f.columns
    lines = ["| corpus | solver | " + " | ".join(prompts) + " |", "|---|---|" + "---|" * len(prompts)]
    keys = sorted(set(f.select("corpus", "solver").rows() if has_solver else [(c, "–") for c in f["corpus"]]))
    for corpus, solver in keys:
        cells = []
        for p in prompts:
            r = f.filter((pl.col("corpus") == corpus) & (pl.col("prompt") == p))
            if has_solver:
                r = r.filter(pl.col("solver") == solver)
            if r.height == 0:
                cells.append("–")
                continue
            r = r.row(0, named=True)
            cells.append("/".join("–" if r[m] is None else f"{r[m]:.1f}" for m in ("asker_sr", "prec", "rec")))
        lines.append(f"| {corpus} | {solver} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\nCells: SR / Prec / Rec (%)."


def chart_png(metrics: pl.DataFrame, path: Path) -> Path:
    """Grouped bars per (corpus, oracle, asker): NoDis, Asker and Full SR with seed-SD error bars."""
    rows = [r for r in metrics.iter_rows(named=True) if r.get("kind", "main") == "main"] if metrics.height else []
    labels = [
        f"{r['corpus']} · {r.get('solver') or ''}\n{r['oracle']}\n{r['asker']}{'/' + r['prompt'] if r['prompt'] else ''}"
        for r in rows
    ]
    with png_chart(path, figsize=(max(5.0, 1.6 * len(rows) + 1), 3.6)) as ax:
        width = 0.26
        for j, (key, name) in enumerate((("nodis", "NoDis"), ("asker_sr", "Asker"), ("full_sr", "Full"))):
            xs = [i + (j - 1) * width for i in range(len(rows))]
            ys = [r[key] or 0.0 for r in rows]
            err = [r.get(f"{key}_sd") or 0.0 for r in rows]
            ax.bar(xs, ys, width, yerr=err, label=name, capsize=2)
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_ylabel("success rate (%)")
        ax.set_ylim(0, 100)
        ax.legend(fontsize=7, loc="upper left")
        ax.set_title("AmbiTab success rate: NoDis / Asker / Full", fontsize=9)
    return path
