"""Episode and population metrics of AmbiTab (spec §6.1–§6.2).

Episode quantities (questions i = 1..n, cred_i ⊆ Amb, cred_≤i = ∪_{j≤i} cred_j):

- recall r = |cred_≤n| / |Amb|, defined iff |Amb| ≥ 1 and the episode is not a fallback stop;
- precision p = |{i : cred_i ⊄ cred_≤i-1}| / n, defined iff n ≥ 1 (∅ credits and repeats are
  unproductive, the stop is not counted). [I] fallback stops keep their precision: their questions
  were asked and answered; the paper only omits them from recall and F1;
- f1 = 2pr/(p+r), 0 when p = r = 0; defined when recall is. [I] An episode with n = 0 has p
  undefined and r = 0, so its f1 is 0.

Population: SR = mean verdict over every verifiable record (controls included; an asking-only run
with no solver has no verdict, so its SR is undefined, printed "–"); Rec, Prec, F1 =
means over the eligible episodes; every eligible episode weighs the same (macro). Runs are summarised
per seed, then as mean ± sample SD over seeds (SD is None with one seed).
"""

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import polars as pl


@dataclass(frozen=True)
class EpisodeScores:
    recall: float | None
    precision: float | None
    f1: float | None
    productive: int
    n: int


def episode_scores(n_amb: int, credits: Sequence[Iterable[str]], fallback: bool = False) -> EpisodeScores:
    seen: set[str] = set()
    productive = 0
    for cred in credits:
        cred = set(cred)
        if not cred <= seen:
            productive += 1
        seen |= cred
    n = len(credits)
    precision = productive / n if n else None
    recall = None if (n_amb < 1 or fallback) else min(len(seen), n_amb) / n_amb
    f1 = None
    if recall is not None:
        p = precision or 0.0
        f1 = 0.0 if p + recall == 0 else 2 * p * recall / (p + recall)
    return EpisodeScores(recall, precision, f1, productive, n)


def mean_sd(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """Mean and sample SD (ddof = 1) of the non-missing values; SD is None below two values."""
    xs = [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not xs:
        return None, None
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else None)


# What a run is (issue 20): the setting (solver and its model, budget, options) and the condition
# (oracle and its model, asker with prompt and model, spec-randomised?). Runs never pool across keys.
SETTING_KEYS = ("corpus", "solver", "solver_model", "budget", "options")
RUN_KEYS = (*SETTING_KEYS, "oracle", "oracle_model", "asker", "prompt", "asker_model", "spec_donor_run")
NOT_RECORDED = "(not recorded)"


def with_key_columns(episodes: pl.DataFrame) -> pl.DataFrame:
    """Episodes stored before the key columns existed get them as "(not recorded)" (budget 2, the
    only budget those runs had), so old rows stay apart from every run that records its keys."""
    fill = {
        "asker_model": NOT_RECORDED,
        "oracle_model": NOT_RECORDED,
        "solver_model": NOT_RECORDED,
        "solver": NOT_RECORDED,
        "budget": 2,
        "options": NOT_RECORDED,
    }
    missing = [pl.lit(v).alias(c) for c, v in fill.items() if c not in episodes.columns]
    return episodes.with_columns(missing) if missing else episodes


def with_run_keys(episodes: pl.DataFrame) -> pl.DataFrame:
    """Adds ``spec_donor_run`` (True for spec-randomised runs), so they never pool with real ones."""
    return with_key_columns(episodes).with_columns((pl.col("spec_donor") != "").alias("spec_donor_run"))


def per_seed(episodes: pl.DataFrame, keys: Sequence[str] = RUN_KEYS) -> pl.DataFrame:
    """One row per run and seed: SR, Rec, Prec, F1 with their eligible counts.

    Pooling a corpus's splits happens here (split is not a key), each metric over its own
    eligible denominator."""
    df = with_run_keys(episodes)
    return (
        df.group_by([*keys, "seed"])
        .agg(
            pl.col("verdict").cast(pl.Float64).mean().alias("sr"),
            pl.col("recall").mean().alias("rec"),
            pl.col("precision").mean().alias("prec"),
            pl.col("f1").mean().alias("f1"),
            pl.col("recall_no_response").mean().alias("rec_no_response"),
            pl.len().alias("episodes"),
            pl.col("verdict").is_not_null().sum().alias("n_verified"),
            pl.col("recall").is_not_null().sum().alias("n_recall"),
            pl.col("precision").is_not_null().sum().alias("n_precision"),
            pl.col("fallback_stop").sum().alias("fallback_stops"),
        )
        .sort([*keys, "seed"])
    )


METRICS = ("sr", "rec", "prec", "f1")


def summarise(episodes: pl.DataFrame, keys: Sequence[str] = RUN_KEYS) -> pl.DataFrame:
    """Mean ± sample SD over seeds of each metric (in %, like the paper's tables)."""
    seeds = per_seed(episodes, keys)
    rows = []
    for key, grp in seeds.group_by(list(keys), maintain_order=True):
        row = dict(zip(keys, key))
        row["seeds"] = grp.height
        for m in METRICS:
            mu, sd = mean_sd([None if v is None else 100 * v for v in grp[m].to_list()])
            row[m], row[f"{m}_sd"] = mu, sd
        row["episodes"] = int(grp["episodes"].sum())
        row["fallback_stops"] = int(grp["fallback_stops"].sum())
        row["unverified"] = int((grp["episodes"] - grp["n_verified"]).sum())
        rows.append(row)
    return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()


def _seed_sr(seeds: pl.DataFrame, corpus: str, asker: str, oracle: str | None = None) -> dict[int, float]:
    f = seeds.filter((pl.col("corpus") == corpus) & (pl.col("asker") == asker) & ~pl.col("spec_donor_run"))
    if oracle is not None:
        f = f.filter(pl.col("oracle") == oracle)
    out: dict[int, list[float]] = {}
    for s, sr in zip(f["seed"].to_list(), f["sr"].to_list()):
        if sr is not None:
            out.setdefault(s, []).append(sr)
    return {s: statistics.fmean(v) for s, v in out.items()}


def gain_and_gap(
    episodes: pl.DataFrame, corpus: str, oracle: str, asker: str = "llm", prompt: str | None = None
) -> dict:
    """Asking gain (SR_ask − SR_none) and gap (SR_full − SR_ask, signed, never truncated), each
    computed within a seed, then mean ± SD over seeds, in SR points. SR_none does not depend on the
    oracle, so it is taken once per seed from any oracle's no-disambiguation run (spec §9.13)."""
    df = episodes if prompt is None else episodes.filter((pl.col("asker") != asker) | (pl.col("prompt") == prompt))
    seeds = per_seed(df, ("corpus", "oracle", "asker", "spec_donor_run"))
    none = _seed_sr(seeds, corpus, "none")
    ask = _seed_sr(seeds, corpus, asker, oracle)
    full = _seed_sr(seeds, corpus, "full", oracle)
    gains = [100 * (ask[s] - none[s]) for s in ask if s in none]
    gaps = [100 * (full[s] - ask[s]) for s in ask if s in full]
    g, g_sd = mean_sd(gains)
    p, p_sd = mean_sd(gaps)
    return {"gain": g, "gain_sd": g_sd, "gap": p, "gap_sd": p_sd}
