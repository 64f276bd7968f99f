"""The AVT-cluster percentile bootstrap on synthetic cases with known intervals (spec §6.6)."""

import math

import numpy as np
import pytest

from pipelines.core.stats import cluster_bootstrap, connected_components


def test_constant_paired_difference_has_a_degenerate_interval():
    clusters = [f"c{i}" for i in range(50)]
    a = [1.0] * 50
    b = [0.0] * 50
    ci = cluster_bootstrap(clusters, a, clusters, b, n_resamples=500)
    assert (ci.estimate, ci.low, ci.high) == (1.0, 1.0, 1.0)


def test_bernoulli_clusters_match_the_normal_approximation():
    k = 400
    clusters = [f"c{i}" for i in range(k)]
    values = [float(i % 2) for i in range(k)]  # mean 0.5, one observation per cluster
    ci = cluster_bootstrap(clusters, values, n_resamples=2000, seed=1)
    half = 1.96 * math.sqrt(0.25 / k)
    assert ci.estimate == 0.5
    assert ci.low == pytest.approx(0.5 - half, abs=0.01)
    assert ci.high == pytest.approx(0.5 + half, abs=0.01)


def test_clusters_are_resampled_whole():
    # two clusters of 100 identical observations each: a resample is {A,A}, {A,B} or {B,B}, so
    # the statistic can only take the three values 0, 0.5, 1 (an observation-level bootstrap
    # would give values near 0.5 only)
    clusters = ["A"] * 100 + ["B"] * 100
    values = [0.0] * 100 + [1.0] * 100
    ci = cluster_bootstrap(clusters, values, n_resamples=2000, seed=3)
    assert ci.low == 0.0 and ci.high == 1.0


def test_paired_runs_move_together():
    # run A = run B + 0.1 on every record; clusters vary a lot, the difference does not
    rng = np.random.default_rng(0)
    base = rng.random(300).tolist()
    clusters = [f"c{i // 3}" for i in range(300)]
    ci = cluster_bootstrap(clusters, [v + 0.1 for v in base], clusters, base, n_resamples=1000)
    assert ci.low == pytest.approx(0.1) and ci.high == pytest.approx(0.1)


def test_ineligible_observations_are_ignored():
    ci = cluster_bootstrap(["a", "b", "c"], [1.0, None, float("nan")], n_resamples=200)
    assert ci.estimate == 1.0


def test_connected_components():
    comp = connected_components([("a", "b"), ("c", "b"), ("d", "e")], nodes=["f"])
    assert comp["a"] == comp["b"] == comp["c"] != comp["d"] == comp["e"]
    assert comp["f"] == "f"
