"""Dialogue loop (final-turn restriction, give-ups, modes), metric denominators and AIR on
hand-built conversations, balancing counts, fragments on real gold SQL."""

import json
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.abiss.taxonomy import SUBCATEGORIES
from pipelines.interaction.agents import AgentHandle, load_agent, normalise
from pipelines.interaction.balance import balance
from pipelines.interaction.dialogue import run_benchmark
from pipelines.interaction.fragments import extract_fragments
from pipelines.interaction.metrics import metric_rows, rate, score_conversation
from pipelines.interaction.user import SimulatedUser
from resources.llm import Council, call_log
from tests.interaction.helpers import Script, question_row
from tests.llm_fakes import scripted_member

# ------------------------------------------------------------------ system response normalisation


@pytest.mark.parametrize(
    "fields, final, status, kind",
    [
        ({"system_question": "Which?", "system_sql": "SELECT 1"}, False, "multiple", "question"),
        ({"system_question": "  ", "system_sql": "SELECT 1"}, False, "ok", "sql"),  # blanks are not answers
        ({"system_question": "", "system_sql": "", "system_feedback": ""}, False, "empty", None),
        ({"system_sql": "SELECT 1", "system_feedback": "x"}, True, "multiple", "sql"),
        ({"question": "Which?"}, True, "question_on_final_turn", None),
        ({"feedback": "missing"}, False, "ok", "feedback"),
    ],
)
def test_normalise(fields, final, status, kind):
    r = normalise(fields, final)
    assert (r.status, r.kind) == (status, kind)


class AskingAgent:
    """A custom agent that always asks (and tries to ask on the final turn too)."""

    name = "asker"

    def classify(self, q):
        return None  # no classification phase

    def respond(self, turn):
        return {"question": f"clarify {turn.step}?"}


def test_custom_agent_by_dotted_path_and_errors():
    h = load_agent("tests.interaction.test_dialogue_metrics:AskingAgent", None)
    assert h.kind == "custom" and h.name == "asker"
    with pytest.raises(ValueError, match="cannot import"):
        load_agent("tests.nope:Agent", None)
    with pytest.raises(ValueError, match="neither"):
        load_agent("plainname", None)


def user_council():
    return Council("user_simulator", [scripted_member("u0")], call_log())


def test_final_turn_restriction_and_predicted_mode_skipped_without_classification(scripted, demo_db_path):
    scripted.responder = Script(
        user_classify=lambda m, t, r: {"relevancy": "Irrelevant", "node_ids": []},
        user_answer=lambda m, t, r: {"answer": "no idea"},
    )
    rows = [question_row("lexical_overlap", "List the emails.", sql="SELECT 1", hidden_knowledge="personal")]
    agent = AgentHandle(AskingAgent(), "asker", "custom", "x")
    convs, skipped = run_benchmark(
        [agent],
        rows,
        ["predicted", "taxonomy_free"],
        SimulatedUser(user_council()),
        "schema",
        str(demo_db_path),
        max_steps=3,
        workers=2,
    )
    assert [s["mode"] for s in skipped] == ["predicted"]
    (c,) = convs
    assert c["n_turns"] == 4 and c["end"] == "give_up"  # 3 clarifications + a final turn that may not ask
    assert c["turns"][-1]["system_status"] == "question_on_final_turn"
    assert [t["relevance"] for t in c["turns"]] == ["Irrelevant"] * 3 + [None]


def test_council_agent_dialogue_sql_after_clarification(scripted, demo_db_path):
    def respond(member, text, req):
        if "Turn:** 1 of" in text:
            return {"system_question": "Personal or institutional?", "system_sql": None, "system_feedback": None}
        return {"system_question": None, "system_sql": "SELECT 1", "system_feedback": None}

    scripted.responder = Script(
        classify=lambda m, t, r: {"category": "lexical_overlap"},
        respond=respond,
        user_classify=lambda m, t, r: {"relevancy": "Relevant", "node_ids": []},
        user_answer=lambda m, t, r: {"answer": "institutional"},
    )
    system = Council("system_agents", [scripted_member("sys")], call_log())
    rows = [question_row("lexical_overlap", "List the emails.", sql="SELECT 1", hidden_knowledge="institutional")]
    convs, skipped = run_benchmark(
        [load_agent("sys", system)],
        rows,
        ["ground_truth", "predicted", "taxonomy_only", "taxonomy_free"],
        SimulatedUser(user_council()),
        "schema",
        str(demo_db_path),
    )
    assert not skipped and len(convs) == 4
    assert all(c["end"] == "sql" and c["n_turns"] == 2 for c in convs)
    # history reaches the second turn; the diagnosed category only in GT / predicted modes
    second = [r.messages[-1]["content"] for r in scripted.requests if "Turn:** 2 of" in r.messages[-1]["content"]]
    # GT and predicted (same category) send the same prompt: one request, the other a cache hit
    assert len(second) == 3 and all("User: institutional" in p for p in second)
    assert sum("## Diagnosed Category" in p for p in second) == 1
    assert sum("## Taxonomy Reference" in p for p in second) == 1
    scores = [score_conversation(c, rows[0], str(demo_db_path)) for c in convs]
    assert all(s["solved"] is True and s["air_cases"] == 1 and s["air_terminal"] == 1 for s in scores)
    pred = next(s for s in scores if s["mode"] == "predicted")
    assert pred["recognition"] and pred["classification"]


# ------------------------------------------------------------------ metrics on hand-built conversations


def turn(q=None, sql=None, fb=None, rel=None):
    return {"system_question": q, "system_sql": sql, "system_feedback": fb, "relevance": rel}


def conv(mode, turns, sub, agent="a", pred=None):
    last = turns[-1]
    end = "sql" if last["system_sql"] else "feedback" if last["system_feedback"] else "give_up"
    return {
        "conversation_id": f"{agent}-{mode}-{sub}-{len(turns)}-{id(turns)}",
        "question_id": sub,
        "db_id": "d",
        "agent": agent,
        "mode": mode,
        "end": end,
        "n_turns": len(turns),
        "predicted_subcategory": pred,
        "predicted_sql": last["system_sql"],
        "predicted_feedback": last["system_feedback"],
        "turns": turns,
    }


def test_ex_fb_denominators_and_air(demo_db_path):
    gold = "SELECT COUNT(*) FROM students"
    qs = {
        "answerable": question_row("answerable", "n?", sql=gold, qid="answerable"),
        "lexical_overlap": question_row("lexical_overlap", "e?", sql=gold, hidden_knowledge="h", qid="lexical_overlap"),
        "missing_entity": question_row("missing_entity", "s?", feedback="no staff", qid="missing_entity"),
    }

    def judge(q, fb):
        vote = {"member": "j", "vote": "Yes" if fb == "good" else "No", "parsed_ok": True, "llm_call_id": "c"}
        return fb == "good", [vote]

    convs = [
        conv("ground_truth", [turn(sql=gold)], "answerable"),  # EX True
        conv("ground_truth", [turn(fb="cannot")], "answerable"),  # EX False, FB False
        conv("ground_truth", [turn(q="?", rel="Relevant"), turn(sql=gold)], "lexical_overlap"),  # EX True, AIR 1/1
        conv("ground_truth", [turn(q="?", rel="Relevant"), turn(q="?", rel="Technical"), turn()], "lexical_overlap"),
        conv("ground_truth", [turn(fb="good")], "missing_entity"),  # FB True
        conv("ground_truth", [turn(sql=gold)], "missing_entity"),  # EX False, FB False
        conv("ground_truth", [turn(q="?", rel="Irrelevant"), turn()], "missing_entity"),  # FB False (no feedback)
    ]
    scores = [score_conversation(c, qs[c["question_id"]], str(demo_db_path), judge) for c in convs]
    # EX over answerable + ambiguous (4) + unanswerable with SQL (1) = 5; 2 solved
    assert rate(s["solved"] for s in scores) == (2 / 5, 2, 5)
    # FB over unanswerable (3) + solvable with feedback (1) = 4; 1 explained
    assert rate(s["explained"] for s in scores) == (1 / 4, 1, 4)
    rows = metric_rows(scores)
    get = {(r["table"], r["mode"], r["metric"], r["agent"]): r for r in rows}
    air = get[("table6", "ground_truth", "air", "a")]
    assert (air["numerator"], air["denominator"]) == (1, 2)  # the second Relevant turn is followed by a question
    assert get[("table6", "ground_truth", "avg_turns", "a")]["value"] == 2.5  # ambiguous only: (2 + 3) / 2
    assert get[("table6", "ground_truth", "clar_pct", "a")]["value"] == 1.0
    rel = get[("table6", "ground_truth", "relevant_pct", "a")]
    assert (rel["numerator"], rel["denominator"]) == (2, 3)  # pooled over labelled user turns
    assert get[("table5", "ground_truth", "ans_ex", "a")]["value"] == 0.5
    fig = [r for r in rows if r["table"] == "figure2" and r["subcategory"] == "missing_entity"]
    assert fig[0]["metric"] == "fb" and (fig[0]["numerator"], fig[0]["denominator"]) == (1, 3)


def test_rec_and_cls_count_failed_classifications_as_wrong(demo_db_path):
    q = question_row("scope_ambiguity", "x?", sql="SELECT 1", hidden_knowledge="h", qid="scope_ambiguity")
    cs = [
        conv("predicted", [turn(sql="SELECT 1")], "scope_ambiguity", pred=p)
        for p in ("scope_ambiguity", "lexical_vagueness", "answerable", None)
    ]
    scores = [score_conversation(c, q, str(demo_db_path)) for c in cs]
    assert [s["recognition"] for s in scores] == [True, True, False, False]
    assert [s["classification"] for s in scores] == [True, False, False, False]
    gt = score_conversation(conv("ground_truth", [turn(sql="SELECT 1")], "scope_ambiguity"), q, str(demo_db_path))
    assert gt["recognition"] is None and gt["classification"] is None


# ------------------------------------------------------------------ balancing


def test_balance_per_subcategory_and_group_is_reproducible():
    rows = []
    for i, s in enumerate(SUBCATEGORIES):
        for j in range(5 + i):
            rows.append({"question_id": f"{s.id}-{j:02d}", "subcategory": s.id, "group": s.group.value})
    out = balance(rows, "subcategory", seed=42)
    assert Counter(r["subcategory"] for r in out) == {s.id: 5 for s in SUBCATEGORIES}
    assert [r["question_id"] for r in balance(list(reversed(rows)), "subcategory", 42)] == [
        r["question_id"] for r in out
    ]
    assert [r["question_id"] for r in balance(rows, "subcategory", 7)] != [r["question_id"] for r in out]
    by_group = Counter(r["group"] for r in balance(rows, "group", 42))
    assert set(by_group.values()) == {min(Counter(r["group"] for r in rows).values())}


# ------------------------------------------------------------------ fragments on real gold SQL


def test_fragment_order_and_types():
    frags = extract_fragments(
        "SELECT DISTINCT T1.name, COUNT(*) AS n FROM students AS T1 INNER JOIN enrolls AS T2 ON T1.id = T2.sid "
        "WHERE T1.age > 20 AND T1.dept = T2.dept AND (T1.x = 1 OR T1.y = 2) GROUP BY T1.name HAVING COUNT(*) > 1 "
        "ORDER BY n DESC LIMIT 3"
    )
    assert [f.clause for f in frags] == [
        "DISTINCT",
        "SELECT",
        "SELECT",
        "FROM",
        "JOIN",
        "WHERE",
        "WHERE",
        "GROUP_BY",
        "HAVING",
        "ORDER_BY",
        "LIMIT",
    ]
    assert [f.id for f in frags] == list(range(1, 12))
    assert frags[2].sql == "COUNT(*) AS n" and frags[-1].sql == "3" and frags[-2].sql == "n DESC"
    assert "T1.dept = T2.dept" not in [f.sql for f in frags]  # implicit join dropped
    assert extract_fragments("not sql at all (((") == [] and extract_fragments(None) == []


def test_fragments_on_real_spider_and_bird_gold_sql(shared_data):
    spider = json.loads((shared_data / "spider" / "dev.json").read_text())[:150]
    bird = json.loads((shared_data / "bird" / "dev" / "dev.jar.json").read_text())[:150]
    order = ["DISTINCT", "SELECT", "FROM", "JOIN", "WHERE", "GROUP_BY", "HAVING", "ORDER_BY", "LIMIT"]
    n_where = 0
    for sql in [r["query"] for r in spider] + [r["sql"] for r in bird]:
        frags = extract_fragments(sql)
        assert frags, sql
        assert [order.index(f.clause) for f in frags] == sorted(order.index(f.clause) for f in frags)
        assert sum(f.clause == "FROM" for f in frags) >= 1
        n_where += any(f.clause == "WHERE" for f in frags)
    assert n_where > 100


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(
        st.text(max_size=80),
        st.builds(lambda a, b: f"SELECT {a} FROM t WHERE {b}", st.text(max_size=20), st.text(max_size=20)),
    )
)
def test_fragment_extractor_never_raises_and_numbers_consecutively(sql):
    frags = extract_fragments(sql)
    assert [f.id for f in frags] == list(range(1, len(frags) + 1))
