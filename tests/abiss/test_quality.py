import polars as pl

from quality.abiss import DATASET
from quality.databases import SCHEMA_CONTEXT
from quality.gx_suite import run_contract


def _dataset_row(**over):
    row = {
        "question_id": "q1",
        "candidate_id": "c1",
        "db_id": "university",
        "question": "How many students?",
        "subcategory": "answerable",
        "group": "answerable",
        "style": "formal",
        "difficulty": "simple",
        "is_solvable": True,
        "sql": "SELECT count(*) FROM students",
        "evidence": None,
        "hidden_knowledge": None,
        "feedback": None,
    }
    return {**row, **over}


def test_valid_dataset_passes_the_gx_suite():
    outcome = run_contract(DATASET, pl.DataFrame([_dataset_row(), _dataset_row(question_id="q2", candidate_id="c2")]))
    assert outcome.success, outcome.failures
    assert len(outcome.outcomes) > 20


def test_gx_suite_names_each_broken_rule():
    df = pl.DataFrame([_dataset_row(), _dataset_row(question_id="q1", subcategory="made_up", style="shouty")])
    failures = " ".join(run_contract(DATASET, df).failures)
    assert "unique on question_id" in failures
    assert "in_set on subcategory" in failures and "in_set on style" in failures


def test_missing_column_and_wrong_type_are_schema_problems():
    df = pl.DataFrame({"db_id": ["a"], "schema_context": ["CREATE TABLE t(a);"], "n_tables": ["1"]})
    outcome = run_contract(SCHEMA_CONTEXT, df)
    assert not outcome.success
    assert any("missing column 'n_chars'" in f for f in outcome.failures)
    assert any("'n_tables' has type String" in f for f in outcome.failures)
