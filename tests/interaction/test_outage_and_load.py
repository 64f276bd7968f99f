"""Issue 38 items 2–4: an outage of the system's endpoint is not the system's answer; an undecided
metric is never a rate (and names the judges that left it so); machine load never decides EX."""

import sqlite3
from pathlib import Path

import pytest

from cli.commands.interaction import UNDECIDED_EXIT, _undecided_exit
from pipelines.interaction import metrics as M
from pipelines.interaction.agents import AgentHandle, ClassifyResult, CouncilSystemAgent
from pipelines.interaction.dialogue import run_conversation
from pipelines.interaction.same_rows import same_rows_in_database
from pipelines.interaction.user import SimulatedUser
from resources.llm import Council, call_log
from resources.sql.results import FailureKind, QueryFailure
from tests.interaction.helpers import Script, question_row
from tests.llm_fakes import http_error, scripted_member

ANS = question_row("answerable", "How many rows?", sql="SELECT COUNT(*) FROM t", qid="q-ans")
UNANS = question_row("missing_entity", "List the staff.", feedback="There is no staff table.", qid="q-unans")


def _agent(name="sys"):
    c = Council("system_agents", [scripted_member(name, max_retries=0)], call_log())
    return AgentHandle(CouncilSystemAgent(c, name), name, "council", name)


def _user():
    return SimulatedUser(
        Council("user_simulator", [scripted_member(f"u{i}", max_retries=0) for i in range(3)], call_log())
    )


@pytest.fixture
def small_db(tmp_path) -> Path:
    path = tmp_path / "small.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER)")
    con.executemany("INSERT INTO t VALUES (?, ?)", [(i, i % 3) for i in range(20)])
    con.commit()
    con.close()
    return path


# ----------------------------------------------------------------------------- item 3: outage


def test_an_endpoint_outage_leaves_the_conversation_incomplete_and_a_rerun_completes_it(scripted, small_db):
    down = {"on": True}

    def system(req):
        if down["on"]:
            return http_error(500, "upstream unavailable")
        return '{"system_sql": "SELECT COUNT(*) FROM t", "system_feedback": null}'

    scripted.responder = system
    conv = run_conversation(_agent(), ANS, "taxonomy_free", None, _user(), "schema", str(small_db), max_steps=0)
    assert conv["end"] == "system_failed" and conv["turns"][0]["system_status"] == "call_failed"
    s = M.score_conversation(conv, ANS, str(small_db))
    # was EX False ("the agent gave up"); now not scored, counted apart as an outage
    assert s["solved"] is None and s["ex_status"] == "incomplete" and "endpoint" in s["ex_reason"]
    rows = M.metric_rows([s])
    get = {(r["table"], r["metric"]): r for r in rows if r["agent"] == "sys" and r["table"] == "table4"}
    assert get[("table4", "ex")]["denominator"] == 0
    assert get[("table4", "incomplete")]["numerator"] == get[("table4", "system_failed")]["numerator"] == 1
    text = M.report_text(rows, "quandary interact --db d")
    assert text.startswith("PROVISIONAL") and "1 because the system agent's endpoint gave no answer" in text
    assert "system outage" in text
    # the endpoint heals: the same conversation completes (a failed call is not cached)
    down["on"] = False
    again = run_conversation(_agent(), ANS, "taxonomy_free", None, _user(), "schema", str(small_db), max_steps=0)
    assert again["end"] == "sql" and M.score_conversation(again, ANS, str(small_db))["solved"] is True


def test_an_unreadable_answer_still_counts_against_the_agent(scripted, small_db):
    scripted.responder = lambda req: "I would rather not say."
    conv = run_conversation(_agent(), ANS, "taxonomy_free", None, _user(), "schema", str(small_db), max_steps=0)
    assert conv["end"] == "give_up" and conv["turns"][0]["system_status"] == "parse_failed"
    s = M.score_conversation(conv, ANS, str(small_db))
    assert s["solved"] is False and s["ex_status"] == "scored"


def test_a_classification_outage_leaves_the_predicted_dialogue_incomplete(scripted, small_db):
    scripted.responder = lambda req: '{"system_sql": "SELECT COUNT(*) FROM t", "system_feedback": null}'
    failed = ClassifyResult(None, "call_failed", "call-1", "HTTP 500")
    conv = run_conversation(_agent(), ANS, "predicted", failed, _user(), "schema", str(small_db), max_steps=0)
    assert conv["end"] == "system_failed" and not scripted.requests  # no dialogue without the category
    s = M.score_conversation(conv, ANS, str(small_db))
    assert s["recognition"] is None and s["classification"] is None and s["ex_status"] == "incomplete"
    # an answer that came but names no category is the agent's: still counted wrong
    unreadable = ClassifyResult(None, "parse_failed", "call-2", "prose")
    conv = run_conversation(_agent(), ANS, "predicted", unreadable, _user(), "schema", str(small_db), max_steps=0)
    assert conv["end"] == "sql" and M.score_conversation(conv, ANS, str(small_db))["recognition"] is False


# ----------------------------------------------------------------------------- item 2: undecided FB


def _fb_conv(i, feedback="No staff table exists.", mode="ground_truth"):
    return {
        "conversation_id": f"c{i}",
        "question_id": f"q{i}",
        "db_id": "d",
        "agent": "sys",
        "mode": mode,
        "end": "feedback" if feedback else "sql",
        "n_turns": 1,
        "predicted_subcategory": None,
        "predicted_sql": None if feedback else "SELECT 1",
        "predicted_feedback": feedback,
        "turns": [{"system_question": None, "system_sql": None, "system_feedback": feedback, "relevance": None}],
    }


def test_garbage_feedback_judges_leave_fb_undecided_named_and_exit_3(scripted, capsys):
    scripted.responder = Script(feedback=lambda m, t, r: "Honestly, it could go either way.")
    judges = Council("feedback_judges", [scripted_member(f"j{i}", max_retries=0) for i in range(3)], call_log())
    judge = M.council_feedback_judge(judges, "schema")
    # 6 unanswerable questions the agent explained (judged: undecided), 1 it answered with SQL (False)
    scores = [M.score_conversation(_fb_conv(i), {**UNANS, "question_id": f"q{i}"}, "/x", judge) for i in range(6)]
    scores.append(M.score_conversation(_fb_conv(9, feedback=None), UNANS, "/x", judge))
    rows = M.metric_rows(scores)
    fb = next(
        r for r in rows if (r["table"], r["agent"], r["mode"], r["metric"]) == ("table4", "sys", "ground_truth", "fb")
    )
    # the rate over the one item decided by rule would read FB 0.0 %; it is undecided instead
    assert (fb["numerator"], fb["denominator"], fb["undecided"]) == (0, 1, 6) and M.undecided_rate(fb)
    text = M.report_text(rows, "quandary interact --db d --modes ground_truth")
    t4 = text.split("Table 4")[1].splitlines()
    assert "[provisional]" in t4[0] and "(– +6?)" in t4[2]  # FB (GT): was "0.0"
    assert "FB judges without a usable vote" in text and "j0 (6 of 6 votes)" in text
    assert "Table 5" in text and "– +6?" in text.split("Table 5")[1].splitlines()[2]
    assert _undecided_exit(rows) == UNDECIDED_EXIT
    err = capsys.readouterr().err
    assert "FB of sys (Ground truth) could not be decided: 6 undecided against 1 decided" in err and "j1" in err


def test_a_few_undecided_items_sit_beside_the_rate_and_mark_the_tables_provisional():
    decided = [
        {**M.score_conversation(_fb_conv(i, feedback=None), UNANS, "/x"), "mode": "ground_truth"} for i in range(3)
    ]
    undecided = {**decided[0], "conversation_id": "u", "explained": None, "fb_status": "undecided"}
    rows = M.metric_rows([*decided, undecided])
    t4 = M.table4_lines(rows)
    assert "0.0 +1?" in t4[1] and M.is_provisional(rows) and _undecided_exit(rows) == 0
    assert not M.is_provisional(M.metric_rows(decided)) and "+" not in M.table4_lines(M.metric_rows(decided))[1]


# ----------------------------------------------------------------------------- item 4: load


GOLD = "SELECT id, v FROM t"


def test_a_prediction_identical_to_a_large_gold_is_compared_inside_the_database(big_db, monkeypatch):
    """The prediction's own rows would be read past its budget (load); the database says they are
    the gold's rows without sending one out."""
    real, seen = M.execute_sql, []

    def loaded(db, sql, **kw):
        seen.append(sql)
        if sql == GOLD or "quandary_n" in sql:
            return real(db, sql, **kw)
        return QueryFailure(FailureKind.TIMEOUT, "interrupted: deadline exceeded (scripted load)")

    monkeypatch.setattr(M, "execute_sql", loaded)
    verdict, reason = M.execution_match(str(big_db), GOLD, "SELECT id, v FROM t ORDER BY v", timeout_s=3.0)
    assert verdict is True and "inside the database" in reason
    assert not [s for s in seen if s not in (GOLD,) and "quandary_n" not in s]  # the prediction alone never ran


PRED = "SELECT v FROM t ORDER BY id"


def test_a_prediction_cut_by_the_deadline_is_retried_once(small_db, monkeypatch):
    real, calls = M.execute_sql, []

    def once(db, sql, **kw):
        calls.append((sql, kw["timeout_s"]))
        if sql == PRED and sum(1 for s, _ in calls if s == sql) == 1:
            return QueryFailure(FailureKind.TIMEOUT, "interrupted: deadline exceeded")
        return real(db, sql, **kw)

    monkeypatch.setattr(M, "execute_sql", once)
    assert M.execution_match(str(small_db), "SELECT v FROM t", PRED, timeout_s=1.0)[0] is True
    pred = [t for s, t in calls if s == PRED]
    assert len(pred) == 2 and pred[1] == M.RETRY_BUDGET_FACTOR * pred[0]

    calls.clear()
    monkeypatch.setattr(M, "execute_sql", lambda db, sql, **kw: QueryFailure(FailureKind.TIMEOUT, "deadline"))
    golds = M.GoldResults(str(small_db))
    golds._results["SELECT v FROM t"] = real(str(small_db), "SELECT v FROM t")
    verdict, reason = M.execution_match(str(small_db), "SELECT v FROM t", "SELECT 1", timeout_s=1.0, golds=golds)
    assert verdict is None and "twice" in reason


def test_a_slow_gold_gives_the_prediction_at_least_its_own_time(tmp_path):
    """A correct prediction of a slow gold: with the executor's budget far below the gold's time it
    used to be undecided in every mode; it now gets twice the gold's time (measured, not assumed)."""
    path = tmp_path / "slow.sqlite"
    sqlite3.connect(path).close()
    slow = (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000000) "
        "SELECT COUNT(*), SUM(i % 7) FROM n"
    )
    golds = M.GoldResults(str(path))
    assert golds.summary(slow).ok
    took = golds.elapsed_s(slow)
    budget = took / 10  # far below the gold's own time, whatever the machine's load
    verdict, reason = M.execution_match(str(path), slow, slow, timeout_s=budget, golds=golds)
    assert verdict is True, reason
    # the gold's time is stored with its digest, so a later run gives the same budget
    again = M.GoldResults(str(path), stored=golds.rows())
    assert again.elapsed_s(slow) == pytest.approx(took)


@pytest.mark.parametrize(
    "pred",
    [
        "SELECT id, v FROM t WHERE id < 3) SELECT 0 --",  # closes the CTE, answers "no difference"
        "SELECT 1, 2), gc AS (SELECT 1), pc AS (SELECT 1) SELECT 0 UNION ALL SELECT 0 FROM (SELECT 1",
    ],
)
def test_a_prediction_cannot_escape_the_in_database_comparison(big_db, pred):
    assert not same_rows_in_database(str(big_db), GOLD, pred, 2, 10.0)
    assert same_rows_in_database(str(big_db), GOLD, "SELECT id, v FROM t -- every row", 2, 10.0)
    assert M.execution_match(str(big_db), GOLD, pred, timeout_s=10.0)[0] is not True
