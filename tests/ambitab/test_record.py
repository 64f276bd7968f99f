"""The task record: round trips and the access boundary between asker, oracle and verifier."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pipelines.ambitab.record import (
    AgentView,
    Ambiguity,
    OracleContext,
    Spec,
    TaskRecord,
    VerifierAssets,
    make_avt_id,
    make_record_id,
    read_jsonl,
    records_frame,
    records_from_frame,
    write_jsonl,
)

# Visible text uses lower-case letters; secrets use upper-case letters and digits only, so a secret
# can only show up in a view by being copied there (never by coincidence).
visible = st.text(alphabet="abcdefgh ", min_size=1, max_size=30).filter(str.strip)
secret = st.text(alphabet="QWXYZ0123456789", min_size=6, max_size=20)


@st.composite
def records(draw):
    n = draw(st.integers(0, 4))
    ambs = [
        Ambiguity(
            amb_id=f"a{i}",
            term=draw(visible),
            aliases=draw(st.lists(visible, max_size=2)),
            kind=draw(st.sampled_from(["critical", "knowledge", "non_critical"])),
            resolution="RES" + draw(secret),
            frozen_intent=draw(st.none() | secret.map(lambda s: "INT" + s)),
            sql_snippet=draw(st.none() | secret.map(lambda s: "SNIP" + s)),
        )
        for i in range(n)
    ]
    spec = Spec(
        user_query=draw(visible),
        sql_engine_name="SQLite",
        db_name="db",
        db_schema=draw(visible),
        column_meanings=draw(st.none() | st.dictionaries(visible, visible, max_size=2)),
        external_knowledge=draw(st.none() | st.lists(visible, max_size=2)),
    )
    avt = make_avt_id("ambrosia", spec.user_query, "db", [a.term for a in ambs])
    return TaskRecord(
        record_id=make_record_id("ambrosia", avt, "0"),
        corpus="ambrosia",
        avt_id=avt,
        interpretation_id="0",
        db_id="db",
        spec=spec,
        ambiguities=ambs,
        oracle_context=OracleContext(
            clear_query="CLR" + draw(secret),
            withheld_evidence=["EVD" + s for s in draw(st.lists(secret, max_size=3))],
            sql_segments=["SEG" + s for s in draw(st.lists(secret, max_size=3))],
        ),
        verifier=VerifierAssets(
            reference_sql=["SQL" + s for s in draw(st.lists(secret, min_size=1, max_size=2))],
            test_cases=["TST" + s for s in draw(st.lists(secret, max_size=2))],
        ),
    )


def secrets_of(r: TaskRecord) -> list[str]:
    out = [
        *r.verifier.reference_sql,
        *r.verifier.test_cases,
        *r.oracle_context.withheld_evidence,
        *r.oracle_context.sql_segments,
        r.oracle_context.clear_query,
    ]
    for a in r.ambiguities:
        out += [a.resolution, a.frozen_intent, a.sql_snippet]
    return [s for s in out if s]


@settings(max_examples=60, deadline=None)
@given(records())
def test_agent_view_never_contains_a_secret(record):
    text = record.agent_view().model_dump_json()
    for s in secrets_of(record):
        assert s not in text


@settings(max_examples=60, deadline=None)
@given(records())
def test_oracle_sees_resolutions_but_reference_sql_only_when_grounded(record):
    hidden = record.oracle_view().model_dump_json()  # ambrosia: scoped oracle, SQL hidden
    for a in record.ambiguities:
        assert a.resolution in hidden
    for sql in record.verifier.reference_sql + record.oracle_context.sql_segments:
        assert sql not in hidden
    grounded = record.oracle_view(sql_grounding=True).model_dump_json()
    assert all(sql in grounded for sql in record.verifier.reference_sql + record.oracle_context.sql_segments)
    for t in record.verifier.test_cases:
        assert t not in grounded  # test cases are the verifier's alone


@settings(max_examples=60, deadline=None)
@given(records())
def test_verifier_view_has_no_resolutions(record):
    text = record.verifier_view().model_dump_json()
    for a in record.ambiguities:
        assert a.resolution not in text
    for e in record.oracle_context.withheld_evidence:
        assert e not in text


@settings(max_examples=40, deadline=None)
@given(records())
def test_round_trips_exactly(record):
    assert TaskRecord.from_json_line(record.to_json_line()) == record
    assert TaskRecord.from_row(record.to_row()) == record
    assert records_from_frame(records_frame([record])) == [record]


def test_agent_view_rejects_extra_fields():
    spec = Spec(user_query="q", sql_engine_name="SQLite", db_name="d", db_schema="s")
    with pytest.raises(ValidationError):
        AgentView(
            record_id="r",
            corpus="ambrosia",
            split="all",
            engine="sqlite",
            db_id="d",
            spec=spec,
            max_questions=3,
            reference_sql=["select 1"],
        )
    assert not {"ambiguities", "verifier", "oracle_context", "provenance", "interpretation_id"} & set(
        AgentView.model_fields
    )


def test_only_critical_and_knowledge_count_and_budget():
    spec = Spec(user_query="q", sql_engine_name="SQLite", db_name="d", db_schema="s")
    kinds = ["critical", "knowledge", "non_critical", "non_critical"]
    ambs = [Ambiguity(amb_id=str(i), term=f"t{i}", kind=k, resolution="r") for i, k in enumerate(kinds)]
    r = TaskRecord(
        record_id="r",
        corpus="bird_interact",
        avt_id="a",
        interpretation_id="0",
        db_id="d",
        engine="postgresql",
        spec=spec,
        ambiguities=ambs,
        verifier=VerifierAssets(reference_sql="x"),
    )
    assert r.n_ambiguities == 2 and r.max_questions == 4 and not r.is_control
    control = r.model_copy(update={"ambiguities": ambs[2:]})
    assert control.is_control and control.max_questions == 0


def test_bad_corpus_and_engine_are_refused():
    spec = Spec(user_query="q", sql_engine_name="SQLite", db_name="d", db_schema="s")
    with pytest.raises(ValidationError, match="unknown corpus"):
        TaskRecord(
            record_id="r",
            corpus="spider",
            avt_id="a",
            interpretation_id="0",
            db_id="d",
            spec=spec,
            verifier=VerifierAssets(reference_sql="x"),
        )
    with pytest.raises(ValidationError, match="unknown engine"):
        TaskRecord(
            record_id="r",
            corpus="taco",
            engine="mysql",
            avt_id="a",
            interpretation_id="0",
            db_id="d",
            spec=spec,
            verifier=VerifierAssets(reference_sql="x"),
        )


def test_jsonl_round_trip_and_bad_line_names_the_line(tmp_path):
    spec = Spec(user_query="q", sql_engine_name="SQLite", db_name="d", db_schema="s")
    r = TaskRecord(
        record_id="r",
        corpus="taco",
        avt_id="a",
        interpretation_id="0",
        db_id="d",
        spec=spec,
        verifier=VerifierAssets(reference_sql="select 1"),
    )
    path = tmp_path / "out.jsonl"
    assert write_jsonl([r, r], path) == 2
    assert read_jsonl(path) == [r, r]
    path.write_text(r.to_json_line() + "\n" + json.dumps({"record_id": "x"}) + "\n")
    with pytest.raises(ValueError, match=r"out.jsonl:2: not a task record"):
        read_jsonl(path)


def test_avt_id_ignores_case_spacing_and_term_order():
    a = make_avt_id("ambiqt", "Show  the Name", "db", ["b", "a"])
    assert a == make_avt_id("ambiqt", "show the name", "db", ["a", "B"])
    assert a != make_avt_id("ambiqt", "show the name", "db2", ["a", "b"])
