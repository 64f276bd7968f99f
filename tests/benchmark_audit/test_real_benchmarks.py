"""The deterministic checks on real data nobody on this project wrote (../shared/data; skipped with
the reason when absent): BIRD's superhero dev questions, whose golds all execute (the data README)."""

import json

import pytest

from pipelines.benchmark_audit.audit import audit_database
from pipelines.benchmark_audit.records import database_path, file_digest, read_items
from resources.catalog import inspect_database

pytestmark = pytest.mark.shared_data


@pytest.fixture(scope="module")
def superhero_rows(shared_data):
    path = shared_data / "bird" / "dev" / "superhero_dev_questions.arcwise.json"
    db = database_path(shared_data / "bird" / "dev_databases", "superhero")
    if not path.is_file() or db is None:
        pytest.skip(f"BIRD superhero dev questions or database not under {shared_data / 'bird'}")
    items = read_items(path)
    df, _ = audit_database(items, db, benchmark="superhero", digest=file_digest(path), schema=inspect_database(db))
    return {r["question_id"]: r for r in df.iter_rows(named=True)}


def test_every_superhero_gold_executes(superhero_rows):
    assert len(superhero_rows) == 129
    failed = [q for q, r in superhero_rows.items() if {"gold_error", "gold_timeout"} & set(r["flags"].split(","))]
    assert failed == [] and all(r["gold_rows"] is not None for r in superhero_rows.values())


def test_a_case_mismatch_in_bird_evidence_is_found_and_fixed_on_the_evidence_side(superhero_rows):
    row = superhero_rows["758"]  # evidence: race = 'human'; the gold and the data: 'Human'
    (finding,) = [f for f in json.loads(row["findings"]) if f["check"] == "evidence_contradicted"]
    assert "0 row(s) match the evidence's value, 1 the gold's" in finding["detail"]
    fix = json.loads(finding["suggested_fix"])
    assert fix["field"] == "evidence" and "race = 'Human'" in fix["value"]


def test_the_tallest_hero_is_a_tie(superhero_rows):
    # "Who is the tallest superhero?": ORDER BY height_cm DESC LIMIT 1 over two heroes of equal height
    tallest = [r for r in superhero_rows.values() if r["question"] == "Who is the tallest superhero?"]
    assert tallest and all("ties_at_limit" in r["flags"] for r in tallest)
