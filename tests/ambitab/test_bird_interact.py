"""AmbiTab-BIRD-Interact: 14 alien records structurally, verification skipped with the reason."""

import json

import pytest

from cli import main
from pipelines.ambitab import bird_interact


@pytest.fixture(scope="module")
def built(corpus_build):
    return corpus_build("bird_interact")


def test_14_records_structurally_with_verification_skipped(built):
    assert len(built.records) == 14 and not built.rejects
    for rec in built.records:
        assert rec.engine == "postgresql" and rec.spec.sql_engine_name == "PostgreSQL"
        assert not rec.verifier.executable and "not available here" in rec.verifier.skip_reason
        assert rec.verifier.reference_sql and rec.oracle_context.clear_query
    management = [r for r in built.records if r.verifier.test_cases]
    assert len(management) == 4
    steps = {s.step: s for s in built.skipped}
    assert steps["verification (PostgreSQL)"].affected == 14
    assert "not public" in steps["frozen response catalog"].reason


def test_only_critical_and_knowledge_count(built, shared_data):
    rows = {
        json.loads(line)["instance_id"]: json.loads(line)
        for line in (shared_data / bird_interact.TASKS).read_text().splitlines()
    }
    for rec in built.records:
        row = rows[rec.interpretation_id]
        n_crit = len(row["user_query_ambiguity"]["critical_ambiguity"])
        n_know = len(row["knowledge_ambiguity"])
        n_non = len(row["user_query_ambiguity"]["non_critical_ambiguity"])
        assert rec.n_ambiguities == n_crit + n_know  # no duplicate terms in this sample
        assert len([a for a in rec.ambiguities if a.kind == "non_critical"]) == n_non


def test_deleted_knowledge_is_withheld_from_the_visible_kb(built):
    for rec in built.records:
        visible_ids = {e["id"] for e in rec.spec.external_knowledge}
        deleted = set(rec.provenance.filter_outcomes["deleted_knowledge"])
        assert not visible_ids & deleted
        assert len(visible_ids) + len(deleted) == 56
        view = rec.agent_view().model_dump_json()
        for a in rec.ambiguities:
            if a.kind == "knowledge":
                assert json.dumps(a.resolution)[1:-1] not in view


def test_stand_in_responses_are_labelled(built):
    rec = built.records[0]
    assert "not the paper's audited" in rec.provenance.source_ids["responses"]
    crit = [a for a in rec.ambiguities if a.kind == "critical"][0]
    assert crit.resolution == f"By '{crit.term}' I mean {crit.sql_snippet}"


def test_duplicate_terms_are_merged_keeping_the_first(tmp_path, shared_data):
    root = tmp_path / "data"
    src_root = shared_data / bird_interact.ROOT
    (root / bird_interact.ROOT / "datasets").mkdir(parents=True)
    (root / bird_interact.ROOT / "DBs").symlink_to(src_root / "DBs")
    row = json.loads((src_root / "datasets" / "bird_interact_data.jsonl").read_text().splitlines()[0])
    dup = dict(row["user_query_ambiguity"]["critical_ambiguity"][0])
    dup["term"] = "  Signal   QUALITY "
    row["knowledge_ambiguity"] = row["knowledge_ambiguity"] + [dict(dup, deleted_knowledge=None)]
    (root / bird_interact.TASKS).write_text(json.dumps(row) + "\n" + json.dumps({"instance_id": "x"}) + "\n")
    res = bird_interact.build(root)
    (rec,) = res.records
    assert [a.term for a in rec.ambiguities].count("signal quality") == 1
    assert rec.provenance.filter_outcomes["duplicate_terms_merged"][0]["term"] == dup["term"]
    assert res.rejects[0].source_id == "x" and "missing key" in res.rejects[0].reason


def test_asset_reports_skipped_steps_as_a_warn_check(shared_data, capsys):
    assert main(["ambitab", "build", "--corpus", "bird_interact", "--data", str(shared_data)]) == 0
    out = capsys.readouterr().out
    assert "WARN bird_interact: skipped verification (PostgreSQL) (14 affected)" in out
    assert "5/6 passed (failing: ambitab_skipped_steps)" in out
