"""Cluster percentile bootstrap, vectorised with numpy: a shared core (no paper package imports).

Used by AmbiTab (the AVT-cluster bootstrap of spec §6.6) and by the ABISS interaction job (leakage
diagnostics on dialogues, clusters = questions).

A statistic is a difference of run means, mean_A − mean_B (or one run mean when B is absent),
where each run's mean is over its eligible observations (record × seed rows). Observations are
grouped by cluster (the AVT id, or for ΔRec_spec a connected component of the AVT–donor graph);
a resample draws clusters with replacement and keeps each cluster's records, seeds and *both*
paired runs together. Per-cluster sums and counts are computed once, so a resample costs one
weighted sum: 2,000 resamples over a few thousand clusters take milliseconds.
"""

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_RESAMPLES = 2000


@dataclass(frozen=True)
class Interval:
    estimate: float | None
    low: float | None
    high: float | None
    clusters: int
    resamples: int

    def scaled(self, k: float) -> "Interval":
        def f(v):
            return None if v is None else v * k

        return Interval(f(self.estimate), f(self.low), f(self.high), self.clusters, self.resamples)

    def fmt(self, digits: int = 2) -> str:
        if self.estimate is None:
            return "n/a"
        return f"{self.estimate:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


def _cluster_sums(codes: np.ndarray, values: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    valid = ~np.isnan(values)
    sums = np.bincount(codes[valid], weights=values[valid], minlength=k)
    counts = np.bincount(codes[valid], minlength=k).astype(float)
    return sums, counts


def cluster_bootstrap(
    clusters_a: Sequence[Hashable],
    values_a: Sequence[float | None],
    clusters_b: Sequence[Hashable] | None = None,
    values_b: Sequence[float | None] | None = None,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
) -> Interval:
    """Percentile interval of mean(A) − mean(B) (or mean(A)) under a cluster bootstrap.

    ``values`` may hold None/NaN for ineligible observations (e.g. recall of a fallback stop):
    they count in neither sum nor denominator. Resamples whose denominator is empty are dropped."""
    va = np.array([np.nan if v is None else float(v) for v in values_a], dtype=float)
    labels = list(clusters_a) + (list(clusters_b) if clusters_b is not None else [])
    uniq, codes = np.unique(np.array([str(c) for c in labels], dtype=object), return_inverse=True)
    k = len(uniq)
    if k == 0:
        return Interval(None, None, None, 0, 0)
    ca = codes[: len(va)]
    sa, na = _cluster_sums(ca, va, k)
    paired = clusters_b is not None and values_b is not None
    if paired:
        vb = np.array([np.nan if v is None else float(v) for v in values_b], dtype=float)
        sb, nb = _cluster_sums(codes[len(va) :], vb, k)

    def stat(weights: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            out = (weights @ sa) / (weights @ na)
            if paired:
                out = out - (weights @ sb) / (weights @ nb)
        return out

    point = stat(np.ones((1, k)))[0]
    if np.isnan(point):
        return Interval(None, None, None, k, 0)
    rng = np.random.default_rng(seed)
    # Multinomial cluster counts = how often each cluster is drawn in a resample of size k.
    weights = rng.multinomial(k, np.full(k, 1.0 / k), size=n_resamples).astype(float)
    stats = stat(weights)
    stats = stats[~np.isnan(stats)]
    alpha = (1 - level) / 2
    lo, hi = np.quantile(stats, [alpha, 1 - alpha]) if stats.size else (np.nan, np.nan)
    return Interval(float(point), float(lo), float(hi), k, int(stats.size))


def connected_components(edges: Sequence[tuple[Hashable, Hashable]], nodes: Sequence[Hashable] = ()) -> dict:
    """node -> component id (the smallest node of its component, as a string); union-find."""
    parent: dict = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for n in nodes:
        find(n)
    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb, key=str)] = min(ra, rb, key=str)
    return {n: str(find(n)) for n in parent}
