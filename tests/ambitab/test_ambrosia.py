"""AmbiTab-Ambrosia on the real resplit test file (skips without ../shared/data)."""

import json
from collections import Counter, defaultdict

import pytest

from pipelines.ambitab import ambrosia
from pipelines.ambitab.record import TaskRecord
from pipelines.ambitab.sources import SourceCorrupt


@pytest.fixture(scope="module")
def built(corpus_build):
    return corpus_build("ambrosia")


def test_303_records_with_native_intents(built, shared_data):
    assert len(built.records) == 303
    rows = [json.loads(line) for line in (shared_data / ambrosia.SOURCE).read_text().splitlines()]
    unambiguous = {
        (r["db_file"], ambrosia.normalize_sql(r["gold_queries"][0])): r["question"]
        for r in rows
        if not r["is_ambiguous"]
    }
    for rec in built.records:
        (amb,) = rec.ambiguities
        native = unambiguous[
            (rec.provenance.source_ids["db_file"], ambrosia.normalize_sql(rec.verifier.reference_sql[0]))
        ]
        assert amb.frozen_intent == amb.resolution == native != rec.spec.user_query
        assert rec.n_ambiguities == 1 and amb.kind == "critical"


def test_readings_per_question_and_avt_sharing(built):
    by_avt = defaultdict(list)
    for rec in built.records:
        by_avt[rec.avt_id].append(rec)
    assert len(by_avt) == 128
    for recs in by_avt.values():
        t = recs[0].ambiguities[0].type
        assert len(recs) == (3 if t == "vague" else 2)
        assert len({r.spec for r in recs}) == 1  # one public spec per AVT
        assert len({r.ambiguities[0].term for r in recs}) == 1
        assert len({r.ambiguities[0].resolution for r in recs}) == len(recs)


def test_missing_databases_are_rejected_with_the_rebuild_error(built):
    assert {r.stage for r in built.rejects} == {"database"}
    assert len(built.rejects) == 3 and all("syntax error" in r.reason for r in built.rejects)


def test_slice_is_database_disjoint_near_20_percent(built):
    test_dbs = {r.db_path for r in built.records if r.split == "slice_test"}
    train_dbs = {r.db_path for r in built.records if r.split == "slice_train"}
    assert test_dbs and not test_dbs & train_dbs
    per_type = Counter((r.ambiguities[0].type, r.split) for r in built.records)
    for t in ambrosia.TYPES:
        share = per_type[(t, "slice_test")] / (per_type[(t, "slice_test")] + per_type[(t, "slice_train")])
        assert 0.1 <= share <= 0.3, (t, share)


def test_build_is_deterministic_and_seed_moves_the_slice(built, shared_data):
    again = ambrosia.build(shared_data)
    assert [r.to_json_line() for r in again.records] == [r.to_json_line() for r in built.records]
    other = ambrosia.build(shared_data, seed=7)
    assert {r.record_id for r in other.records} == {r.record_id for r in built.records}
    assert [r.split for r in other.records] != [r.split for r in built.records]


def test_agent_view_hides_intent_and_sql_on_real_records(built):
    for rec in built.records:
        text = rec.agent_view().model_dump_json()
        assert rec.ambiguities[0].resolution not in text
        assert json.dumps(rec.verifier.reference_sql[0])[1:-1] not in text
        assert TaskRecord.from_json_line(rec.to_json_line()) == rec


@pytest.mark.parametrize(
    "question,kind,readings,term",
    [
        (
            "What instruments are associated with each lab technician?",
            "scope",
            ["select 1", "select 2"],
            "each lab technician",
        ),
        (
            "List all chemists and geoscientists from MIT. Show them in one table.",
            "attachment",
            ["SELECT n FROM t WHERE (p = 'Chemist' OR p = 'Geo') AND org = 'MIT'", "x"],
            "from MIT",
        ),
        (
            "Show Spanish-speaking servers and chefs.",
            "attachment",
            ["SELECT n FROM s WHERE (p = 'Chef' OR p = 'Server') AND l = 'Spanish'", "x"],
            "Spanish-speaking",
        ),
        (
            "What experience do I need for the job?",
            "vague",
            ["SELECT Min_Years FROM j", "SELECT Pref_Years FROM j"],
            "experience",
        ),
        ("Who staged the shows?", "vague", ["SELECT a FROM t", "SELECT b FROM t"], "who"),
    ],
)
def test_derive_term(question, kind, readings, term):
    assert ambrosia.derive_term(question, kind, readings)[0] == term


def test_bad_rows_are_rejected_and_the_build_goes_on(tmp_path, shared_data):
    root = tmp_path / "data"
    (root / "ambrosia").mkdir(parents=True)
    (root / "ambrosia" / "databases").symlink_to(shared_data / "ambrosia" / "databases")
    lines = (shared_data / ambrosia.SOURCE).read_text().splitlines()
    good = lines[:3]
    (root / ambrosia.SOURCE).write_text("\n".join([*good, json.dumps({"question": "q", "is_ambiguous": True})]) + "\n")
    res = ambrosia.build(root)
    assert len(res.records) == 2
    assert any("missing key" in r.reason for r in res.rejects)  # a row problem stays a row reject
    # a line that is not JSON means the file is damaged: the build fails, naming file and line (issue 20)
    (root / ambrosia.SOURCE).write_text("\n".join([*good, "{not json"]) + "\n")

    with pytest.raises(SourceCorrupt, match=r"ambrosia_resplit_test.jsonl: line 4 is not valid JSON"):
        ambrosia.build(root)


def test_a_database_that_fails_to_open_is_a_reject(tmp_path, shared_data):
    rows = [json.loads(line) for line in (shared_data / ambrosia.SOURCE).read_text().splitlines()]
    amb = next(r for r in rows if r["is_ambiguous"])
    root = tmp_path / "data"
    (root / "ambrosia").mkdir(parents=True)
    (root / ambrosia.SOURCE).write_text(json.dumps(amb) + "\n")
    bad = ambrosia.db_path_for(root, amb["db_file"])
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"not a database at all")
    res = ambrosia.build(root)
    assert not res.records
    (rej,) = res.rejects
    assert rej.stage == "database" and "cannot open" in rej.reason
