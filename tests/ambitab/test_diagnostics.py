"""Specification randomisation (donors on other databases) and the leakage diagnostics (§6.4–§6.6)."""

import polars as pl
import pytest

from pipelines.ambitab.protocol.diagnostics import (
    assign_donors,
    donor_clusters,
    donor_group_key,
    hybrid_name,
    leakage_diagnostics,
)
from pipelines.ambitab.protocol.tables import stress_rows, table15_markdown
from pipelines.ambitab.protocol.task import Task
from tests.ambitab.records import amb, task


def _tasks():
    out = []
    for db in ("db1", "db2", "db3"):
        for q in range(3):
            for interp in ("i0", "i1"):
                out.append(task([amb(f"term{q}")], query=f"question {q} on {db}", db_id=db, interp=interp))
    return out


def test_donors_come_from_another_database_one_per_group_and_are_stable():
    tasks = _tasks()
    donors = assign_donors(tasks)
    by_id = {t.record_id: t for t in tasks}
    assert set(donors) == set(by_id)
    assert all(by_id[d].db_id != by_id[r].db_id for r, d in donors.items())
    groups = {}
    for t in tasks:
        groups.setdefault(donor_group_key(t), set()).add(donors[t.record_id])
    assert all(len(v) == 1 for v in groups.values())  # both readings of an AVT share their donor
    assert assign_donors(list(reversed(tasks))) == donors  # fixed seed, order-independent
    assert assign_donors(tasks, seed=1) != donors


def test_donors_on_real_ambrosia_records(corpus_build):
    tasks = [Task.from_record(r) for r in corpus_build("ambrosia").records]
    donors = assign_donors(tasks)
    by_id = {t.record_id: t for t in tasks}
    assert len(donors) == len(tasks)
    assert all(by_id[d].db_id != by_id[r].db_id for r, d in donors.items())
    comps = donor_clusters(tasks, donors)
    assert set(comps) == {t.avt_id for t in tasks}
    # every AVT shares a component with its donor's AVT
    assert all(comps[by_id[r].avt_id] == comps[by_id[d].avt_id] for r, d in donors.items())


def test_a_single_database_corpus_gets_no_donor():
    assert assign_donors([task([amb("a")], db_id="only", interp="x"), task([amb("b")], db_id="only")]) == {}


def _ep(record, seed, asker, oracle, verdict, recall=None, rnr=None, donor=""):
    return {
        "record_id": record,
        "avt_id": f"avt-{record}",
        "seed": seed,
        "asker": asker,
        "oracle": oracle,
        "prompt": "",
        "corpus": "ambrosia",
        "spec_donor": donor,
        "verdict": verdict,
        "recall": recall,
        "recall_no_response": rnr,
    }


def test_leakage_diagnostics_on_hand_built_runs():
    rows = []
    for seed in (0, 1):
        for i in range(20):
            r = f"r{i}"
            rows += [
                _ep(r, seed, "llm", "llm_scoped", 1 if i < 12 else 0),
                _ep(r, seed, "llm", "hybrid_scoped", 1 if i < 10 else 0),  # ΔJresp = 10 points
                _ep(r, seed, "full_adv", "llm_scoped", 1 if i < 15 else 0),
                _ep(r, seed, "full_adv", "det_intent", 1 if i < 14 else 0),  # ΔJfull = 5 points
                _ep(r, seed, "generic", "llm_scoped", 0, 0.0, 1.0 if i < 4 else 0.0),  # ΔRecnone = 20
                _ep(r, seed, "llm", "hybrid_scoped", 0, 1.0 if i < 2 else 0.0, donor="d"),  # ΔRec_spec = 10
                _ep(r, seed, "llm", "det_intent", 0, 1.0 if i < 1 else 0.0, donor="d"),  # det ΔRec_spec = 5
            ]
    eps = pl.DataFrame(rows, infer_schema_length=None)
    d = leakage_diagnostics(eps, "ambrosia", "llm_scoped", "det_intent", deterministic=False, n_resamples=300)
    assert d["d_j_resp"]["value"] == pytest.approx(10.0) and d["d_j_resp"]["sd"] == pytest.approx(0.0)
    assert d["d_j_full"]["value"] == pytest.approx(5.0)
    assert d["d_rec_none"]["value"] == pytest.approx(20.0)
    assert d["d_rec_spec"]["value"] == pytest.approx(10.0)
    ci = d["d_j_resp"]["ci"]
    assert ci.low <= 10.0 <= ci.high and ci.clusters == 20
    det = leakage_diagnostics(eps, "ambrosia", "det_intent", "det_intent", deterministic=True, n_resamples=300)
    assert det["d_j_resp"] is None and det["d_j_full"] is None and det["d_rec_none"] is None
    assert det["d_rec_spec"]["value"] == pytest.approx(5.0)


def test_hybrid_name_pairs_an_llm_oracle_with_its_hybrid():
    assert hybrid_name("llm_scoped") == "hybrid_scoped"
    assert hybrid_name("llm_unfiltered+sql") == "hybrid_unfiltered+sql"
    assert hybrid_name("llm_scoped+stress_sql_shown") == "hybrid_scoped"


def test_stress_rows_are_paired_shown_minus_hidden():
    rows = []
    for seed in (0, 1):
        for i in range(10):
            r = f"r{i}"
            rows += [
                _ep(r, seed, "llm", "llm_scoped", 1 if i < 5 else 0),
                _ep(r, seed, "llm", "llm_scoped+stress_sql_shown", 1 if i < 7 else 0),
                _ep(r, seed, "full_adv", "llm_scoped", 1 if i < 6 else 0),
                _ep(r, seed, "full_adv", "llm_scoped+stress_sql_shown", 1 if i < 6 else 0),
                _ep(r, seed, "generic", "llm_scoped", 0, 0.0, 0.0),
                _ep(r, seed, "generic", "llm_scoped+stress_sql_shown", 0, 0.0, 1.0 if i < 1 else 0.0),
            ]
    eps = pl.DataFrame(rows, infer_schema_length=None)
    [row] = stress_rows(eps, [("llm", "")], n_resamples=300)
    assert row["d_j_resp"] == pytest.approx(20.0) and row["d_j_full"] == pytest.approx(0.0)
    assert row["d_rec_none"] == pytest.approx(10.0)
    assert row["d_j_resp_lo"] <= 20.0 <= row["d_j_resp_hi"]
    assert "llm_scoped+stress_sql_shown" in table15_markdown(pl.DataFrame([row]))
