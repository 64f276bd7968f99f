"""Cascade outputs: survivors join, decision and vote tables, rejection report, dataset, funnel,
and the ABISS reference JSON layout (export/import round trip, malformed input)."""

from __future__ import annotations

import json

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.abiss import outputs
from pipelines.abiss.outputs import (
    DATASET_COLUMNS,
    DECISION_SCHEMA,
    UI_INLINE_MARKDOWN_CHARS,
    AbissFormatError,
    council_votes_frame,
    dataset_frame,
    decisions_frame,
    from_abiss_records,
    funnel,
    funnel_chart_md,
    funnel_text,
    read_abiss_json,
    rejection_report_frame,
    survivors,
    to_abiss_records,
    write_abiss_json,
)
from pipelines.abiss.stages import STAGE_BY_NO, STAGES, run_stage
from pipelines.abiss.stages import decision as _decision
from pipelines.abiss.taxonomy import subcategory
from resources.llm import call_log
from tests.abiss.cascade_helpers import (
    SOLVING_SQL,
    Script,
    amb_pair,
    ans_row,
    evid_row,
    una_row,
    verdicts,
)


def frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows, infer_schema_length=None)


def decision(row, stage_no, passed, applies=True, votes=(), calls_saved=0):
    return _decision(row, STAGE_BY_NO[stage_no], passed, "test", votes, applies=applies, calls_saved=calls_saved)


@pytest.fixture
def rows():
    return [ans_row("a1"), evid_row("e1"), *amb_pair(), una_row("u1")]


# ------------------------------------------------------------------------------ survivors, decisions


def test_survivors_is_a_semi_join_on_passed(rows):
    cands = frame(rows)
    d = decisions_frame(
        [
            decision(rows[0], 3, True),
            decision(rows[1], 3, False),
            decision(rows[2], 3, True),
            decision(rows[3], 3, False),
            decision(rows[4], 3, True, applies=False),
        ]
    )
    kept = survivors(cands, d)
    assert kept["candidate_id"].to_list() == ["a1", "g_recent_0", "u1"]  # candidate order, all columns
    assert kept.columns == cands.columns and kept.schema == cands.schema
    assert survivors(cands, None) is cands
    assert survivors(cands, decisions_frame([])).height == 0


def test_decisions_frame_schema(rows, make_ctx):
    assert dict(decisions_frame([]).schema) == DECISION_SCHEMA
    d1 = decisions_frame(run_stage(1, rows, None))
    assert dict(d1.schema) == DECISION_SCHEMA
    assert d1.height == len(rows) and d1["votes"].list.len().sum() == 0
    d2 = decisions_frame(run_stage(2, rows, make_ctx()))
    assert dict(d2.schema) == DECISION_SCHEMA
    assert set(d2.filter(~pl.col("applies"))["candidate_id"]) == {"u1"}


# ------------------------------------------------------------------------------ council votes


def test_council_votes_frame_one_row_per_vote(rows, scripted, make_ctx):
    scripted.responder = Script(
        conformance=verdicts({"a": "yes", "b": "no", "c": "yes"}),
        ground_truth=verdicts({"a": "yes", "b": "yes", "c": "no"}),
        solve=lambda m, t: {"answerable": m == "b", "sql": SOLVING_SQL if m == "b" else ""},
    )
    ctx = make_ctx()
    per_stage = [decisions_frame(run_stage(n, rows, ctx)) for n in (1, 3, 7)]
    votes = council_votes_frame(per_stage)

    assert votes.columns == [
        "vote_id",
        "candidate_id",
        "stage",
        "seq",
        "member",
        "comparison",
        "vote",
        "parsed_ok",
        "llm_call_id",
    ]
    assert votes.height == sum(int(d["n_votes"].sum()) for d in per_stage) > 0
    assert votes["vote_id"].n_unique() == votes.height
    assert votes["llm_call_id"].null_count() == 0
    logged = {r["call_id"] for r in call_log().rows()}
    assert set(votes["llm_call_id"]) <= logged  # every vote points at its llm_calls row
    assert set(votes["stage"]) == {"s03_category_conformance", "s07_unsolvability_verification"}
    # per candidate and stage, the votes are those of the decision, in order
    d3 = per_stage[1].filter(pl.col("candidate_id") == "a1").row(0, named=True)
    got = votes.filter((pl.col("candidate_id") == "a1") & (pl.col("stage") == "s03_category_conformance"))
    assert got.select("member", "vote").rows() == [(v["member"], v["vote"]) for v in d3["votes"]]
    # stage 7: the solve attempts and the judges of b's solution, with their comparisons
    s7 = votes.filter(pl.col("stage") == "s07_unsolvability_verification")
    assert set(s7["comparison"]) == {"solve", "gt_check:b"}
    # ids are stable for the same inputs
    assert council_votes_frame(per_stage)["vote_id"].to_list() == votes["vote_id"].to_list()


def test_council_votes_frame_empty():
    empty = council_votes_frame([decisions_frame([])])
    assert empty.height == 0 and "vote_id" in empty.columns and "llm_call_id" in empty.columns
    assert council_votes_frame([]).height == 0


# ------------------------------------------------------------------------------ rejection report


def test_rejection_report_rates_per_stage_subcategory_generator():
    r = [ans_row(f"a{i}") for i in range(3)] + [ans_row("b0", generator="gen_b")] + [una_row(f"u{i}") for i in range(2)]
    cands = frame(r)
    s3 = decisions_frame(
        [
            decision(
                r[0],
                3,
                True,
                votes=[{"member": "a", "comparison": None, "vote": "yes", "parsed_ok": True, "llm_call_id": "x"}],
                calls_saved=1,
            ),
            decision(r[1], 3, False),
            decision(r[2], 3, True),
            decision(r[3], 3, True),
            decision(r[4], 3, False),
            decision(r[5], 3, False),
        ]
    )
    s8 = decisions_frame([decision(x, 8, True, applies=False) for x in r[:4]] + [decision(r[4], 8, False)])
    report = rejection_report_frame(cands, [s3, s8])
    assert report.columns == [
        "db_id",
        "stage_no",
        "stage",
        "subcategory",
        "generator",
        "entered",
        "rejected",
        "rejection_rate",
        "votes",
        "calls_saved",
    ]
    got = {
        (x["stage_no"], x["subcategory"], x["generator"]): (x["entered"], x["rejected"], x["rejection_rate"])
        for x in report.iter_rows(named=True)
    }
    assert got == {
        (3, "answerable", "gen_a"): (3, 1, pytest.approx(1 / 3)),
        (3, "answerable", "gen_b"): (1, 0, 0.0),
        (3, "missing_entity", "gen_a"): (2, 2, 1.0),
        (8, "missing_entity", "gen_a"): (1, 1, 1.0),  # non-applicable candidates are not counted
    }
    first = report.row(0, named=True)
    assert (first["stage"], first["votes"], first["calls_saved"], first["db_id"]) == (
        "s03_category_conformance",
        1,
        1,
        "university",
    )
    assert report["stage_no"].to_list() == sorted(report["stage_no"].to_list())
    assert rejection_report_frame(cands, [decisions_frame([])]).height == 0


# ------------------------------------------------------------------------------ dataset, funnel


def test_dataset_frame_fields(rows):
    cands = frame(rows)
    final = decisions_frame([decision(x, 10, x["candidate_id"] != "e1") for x in rows])
    ds = dataset_frame(cands, final)
    assert ds.columns == list(DATASET_COLUMNS)
    assert ds["candidate_id"].to_list() == ["a1", "g_recent_0", "g_recent_1", "u1"]
    by = {x["candidate_id"]: x for x in ds.iter_rows(named=True)}
    assert by["a1"]["sql"] == rows[0]["sql"] and by["a1"]["is_solvable"] and by["a1"]["category"] == "Answerable"
    assert by["u1"]["sql"] is None and not by["u1"]["is_solvable"] and by["u1"]["feedback"] == rows[4]["feedback"]
    assert by["u1"]["group"] == "unanswerable" and by["u1"]["category"] == subcategory("missing_entity").category
    amb = [by["g_recent_0"], by["g_recent_1"]]
    assert {x["group_id"] for x in amb} == {"g_recent"} and [x["interpretation_index"] for x in amb] == [0, 1]
    assert all(x["hidden_knowledge"] for x in amb) and amb[0]["question"] == amb[1]["question"]
    for x in ds.iter_rows(named=True):
        assert x["db_id"] == "university" and x["style"] == "formal" and x["difficulty"] == "moderate"
        assert x["generator"] == "gen_a" and x["question_id"].startswith("q_")
    assert ds["question_id"].n_unique() == ds.height


def test_funnel_and_text(rows):
    cands = frame(rows)
    s1 = decisions_frame([decision(x, 1, True) for x in rows])
    s2 = decisions_frame(
        [decision(x, 2, x["candidate_id"] != "a1", applies=x["group"] != "unanswerable") for x in rows]
    )
    s3 = decisions_frame([decision(x, 3, x["candidate_id"] == "u1") for x in rows if x["candidate_id"] != "a1"])
    f = funnel(cands, [s1, s2, s3])
    assert f == [
        ("candidates", 5, 5),
        ("s01_duplicate_removal", 5, 5),
        ("s02_sql_executability", 5, 4),
        ("s03_category_conformance", 4, 1),
    ]
    text = funnel_text(f).splitlines()
    assert len(text) == 4
    assert text[2].startswith("s02_sql_executability") and "4 kept" in text[2] and "1 rejected" in text[2]
    assert "1 kept" in text[3] and "3 rejected" in text[3]
    assert text[0].count("█") == 40 and text[3].count("█") == 8


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)), min_size=11, max_size=11))
def test_funnel_chart_fits_the_ui_inline_limit(counts):
    """Any funnel of the eleven stages stays under the length the UI shows in place, and keeps
    every stage's kept/entered."""

    rows = [("candidates", 10**6, 10**6)] + [(s.key, max(a, b), min(a, b)) for s, (a, b) in zip(STAGES, counts)]
    chart = funnel_chart_md(rows)
    assert len(chart) < UI_INLINE_MARKDOWN_CHARS
    for _, entered, kept in rows:
        assert f"{kept}/{entered}" in chart


# ------------------------------------------------------------------------------ ABISS JSON


def _dataset(rows):
    return dataset_frame(frame(rows), decisions_frame([decision(x, 10, True) for x in rows]))


COMPARED = [c for c in DATASET_COLUMNS if c not in ("question_id", "candidate_id")]


def test_abiss_round_trip(rows, tmp_path):
    ds = _dataset(rows)
    records = to_abiss_records(ds)
    assert len(records) == ds.height
    r0 = records[0]
    # the reference layout: answerable records omit hidden_knowledge / is_solvable
    assert set(r0) >= {"db_id", "question", "evidence", "sql", "category", "question_style", "question_difficulty"}
    assert "hidden_knowledge" not in r0 and "is_solvable" not in r0
    assert r0["category"] == {"name": "Answerable", "subname": "Without Evidence", "answerable": True, "solvable": True}
    una = next(r for r in records if r["subcategory_id"] == "missing_entity")
    assert una["sql"] is None and una["is_solvable"] is False and una["hidden_knowledge"] == rows[4]["feedback"]
    assert una["category"]["answerable"] is False and una["category"]["solvable"] is False

    back = from_abiss_records(json.loads(json.dumps(records)))
    assert back.columns == list(DATASET_COLUMNS)
    assert back.select(COMPARED).rows() == ds.select(COMPARED).rows()

    path = tmp_path / "abiss.json"
    assert write_abiss_json(ds, path) == ds.height
    again = read_abiss_json(path)
    assert again.select(COMPARED).rows() == ds.select(COMPARED).rows()
    assert again["candidate_id"].to_list() == back["candidate_id"].to_list()  # stable ids on import


def test_abiss_pure_records_group_interpretations(rows):
    """Records without Quandary's extras (the ABISS reference files) still pair interpretations."""
    records = to_abiss_records(_dataset(rows))
    for r in records:
        for extra in ("subcategory_id", "group_id", "generator"):
            r.pop(extra)
    back = from_abiss_records(records)
    amb = back.filter(pl.col("group") == "ambiguous")
    assert amb.height == 2 and amb["group_id"].n_unique() == 1
    assert amb["interpretation_index"].to_list() == [0, 1]
    assert amb["subcategory"].to_list() == ["lexical_vagueness"] * 2
    assert back.filter(pl.col("group") != "ambiguous")["interpretation_index"].null_count() == 3
    assert back["group_id"].n_unique() == 4  # one per question, the pair shares one
    assert set(back["generator"]) == {"imported"}


def test_abiss_two_pairs_number_interpretations_per_group():
    pairs = amb_pair("g1", "List the recent courses.") + amb_pair("g2", "Show me the new courses.")
    back = from_abiss_records(to_abiss_records(_dataset(pairs)))
    assert back.select("group_id", "interpretation_index").rows() == [("g1", 0), ("g1", 1), ("g2", 0), ("g2", 1)]


def _valid_record(**kw):
    rec = {
        "db_id": "university",
        "question": "How many students are there?",
        "evidence": "",
        "sql": "SELECT 1",
        "category": {"name": "Answerable", "subname": "Answerable", "answerable": True, "solvable": True},
        "question_style": "formal",
        "question_difficulty": "simple",
        "hidden_knowledge": "",
        "is_solvable": True,
    }
    rec.update(kw)
    return rec


@pytest.mark.parametrize(
    "records, message",
    [
        ({"db_id": "x"}, "expected a JSON list"),
        (
            [_valid_record(), {"question": "q", "category": {"name": "Answerable", "subname": "Answerable"}}],
            "record 1: missing field 'db_id'",
        ),
        (
            [_valid_record(), _valid_record(), _valid_record(category={"name": "Nope", "subname": "Nothing"})],
            "record 2: unknown category",
        ),
        ([_valid_record(category="Answerable")], "record 0: malformed"),
        ([_valid_record(), 7], "record 1: malformed"),
        ([_valid_record(question=None)], "record 0"),
        ([_valid_record(question={"text": "q"})], "record 0"),
        ([_valid_record(), _valid_record(evidence=["a", "b"])], "record 1"),
    ],
)
def test_abiss_malformed_input_names_the_record(records, message):
    with pytest.raises(AbissFormatError, match=message.replace("'", ".")):
        from_abiss_records(records)


@pytest.mark.parametrize(
    "text, message",
    [("[{]", "not valid JSON at byte 2 in record 0"), ("[{", "truncated: the file ends at byte 2 inside record 0")],
)
def test_read_abiss_json_rejects_invalid_json(tmp_path, text, message):
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(AbissFormatError, match=message):
        read_abiss_json(p)


# --- fuzz: only AbissFormatError may escape ------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
    | st.sampled_from(["Answerable", "answerable", "Missing Entity", "Scope Ambiguity"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
FIELDS = (
    "db_id",
    "question",
    "evidence",
    "sql",
    "category",
    "question_style",
    "question_difficulty",
    "hidden_knowledge",
    "is_solvable",
    "subcategory_id",
    "group_id",
    "generator",
)


@st.composite
def mutated_records(draw):
    """A valid record with some fields deleted or replaced by arbitrary JSON values."""
    sub = draw(st.sampled_from(["answerable", "missing_entity", "scope_ambiguity", "lexical_vagueness"]))
    s = subcategory(sub)
    rec = _valid_record(
        category={"name": s.category, "subname": s.name, "answerable": True, "solvable": s.solvable},
        subcategory_id=draw(st.sampled_from([sub, "", None])),
    )
    for key in draw(st.lists(st.sampled_from(FIELDS), max_size=4, unique=True)):
        if draw(st.booleans()):
            rec.pop(key, None)
        else:
            rec[key] = draw(json_values)
    if draw(st.booleans()) and isinstance(rec.get("category"), dict):
        rec["category"] = {**rec["category"], draw(st.sampled_from(["name", "subname"])): draw(json_values)}
    return rec


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(json_values, st.lists(st.one_of(mutated_records(), json_values), max_size=4)))
def test_from_abiss_records_fuzz_only_raises_format_errors(data):
    try:
        df = from_abiss_records(data)
    except AbissFormatError as exc:
        assert str(exc)
        if isinstance(data, list):
            assert "record " in str(exc)
        return
    assert df.columns == list(DATASET_COLUMNS)
    for col in ("db_id", "question", "subcategory", "style", "difficulty", "group_id"):  # required, never null
        assert df[col].null_count() == 0, col


def test_module_exports():
    assert outputs.AbissFormatError.__mro__[1] is ValueError


def test_vote_ids_do_not_depend_on_other_decisions():
    """Adding votes to one candidate must not renumber another candidate's votes."""

    def decision(cid, n):
        votes = [
            {"member": m, "comparison": None, "vote": "yes", "parsed_ok": True, "llm_call_id": f"{cid}{m}"}
            for m in "abc"[:n]
        ]
        return {
            "candidate_id": cid,
            "stage": "s03_category_conformance",
            "stage_no": 3,
            "applies": True,
            "passed": True,
            "reason": "",
            "n_votes": n,
            "calls_saved": 0,
            "votes": votes,
        }

    small = council_votes_frame([decisions_frame([decision("x", 2), decision("y", 2)])])
    large = council_votes_frame([decisions_frame([decision("x", 3), decision("y", 2)])])
    ids = lambda df: set(df.filter(df["candidate_id"] == "y")["vote_id"])  # noqa: E731
    assert ids(small) == ids(large)
    assert large.filter(large["candidate_id"] == "x")["seq"].to_list() == [0, 1, 2]


def test_funnel_names_stages_that_nobody_entered():
    empty = [decisions_frame([]) for _ in STAGES]
    rows = funnel(pl.DataFrame({"candidate_id": ["a"]}), empty)
    assert [r[0] for r in rows[1:]] == [s.key for s in STAGES]
