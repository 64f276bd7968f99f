"""The ten ABISS validation stages (§4.2) against a real Council over the scripted provider.

Every test builds hand-made candidate rows over the demo university database, a real
``Council`` of scripted members and a ``StageContext``; the responder reads the last user
message to tell the stage's prompt apart and answers per member. Counting the scripted
provider's requests checks the short-circuit rules (a decided vote asks nobody else).
"""

from __future__ import annotations

import hashlib
import re

import pytest

from pipelines.abiss.stages import STAGE_BY_NO, run_stage
from pipelines.abiss.taxonomy import subcategories_in, subcategory
from resources.llm import call_log
from resources.llm.failures import ProviderUnavailable
from tests.abiss.cascade_helpers import (  # noqa: F401
    _NAME_TO_ID,
    GARBAGE,
    MARKERS,
    SOLVING_SQL,
    STAGE_KIND,
    Script,
    amb_pair,
    ans_row,
    by_id,
    cand,
    council,
    evid_row,
    field_of,
    kind_of,
    una_row,
    verdicts,
)
from tests.llm_fakes import http_error

# ------------------------------------------------------------------------------ stage 1


def test_stage1_exact_duplicates_keep_the_first():
    rows = [
        cand("c1", "answerable", "How many students are there?", "SELECT COUNT(*) FROM students", request_id="r1"),
        cand(
            "c2",
            "answerable",
            "  how many STUDENTS   are there? ",
            "SELECT COUNT(student_id) FROM students",
            request_id="r2",
        ),
        # same text, other subcategory: not an exact duplicate (and no SQL to mask)
        cand("c3", "missing_entity", "How many students are there?", feedback="x", request_id="r3"),
    ]
    d = by_id(run_stage(1, rows, None))
    assert d["c1"]["passed"] and d["c3"]["passed"]
    assert not d["c2"]["passed"] and d["c2"]["reason"] == "exact duplicate of c1"


def test_stage1_value_masked_duplicates_across_literal_only_variants():
    rows = [
        cand(
            "c1",
            "answerable",
            "Which courses are worth 12 credits?",
            "SELECT title FROM courses WHERE credits = 12",
            request_id="r1",
        ),
        cand(
            "c2",
            "answerable",
            "Which courses are worth 6 credits?",
            "select TITLE from Courses where credits=6",
            request_id="r2",
        ),
        cand(
            "c3",
            "answerable",
            "Which courses start in 2025?",
            "SELECT title FROM courses WHERE year = 2025",
            request_id="r3",
        ),
        cand(
            "c4",
            "answerable",
            "Which courses are worth at least 6 credits?",
            "SELECT title FROM courses WHERE credits >= 6",
            request_id="r4",
        ),
    ]
    d = by_id(run_stage(1, rows, None))
    assert d["c1"]["passed"] and d["c3"]["passed"] and d["c4"]["passed"]  # other column / operator
    assert not d["c2"]["passed"] and d["c2"]["reason"] == "value-masked SQL duplicates c1"


def test_stage1_literal_variants_within_an_ambiguous_group_are_kept():
    pair = amb_pair()
    pair[1]["sql"] = "SELECT title FROM courses WHERE year = 2025"  # differs from interpretation 0 in a value
    other_group = cand(
        "c_other",
        "lexical_vagueness",
        "Show the titles of the new courses.",
        "SELECT title FROM courses WHERE year = 2024",
        group_id="g_other",
        request_id="req_z",
    )
    d = by_id(run_stage(1, [*pair, other_group], None))
    assert d[pair[0]["candidate_id"]]["passed"] and d[pair[1]["candidate_id"]]["passed"]
    assert not d["c_other"]["passed"]  # the same masked SQL in another group is a duplicate
    assert d["c_other"]["reason"] == f"value-masked SQL duplicates {pair[0]['candidate_id']}"


def test_stage1_unanswerable_rows_are_not_masked_and_all_groups_apply():
    rows = [
        una_row("u1", request_id="r1"),
        cand("u2", "missing_entity", "What is the shoe size of each professor?", feedback="no", request_id="r2"),
    ]
    d = run_stage(1, rows, None)
    assert all(x["passed"] and x["applies"] for x in d)


# ------------------------------------------------------------------------------ stage 2


def test_stage2_executability(make_ctx):
    runaway = "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT COUNT(*) FROM r"
    rows = [
        ans_row("ok"),
        cand("none", "answerable", "q none", None),
        cand("syntax", "answerable", "q syntax", "SELEC title FRM courses"),
        cand("empty", "answerable", "q empty", "SELECT title FROM courses WHERE credits = 999"),
        cand("slow", "answerable", "q slow", runaway),
        una_row("u"),
    ]
    rows[1]["grounding_status"], rows[1]["grounding_error"] = "call_failed", "HTTP 500"
    d = by_id(run_stage(2, rows, make_ctx(timeout_s=0.3)))
    assert d["ok"]["passed"] and d["ok"]["reason"].endswith(" rows") and " ms" not in d["ok"]["reason"]
    assert not d["none"]["passed"] and d["none"]["reason"].startswith("no SQL (call_failed")
    assert not d["syntax"]["passed"] and d["syntax"]["reason"].startswith("syntax")
    assert not d["empty"]["passed"] and d["empty"]["reason"] == "empty result"
    assert not d["slow"]["passed"] and d["slow"]["reason"].startswith("timeout")
    assert d["u"]["passed"] and not d["u"]["applies"] and d["u"]["reason"] == "not applicable"


# ------------------------------------------------------------------------------ stages 3, 4, 8, 10


def _row_for(stage_no):
    return una_row() if stage_no == 8 else ans_row()


def _yes_no_handler(stage_no, row, table):
    if stage_no == 10:
        return lambda m, t: (
            GARBAGE if table.get(m) is None else {"style": row["style"] if table[m] == "yes" else "colloquial"}
        )
    return verdicts(table)


@pytest.mark.parametrize("stage_no", [3, 4, 8, 10])
@pytest.mark.parametrize(
    "votes, passed, asked, expected_votes",
    [
        (("yes", "no", "yes"), True, 3, ["yes", "no", "yes"]),  # 2-1 passes
        (("no", "yes", "no"), False, 3, ["no", "yes", "no"]),  # 1-2 rejects
        (("yes", "yes", "yes"), True, 2, ["yes", "yes"]),  # decided after two: c never asked
        (("no", "no", "yes"), False, 2, ["no", "no"]),
    ],
)
def test_yes_no_stages_strict_majority(stage_no, votes, passed, asked, expected_votes, scripted, make_ctx):
    row = _row_for(stage_no)
    kind = STAGE_KIND[stage_no]
    script = Script(**{kind: _yes_no_handler(stage_no, row, dict(zip("abc", votes)))})
    scripted.responder = script
    ctx = make_ctx()
    [d] = run_stage(stage_no, [row], ctx)
    assert d["applies"] and d["passed"] is passed
    assert script.count(kind) == asked  # short-circuit: requests to the provider for this stage
    assert [v["vote"] for v in d["votes"]] == expected_votes
    assert all(v["parsed_ok"] for v in d["votes"])
    assert all(v["llm_call_id"] for v in d["votes"])
    assert d["calls_saved"] == 3 - asked and ctx.stats["calls_saved"] == 3 - asked
    assert d["n_votes"] == asked


@pytest.mark.parametrize("stage_no", [3, 4, 8, 10])
@pytest.mark.parametrize(
    "votes, passed, expected_votes, reason",
    [
        (("yes", None, "no"), False, ["yes", "failed", "no"], "undecided"),  # was a tie that rejected
        (("yes", None, "yes"), True, ["yes", "failed", "yes"], "2 yes / 0 no / 1 failed"),  # 2 of 3 decide
        (("no", None, "yes"), False, ["no", "failed", "yes"], "undecided"),  # the same for a no
    ],
)
def test_unreadable_vote_is_a_failed_call_never_an_abstention(
    stage_no, votes, passed, expected_votes, reason, scripted, make_ctx
):
    """#34 item 2: an unreadable answer (after the repair call) casts no vote. By default the stage
    fails like an HTTP error; tolerated, the row is decided only by a majority of the configured
    members, else rejected as undecided (said in the reason)."""
    row = _row_for(stage_no)
    kind = STAGE_KIND[stage_no]
    scripted.responder = Script(**{kind: _yes_no_handler(stage_no, row, dict(zip("abc", votes)))})
    with pytest.raises(ProviderUnavailable, match="unreadable"):
        run_stage(stage_no, [row], make_ctx())
    # tolerated: b answers another row readably (a member with no usable answer at all fails anyway)
    other = {**row, "candidate_id": "other", "question": row["question"].rstrip(".?") + " again?"}
    bad = _yes_no_handler(stage_no, row, dict(zip("abc", votes)))
    good = _yes_no_handler(stage_no, other, {"a": "yes", "b": "yes", "c": "yes"})
    scripted.responder = Script(**{kind: lambda m, t: good(m, t) if other["question"] in t else bad(m, t)})
    d = by_id(run_stage(stage_no, [row, other], make_ctx(max_failed_call_share=1.0)))[row["candidate_id"]]
    assert d["passed"] is passed and reason in d["reason"]
    assert [v["vote"] for v in d["votes"]] == expected_votes


def test_a_member_answering_garbage_fails_the_step_naming_it(scripted, make_ctx):
    """#34 item 2: validators [alpha, beta], beta answers prose or wrong-schema JSON to every call.
    Was: every row rejected, "0 validated", exit 0. Now the stage fails and names beta."""
    for garbage in ("I would say yes.", '{"answer": "yes"}'):
        scripted.responder = Script(conformance=lambda m, t, g=garbage: {"verdict": "yes"} if m == "alpha" else g)
        rows = [ans_row(f"c{i}") for i in range(4)]
        for i, r in enumerate(rows):
            r["question"] = f"List the titles of the courses worth {3 * (i + 1)} credits ({garbage[:3]})."
        with pytest.raises(ProviderUnavailable, match=r"no usable answer: beta \(4 of 4\)"):
            run_stage(3, rows, make_ctx(council(["alpha", "beta"]), max_failed_call_share=0.9))


@pytest.mark.parametrize("stage_no", [3, 4, 8, 10])
@pytest.mark.parametrize("votes, passed", [(("yes", "no"), False), (("no", "yes"), False), (("yes", "yes"), True)])
def test_yes_no_stages_tie_rejects_with_two_members(stage_no, votes, passed, scripted, make_ctx):
    row = _row_for(stage_no)
    scripted.responder = Script(**{STAGE_KIND[stage_no]: _yes_no_handler(stage_no, row, dict(zip("ab", votes)))})
    [d] = run_stage(stage_no, [row], make_ctx(council("ab")))
    assert d["passed"] is passed


def test_ground_truth_prompt_shows_result_rows_and_hidden_knowledge(scripted, make_ctx):
    prompts = []
    scripted.responder = Script(ground_truth=lambda m, t: prompts.append(t) or {"verdict": "yes"})
    pair = amb_pair()
    run_stage(4, pair[:1], make_ctx())
    assert prompts and "Recent means offered in 2026." in prompts[0]
    assert "columns ['title']" in prompts[0]


@pytest.mark.parametrize(
    "stage_no, applicable",
    [
        (2, {"ans", "evid", "g_recent_0", "g_recent_1"}),
        (3, {"ans", "evid", "g_recent_0", "g_recent_1", "una"}),
        (4, {"ans", "evid", "g_recent_0", "g_recent_1"}),
        (5, {"evid"}),
        (6, {"g_recent_0", "g_recent_1"}),
        (7, {"una"}),
        (8, {"una"}),
        (9, {"g_recent_0", "g_recent_1", "una"}),
        (10, {"ans", "evid", "g_recent_0", "g_recent_1", "una"}),
    ],
)
def test_group_applicability(stage_no, applicable, scripted, make_ctx):
    """Non-applicable survivors pass through untouched; no LLM call is made for them."""
    scripted.responder = Script()  # every reply unreadable: the stage fails, naming every member (#34 item 2)
    rows = [ans_row("ans"), evid_row("evid"), *amb_pair(), una_row("una")]
    asked_about = lambda: {q for _, _, q in scripted.responder.seen if q}  # noqa: E731
    if STAGE_BY_NO[stage_no].uses_council:
        with pytest.raises(ProviderUnavailable, match=r"no usable answer: a \(\d+ of \d+\), b"):
            run_stage(stage_no, rows, make_ctx())
    else:
        d = run_stage(stage_no, rows, make_ctx())
        assert {x["candidate_id"] for x in d if x["applies"]} == applicable
    questions_of_applicable = {r["question"] for r in rows if r["candidate_id"] in applicable}
    if STAGE_BY_NO[stage_no].uses_council:
        assert asked_about() == questions_of_applicable  # every applicable row asked, nothing else
    # the non-applicable rows alone pass through without a call
    d = run_stage(stage_no, [r for r in rows if r["candidate_id"] not in applicable], make_ctx())
    assert [x["candidate_id"] for x in d] == sorted(
        r["candidate_id"] for r in rows if r["candidate_id"] not in applicable
    )
    for x in d:
        if not x["applies"]:
            assert x["passed"] and x["reason"] == "not applicable" and x["votes"] == []
            assert x["stage"] == STAGE_BY_NO[stage_no].key
    assert not any(x["applies"] for x in d)


def test_council_stage_with_no_applicable_rows_needs_no_context():
    [d] = run_stage(8, [ans_row()], None)
    assert d["passed"] and not d["applies"]


# ------------------------------------------------------------------------------ stage 5


EQUIV_NO_EVIDENCE = "SELECT last_name, first_name, student_id FROM students WHERE credits > 90"  # superset, reordered
OTHER_SQL = "SELECT first_name, last_name FROM students"
BROKEN_SQL = "SELECT first_name FROM no_such_table"


@pytest.mark.parametrize(
    "writes, passed, asked",
    [
        ((EQUIV_NO_EVIDENCE, EQUIV_NO_EVIDENCE, OTHER_SQL), False, 2),  # majority equivalent -> reject
        ((EQUIV_NO_EVIDENCE, OTHER_SQL, EQUIV_NO_EVIDENCE), False, 3),
        ((EQUIV_NO_EVIDENCE, OTHER_SQL, OTHER_SQL), True, 3),
        ((OTHER_SQL, OTHER_SQL, EQUIV_NO_EVIDENCE), True, 2),  # decided after two
        ((EQUIV_NO_EVIDENCE, BROKEN_SQL, BROKEN_SQL), True, 3),  # SQL that fails is not equivalent
    ],
)
def test_stage5_evidence_necessity(writes, passed, asked, scripted, make_ctx):
    table = dict(zip("abc", writes))
    script = Script(write_sql=lambda m, t: GARBAGE if table[m] is None else {"sql": table[m]})
    scripted.responder = script
    row = evid_row()
    [d] = run_stage(5, [row], make_ctx())
    assert d["passed"] is passed
    assert script.count("write_sql") == asked
    assert d["calls_saved"] == 3 - asked
    assert len(d["votes"]) == asked and all(v["llm_call_id"] for v in d["votes"])
    label = {
        EQUIV_NO_EVIDENCE: "equivalent",
        OTHER_SQL: "not_equivalent",
        BROKEN_SQL: "not_equivalent (fails to run)",
    }
    expected = [label[w] for w in writes[:asked]]
    assert [v["vote"] for v in d["votes"]] == expected


def test_stage5_prompt_hides_the_evidence(scripted, make_ctx):
    prompts = []
    scripted.responder = Script(write_sql=lambda m, t: prompts.append(t) or {"sql": OTHER_SQL})
    row = evid_row()
    run_stage(5, [row], make_ctx())
    assert prompts and all(field_of(t, "Evidence") == "none" for t in prompts)
    assert all(row["evidence"] not in t for t in prompts)


def test_stage5_tie_with_two_members_keeps_the_question(scripted, make_ctx):
    table = {"a": EQUIV_NO_EVIDENCE, "b": OTHER_SQL}
    scripted.responder = Script(write_sql=lambda m, t: {"sql": table[m]})
    [d] = run_stage(5, [evid_row()], make_ctx(council("ab")))
    assert d["passed"]  # 1 of 2 is not a strict majority of equivalent SQL


# ------------------------------------------------------------------------------ stage 6


def test_stage6_dominant_reading_is_cut_to_the_other(scripted, make_ctx):
    """Members reading the question without hidden knowledge all write interpretation 0."""
    dominant = "SELECT title FROM courses WHERE year = 2026 ORDER BY title"
    script = Script(write_sql=lambda m, t: {"sql": dominant})
    scripted.responder = script
    pair = amb_pair()
    d = by_id(run_stage(6, pair, make_ctx()))
    first, second = d[pair[0]["candidate_id"]], d[pair[1]["candidate_id"]]
    assert not first["passed"] and "dominant reading" in first["reason"]
    assert second["passed"]
    assert script.count("write_sql") == 2  # both interpretations decided after two members
    assert first["calls_saved"] + second["calls_saved"] == 1  # the group's saved call, counted once
    assert {v["comparison"] for v in first["votes"]} == {"interpretation_0"}
    assert [v["vote"] for v in first["votes"]] == ["equivalent", "equivalent"]
    assert [v["vote"] for v in second["votes"]] == ["not_equivalent", "not_equivalent"]
    # one prompt per member for the whole group (the question is shared), no hidden knowledge in it
    assert all(q == pair[0]["question"] for k, _, q in script.seen if k == "write_sql")


def test_stage6_prompt_has_no_hidden_knowledge(scripted, make_ctx):
    prompts = []
    scripted.responder = Script(write_sql=lambda m, t: prompts.append(t) or {"sql": "SELECT 1"})
    pair = amb_pair()
    run_stage(6, pair, make_ctx())
    assert prompts and not any(p["hidden_knowledge"] in t for t in prompts for p in pair)


def test_stage6_split_or_other_readings_keep_both(scripted, make_ctx):
    table = {
        "a": "SELECT title FROM courses WHERE year = 2026",
        "b": "SELECT title FROM courses WHERE year >= 2025",
        "c": "SELECT title FROM courses",
    }
    script = Script(write_sql=lambda m, t: {"sql": table[m]})
    scripted.responder = script
    d = run_stage(6, amb_pair(), make_ctx())
    assert all(x["passed"] for x in d)
    assert script.count("write_sql") == 3


def test_stage6_single_surviving_interpretation(scripted, make_ctx):
    scripted.responder = Script(write_sql=lambda m, t: {"sql": "SELECT title FROM courses WHERE year >= 2025"})
    pair = amb_pair()
    [d] = run_stage(6, pair[1:], make_ctx())
    assert not d["passed"]


# ------------------------------------------------------------------------------ stage 7


def test_stage7_any_member_solving_rejects_and_stops(scripted, make_ctx):
    script = Script(
        solve=lambda m, t: {"answerable": True, "sql": SOLVING_SQL},
        ground_truth=verdicts({"a": "yes", "b": "yes", "c": "yes"}),
    )
    scripted.responder = script
    [d] = run_stage(7, [una_row()], make_ctx())
    assert not d["passed"] and d["reason"].startswith("solved by a")
    assert script.count("solve") == 1  # b and c never asked to solve
    assert script.count("ground_truth") == 2  # the judges' vote short-circuits too
    assert d["calls_saved"] == 2 + 1  # b and c never asked to solve, the third judge never asked
    solve_votes = [v for v in d["votes"] if v["comparison"] == "solve"]
    assert [(v["member"], v["vote"]) for v in solve_votes] == [("a", "solved")]
    assert {v["comparison"] for v in d["votes"]} == {"solve", "gt_check:a"}


def test_stage7_a_later_member_solves(scripted, make_ctx):
    solve = {
        "a": {"answerable": False, "sql": ""},
        "b": {"answerable": True, "sql": BROKEN_SQL},
        "c": {"answerable": True, "sql": SOLVING_SQL},
    }
    script = Script(solve=lambda m, t: solve[m], ground_truth=verdicts({"a": "yes", "b": "no", "c": "yes"}))
    scripted.responder = script
    [d] = run_stage(7, [una_row()], make_ctx())
    assert not d["passed"] and d["reason"].startswith("solved by c")
    votes = [(v["member"], v["vote"]) for v in d["votes"] if v["comparison"] == "solve"]
    assert votes[0] == ("a", "unsolved") and votes[1][0] == "b" and votes[1][1].startswith("unsolved (")
    assert votes[2] == ("c", "solved")


def test_stage7_all_unanswerable_or_wrong_passes(scripted, make_ctx):
    solve = {
        "a": {"answerable": False, "sql": ""},
        "b": {"answerable": True, "sql": "SELECT title FROM courses WHERE credits = 999"},  # empty result
        "c": {"answerable": True, "sql": SOLVING_SQL},
    }
    script = Script(solve=lambda m, t: solve[m], ground_truth=verdicts({"a": "no", "b": "no", "c": "no"}))
    scripted.responder = script
    [d] = run_stage(7, [una_row()], make_ctx())
    assert d["passed"] and d["reason"] == "no council member found a correct SQL"
    assert script.count("solve") == 3
    assert script.count("ground_truth") == 2  # only c's SQL executed with rows; judges said no
    votes = {v["member"]: v["vote"] for v in d["votes"] if v["comparison"] == "solve"}
    assert votes == {"a": "unsolved", "b": "unsolved (empty result)", "c": "unsolved (judged wrong)"}


def test_stage7_every_member_unanswerable_passes(scripted, make_ctx):
    script = Script(solve=lambda m, t: {"answerable": False, "sql": ""})
    scripted.responder = script
    [d] = run_stage(7, [una_row()], make_ctx())
    assert d["passed"] and script.count("solve") == 3 and script.count("ground_truth") == 0


def test_stage7_unreadable_attempt_is_neither_a_solution_nor_a_pass(scripted, make_ctx):
    """An unreadable attempt might have been a solution: never "no member found a correct SQL"."""
    scripted.responder = Script()  # nothing parses
    with pytest.raises(ProviderUnavailable, match="no usable answer"):
        run_stage(7, [una_row()], make_ctx())
    rows = [una_row("u1"), una_row("u2")]
    rows[1]["question"] = rows[1]["question"].rstrip("?.") + " today?"
    scripted.responder = Script(
        solve=lambda m, t: {"answerable": False, "sql": ""} if m != "b" or "today" in t else "garbage"
    )
    d = by_id(run_stage(7, rows, make_ctx(max_failed_call_share=1.0)))
    assert not d["u1"]["passed"] and d["u1"]["reason"].startswith("undecided") and "from b" in d["u1"]["reason"]
    assert [v["vote"] for v in d["u1"]["votes"]] == ["unsolved", "failed", "unsolved"]
    assert d["u2"]["passed"]


# ------------------------------------------------------------------------------ stage 9


def prefer(*ranking: str):
    """Consistency handler choosing the option ranked best in ``ranking`` (subcategory ids)."""

    def handler(member, text):
        a = _NAME_TO_ID[re.search(r"^A: (.*?) — ", text, re.MULTILINE).group(1)]
        b = _NAME_TO_ID[re.search(r"^B: (.*?) — ", text, re.MULTILINE).group(1)]
        rank = {s: i for i, s in enumerate(ranking)}
        return {"choice": "A" if rank.get(a, 99) <= rank.get(b, 99) else "B"}

    return handler


def _flip(cid: str, other: str) -> bool:
    return hashlib.sha256(f"{cid}|{other}".encode()).digest()[0] % 2 == 1


UNA_COMPETITORS = [s.id for s in subcategories_in("unanswerable") if s.id != "missing_entity"]


def test_stage9_assigned_category_must_win_every_comparison(scripted, make_ctx):
    script = Script(consistency=prefer("missing_entity"))
    scripted.responder = script
    [d] = run_stage(9, [una_row()], make_ctx())
    assert d["passed"] and d["reason"] == f"won all {len(UNA_COMPETITORS)} comparisons"
    assert script.count("consistency") == 2 * len(UNA_COMPETITORS)  # 2 agreeing members per comparison
    assert [v["comparison"] for v in d["votes"]][::2] == [f"vs:{o}" for o in UNA_COMPETITORS]
    assert all(v["vote"] == "yes" for v in d["votes"])


def test_stage9_stops_at_the_first_loss(scripted, make_ctx):
    loser_to = UNA_COMPETITORS[1]
    script = Script(consistency=prefer(loser_to, "missing_entity"))
    scripted.responder = script
    [d] = run_stage(9, [una_row()], make_ctx())
    assert not d["passed"] and d["reason"] == f"lost against {loser_to}"
    assert script.count("consistency") == 4  # two comparisons, two members each; the third never asked
    assert {v["comparison"] for v in d["votes"]} == {f"vs:{UNA_COMPETITORS[0]}", f"vs:{loser_to}"}
    remaining = len(UNA_COMPETITORS) - 2
    assert d["calls_saved"] == 1 + 1 + 3 * remaining


def test_stage9_without_the_stop_asks_every_comparison_and_decides_the_same(scripted, make_ctx):
    """``stop_at_first_loss=False`` (bench_cascade's short-circuit-off baseline): every comparison is
    asked, the first loss still names the decision."""
    loser_to = UNA_COMPETITORS[0]
    script = Script(consistency=prefer(loser_to, "missing_entity"))
    scripted.responder = script
    [d] = run_stage(9, [una_row()], make_ctx(stop_at_first_loss=False))
    assert not d["passed"] and d["reason"] == f"lost against {loser_to}"
    assert script.count("consistency") == 2 * len(UNA_COMPETITORS)
    assert {v["comparison"] for v in d["votes"]} == {f"vs:{o}" for o in UNA_COMPETITORS}


def test_stage9_strict_majority_per_comparison(scripted, make_ctx):
    """One member of three prefers a competitor: still won; two members of two split: lost."""
    handlers = {"a": prefer("missing_entity"), "b": prefer(UNA_COMPETITORS[0]), "c": prefer("missing_entity")}
    scripted.responder = Script(consistency=lambda m, t: handlers[m](m, t))
    [d] = run_stage(9, [una_row()], make_ctx())
    assert d["passed"]
    scripted.responder = Script(consistency=lambda m, t: handlers[m](m, t))
    [d2] = run_stage(9, [una_row("c_una_2")], make_ctx(council("ab")))
    assert not d2["passed"] and d2["reason"] == f"lost against {UNA_COMPETITORS[0]}"


def test_stage9_positions_are_flipped_and_handled(scripted, make_ctx):
    # a candidate whose comparisons put the assigned category first in some and second in others
    cid = next(
        f"c{i}"
        for i in range(200)
        if not _flip(f"c{i}", UNA_COMPETITORS[0]) and any(_flip(f"c{i}", o) for o in UNA_COMPETITORS)
    )
    first_flip = next(i for i, o in enumerate(UNA_COMPETITORS) if _flip(cid, o))

    prompts = []
    scripted.responder = Script(consistency=lambda m, t: prompts.append(t) or prefer("missing_entity")(m, t))
    [d] = run_stage(9, [una_row(cid)], make_ctx())
    assert d["passed"]  # judged by meaning, the assigned category wins wherever it is shown
    me = subcategory("missing_entity").name
    positions = {re.search(r"^A: (.*?) — ", t, re.MULTILINE).group(1) == me for t in prompts}
    assert positions == {True, False}

    # a position-biased council (always "A") loses at the first comparison that shows the assigned as B
    script = Script(consistency=lambda m, t: {"choice": "A"})
    scripted.responder = script
    row = una_row(cid)
    row["question"] = "What is the locker number of each student?"  # new prompts: not served from the cache
    [d2] = run_stage(9, [row], make_ctx())
    assert not d2["passed"] and d2["reason"] == f"lost against {UNA_COMPETITORS[first_flip]}"
    assert script.count("consistency") == 2 * (first_flip + 1)


def test_stage9_ambiguous_against_its_own_group(scripted, make_ctx):
    script = Script(consistency=prefer("lexical_vagueness"))
    scripted.responder = script
    pair = amb_pair()
    d = run_stage(9, pair, make_ctx())
    n_amb = len(subcategories_in("ambiguous")) - 1
    assert all(x["passed"] for x in d)
    assert script.count("consistency") == 2 * n_amb * 2


# ------------------------------------------------------------------------------ stage 10 (style)


def test_stage10_style_label_must_match(scripted, make_ctx):
    labels = {"a": "colloquial", "b": "formal", "c": "colloquial"}
    scripted.responder = Script(style=lambda m, t: {"style": labels[m]})
    rows = [ans_row("formal_q", style="formal"), ans_row("colloquial_q", style="colloquial")]
    rows[1]["question"] = "hey, which courses give you 12 credits?"
    d = by_id(run_stage(10, rows, make_ctx()))
    assert not d["formal_q"]["passed"] and d["colloquial_q"]["passed"]
    assert {v["comparison"] for v in d["formal_q"]["votes"]} == {"is formal"}


def test_stage10_offers_only_the_runs_styles(scripted, make_ctx):
    """The paper's three styles plus the run's: 'imperative' is not a label the council may pick here."""
    script = Script(style=lambda m, t: {"style": "imperative"})
    scripted.responder = script
    with pytest.raises(ProviderUnavailable, match="no usable answer"):  # a label it may not pick is unreadable
        run_stage(10, [ans_row("formal_q", style="formal")], make_ctx())
    prompt = scripted.requests[0].messages[-1]["content"]
    assert "- colloquial:" in prompt and "- interrogative:" in prompt and "- imperative:" not in prompt


# ------------------------------------------------------------------------------ provider outage


def test_council_unavailable_then_rerun_repeats_only_failed_calls(scripted, make_ctx):
    rows = [ans_row(f"c{i}") for i in range(4)]
    for i, r in enumerate(rows):
        r["question"] = f"List the titles of the courses worth {3 * (i + 1)} credits."
    down = Script(conformance=lambda m, t: {"verdict": "yes"} if m == "a" else http_error(500, "endpoint down"))
    scripted.responder = down
    c = council(max_retries=0)
    with pytest.raises(ProviderUnavailable, match="s03_category_conformance"):
        run_stage(3, rows, make_ctx(c))
    assert down.count("conformance") == 12  # a answers, b and c fail: every member asked per row
    failed = {(m, q) for k, m, q in down.seen if m != "a"}
    log = call_log()
    assert log.count("status = 'call_failed'") == 8 and log.count("status = 'ok'") == 4

    healthy = Script(conformance=lambda m, t: {"verdict": "yes"})
    scripted.responder = healthy
    ctx = make_ctx(c)
    d = run_stage(3, rows, ctx)
    assert all(x["passed"] for x in d)
    assert healthy.count() == 4 and healthy.count(member="a") == 0  # a's answers came from the cache
    assert {(m, q) for _, m, q in healthy.seen} <= failed  # only calls that had failed are made again
    assert ctx.stats["cached"] == 4 and ctx.stats["call_failed"] == 0


def test_any_failed_call_fails_the_stage_by_default(scripted, make_ctx):
    """A decision must not rest on a vote that never happened: one provider failure fails the stage."""
    scripted.responder = Script(conformance=lambda m, t: http_error(500) if m == "b" else {"verdict": "no"})
    # a no + a failure no longer decide (the failed vote could have been a yes): c is asked too
    with pytest.raises(ProviderUnavailable, match="1 of 3"):
        run_stage(3, [ans_row()], make_ctx(council(max_retries=0)))


def test_tolerated_failed_calls_cast_no_vote(scripted, make_ctx):
    """Below a configured failed-call share the stage completes; a failed member casts no vote, and
    the other two decide only when they agree (a majority of the configured members)."""
    rows = [ans_row("c0"), ans_row("c1")]
    rows[1]["question"] = "List the titles of the courses worth 4 credits."
    scripted.responder = Script(
        conformance=lambda m, t: http_error(500) if m == "b" and "4 credits" not in t else {"verdict": "yes"}
    )
    d = by_id(run_stage(3, rows, make_ctx(council(max_retries=0), max_failed_call_share=0.5)))
    assert d["c0"]["passed"]
    assert [v["vote"] for v in d["c0"]["votes"]] == ["yes", "failed", "yes"]


# ------------------------------------------------------------------------------ calls-saved bookkeeping


@pytest.mark.parametrize("stage_no", [3, 4, 5, 6, 7, 8, 9, 10])
def test_calls_saved_in_decisions_match_the_context_stats(stage_no, scripted, make_ctx):
    """The rejection report sums decisions' calls_saved; the asset metadata reports ctx.stats."""
    scripted.responder = Script(
        conformance=verdicts({"a": "yes", "b": "yes", "c": "no"}),
        ground_truth=verdicts({"a": "yes", "b": "yes", "c": "yes"}),
        feedback=verdicts({"a": "no", "b": "no", "c": "yes"}),
        style=lambda m, t: {"style": "formal"},
        write_sql=lambda m, t: {"sql": "SELECT title FROM courses WHERE year = 2026"},
        solve=lambda m, t: {"answerable": m != "a", "sql": SOLVING_SQL},
        consistency=prefer("answerable_with_evidence", UNA_COMPETITORS[1], "lexical_vagueness", "missing_entity"),
    )
    rows = [ans_row("ans"), evid_row("evid"), *amb_pair(), una_row("una"), una_row("una2")]
    rows[-1]["question"] = "What is the blood type of each professor?"
    ctx = make_ctx()
    d = run_stage(stage_no, rows, ctx)
    assert sum(x["calls_saved"] for x in d) == ctx.stats["calls_saved"] > 0
