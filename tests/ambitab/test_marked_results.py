"""Privileged and degenerate results are marked (issue 34 item 10): an asker that saw the hidden terms
carries the privileged mark in every table (and the column in the episodes and metrics it is
exported from), and a ΔRec-spec interval over one AVT–donor cluster is "not estimable (one
cluster)", never a zero-width [x, x]."""

import polars as pl

from pipelines.ambitab.protocol.diagnostics import diagnostic
from pipelines.ambitab.protocol.episode import EPISODE_COLUMNS
from pipelines.ambitab.protocol.tables import NOT_ESTIMABLE, PRIVILEGED_MARK, table8_markdown, table15_markdown


def _frame(avts, values, seeds=None):
    n = len(avts)
    return pl.DataFrame(
        {"record_id": [f"r{i}" for i in range(n)], "seed": seeds or [0] * n, "avt_id": avts, "x": values}
    )


def test_one_cluster_gives_no_interval():
    a = _frame(["a1", "a2", "a3"], [1.0, 1.0, 0.0])
    b = _frame(["a1", "a2", "a3"], [0.0, 1.0, 0.0])
    one = diagnostic(a, b, "x", clusters={"a1": "c", "a2": "c", "a3": "c"}, n_resamples=200)
    assert one["value"] is not None and one["ci"].clusters == 1
    assert one["ci"].low is None and one["ci"].high is None
    several = diagnostic(a, b, "x", n_resamples=200)  # each AVT its own cluster: an interval exists
    assert several["ci"].clusters == 3 and several["ci"].low is not None


def _row(**over):
    base = {
        "kind": "main",
        "corpus": "ambrosia",
        "solver": "gold",
        "oracle": "det_intent",
        "asker": "mine",
        "prompt": "",
        "privileged": False,
        "records": 2,
        "episodes": 2,
    }
    for m in ("nodis", "asker_sr", "full_sr", "prec", "rec", "f1", "gain", "gap"):
        base[m], base[f"{m}_sd"] = 100.0, None
    for k in ("d_j_resp", "d_j_full", "d_rec_none", "d_rec_spec"):
        base[k], base[f"{k}_sd"], base[f"{k}_lo"], base[f"{k}_hi"], base[f"{k}_clusters"] = None, None, None, None, 0
    return {**base, **over}


def test_privileged_askers_are_marked_in_the_tables():
    plain = table8_markdown(pl.DataFrame([_row()]))
    assert PRIVILEGED_MARK not in plain
    marked = table8_markdown(pl.DataFrame([_row(privileged=True)]))
    assert f"| mine{PRIVILEGED_MARK} |" in marked and "sees the hidden ambiguous terms" in marked
    stress = table15_markdown(pl.DataFrame([_row(kind="stress", privileged=True)]))
    assert f"mine{PRIVILEGED_MARK}" in stress


def test_a_one_cluster_interval_is_shown_as_not_estimable():
    row = _row(d_rec_spec=2.2, d_rec_spec_clusters=1)
    assert f"2.2 [{NOT_ESTIMABLE}]" in table8_markdown(pl.DataFrame([row]))


class Peeking:
    """A custom asker that declares itself privileged: it is given the hidden terms."""

    privileged = True

    def decide(self, inp):
        return None


class Honest:
    def decide(self, inp):
        return None


def test_episodes_record_whether_the_asker_was_privileged():
    from tests.ambitab.records import amb, task
    from tests.ambitab.test_episode import run

    assert EPISODE_COLUMNS["privileged"] is bool
    t = task([amb("age", "Age in years.")])
    assert run(t, f"{__name__}:Peeking")["privileged"] is True
    assert run(t, f"{__name__}:Honest")["privileged"] is False
    assert run(t, "full")["privileged"] is True and run(t, "none")["privileged"] is False
