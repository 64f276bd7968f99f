"""Issue 38 item 1: `quandary interact` end to end on a few hundred generated questions with a
scripted council, in the mix that crashed every run on the authors' 310 questions: the earlier
conversations withhold no value, the later ones do (gold-only WHERE literals in Technical turns).

The real path: `quandary import` of reference-layout records, the CLI, a Dagster instance, the
council layer with its call log, the safe executor on a real SQLite file; only the model is scripted.
"""

import json
import re

import polars as pl
import pytest

from cli import main
from pipelines.abiss.outputs import abiss_record_row
from pipelines.interaction.prompts import PROMPT_OPENINGS as OPEN
from resources.catalog import Catalog
from storage.audit import open_audit
from storage.audit import query_frame as _frame
from tests.llm_fakes import ScriptedLLM, http_error, install

pytestmark = pytest.mark.integration

N_PLAIN, N_LITERAL, N_UNANSWERABLE = 110, 110, 10
MIDPOINT = "q_8"


def _record(name, q, sql, hk, solvable=True) -> dict:
    return {
        "db_id": "university",
        "question": q,
        "evidence": None,
        "sql": sql,
        "category": {"name": name, "subname": None, "answerable": False, "solvable": solvable},
        "question_style": "formal",
        "question_difficulty": "simple",
        "hidden_knowledge": hk,
        "is_solvable": solvable,
    }


def _qid(rec) -> str:
    return abiss_record_row(rec, 0)["question_id"]


def records() -> tuple[list[dict], dict[str, str]]:
    """Reference-layout questions, and each question's gold SQL (what the scripted agent answers).

    A run takes its questions in question-id order: the plain ones are chosen among ids below a
    midpoint, the ones with literals above it, so more than a hundred conversations that withhold
    nothing come first (polars infers a frame from its first 100 rows)."""
    plain, literal, i = [], [], 0
    while len(plain) < N_PLAIN or len(literal) < N_LITERAL:
        i += 1
        a = _record(
            "Lexical Vagueness",
            f"List the students, batch {i}.",
            "SELECT first_name FROM students ORDER BY student_id",
            "in id order",
        )
        if len(plain) < N_PLAIN and _qid(a) < MIDPOINT:
            plain.append(a)
        b = _record(
            "Lexical Vagueness",
            f"List the students with many credits, group {i}.",
            f"SELECT first_name FROM students WHERE credits > {1000 + i}",
            f"many means over {1000 + i}",
        )
        if len(literal) < N_LITERAL and _qid(b) > MIDPOINT:
            literal.append(b)
    jokes = [
        _record("Improper Question", f"Tell me a joke number {j}.", None, "Not a database question.", solvable=False)
        for j in range(N_UNANSWERABLE)
    ]
    recs = plain + literal + jokes
    return recs, {r["question"]: r["sql"] for r in recs}


def responder(gold: dict[str, str]):
    def respond(req):
        text = req.messages[-1]["content"]
        if text.startswith(OPEN["respond"]):
            q = text.split("**Question:** ", 1)[1].split("\n", 1)[0]
            none = {"system_question": None, "system_sql": None, "system_feedback": None}
            if "joke" in q:
                return json.dumps({**none, "system_feedback": "This is not a question about the database."})
            if "Turn:** 1 of" in text and "final turn" not in text:
                return json.dumps({**none, "system_question": "Which rows exactly do you mean?"})
            return json.dumps({k: v for k, v in {**none, "system_sql": gold[q]}.items() if k != "system_question"})
        if text.startswith(OPEN["user_classify"]):
            # every member picks every fragment: a WHERE literal the question lacks must be withheld
            n = len(re.findall(r"^\[\d+\]", text, flags=re.M))
            return json.dumps({"reasoning": "", "relevancy": "Technical", "node_ids": list(range(1, n + 1))})
        if text.startswith(OPEN["user_answer"]):
            return json.dumps({"answer": "The first ones, please."})
        if text.startswith(OPEN["feedback"]):
            return json.dumps({"analysis": "", "matches": "Yes"})
        return "?"

    return respond


def test_interact_runs_hundreds_of_mixed_conversations_to_the_end(council_file, tmp_path, demo_db_path, capsys):
    recs, gold = records()
    install(ScriptedLLM(responder(gold)))
    Catalog().register(demo_db_path, "university")
    path = tmp_path / "questions.json"
    path.write_text(json.dumps(recs))
    assert main(["import", str(path)]) == 0
    capsys.readouterr()

    code = main(["interact", "--db", "university", "--modes", "taxonomy_free", "--max-steps", "1"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"{len(recs)} conversations" in out and "Table 4" in out and "PROVISIONAL" not in out

    con = open_audit()
    turns = _frame(con, "SELECT * FROM interaction_conversations")
    scores = _frame(con, "SELECT * FROM interaction_scores")
    con.close()
    assert scores.height == len(recs)
    # the mix that crashed: empty withheld lists first, non-empty ones later, in one frame
    asked = turns.filter(pl.col("relevance") == "Technical").sort("question_id")
    withheld = asked["withheld_node_ids"].list.len()
    assert (withheld[:N_PLAIN] == 0).all() and (withheld > 0).sum() == N_LITERAL
    assert turns.schema["withheld_node_ids"] == pl.List(pl.Int64)
    # no withheld literal was handed over, and every answered question is scored exactly
    assert not any("1000" in f for frags in asked["fragments"].to_list() for f in frags)
    solvable = scores.filter(pl.col("group") == "ambiguous")
    assert solvable["solved"].all() and solvable.height == N_PLAIN + N_LITERAL
    assert scores.filter(pl.col("group") == "unanswerable")["explained"].all()


def test_interact_with_an_outage_and_garbage_judges_says_what_and_how(council_file, tmp_path, demo_db_path, capsys):
    """#38 items 2, 3, 5 on the CLI: the system's endpoint fails on some calls (HTTP 500, no retry
    left) and every FB judge answers garbage. The outage leaves conversations incomplete, FB is
    undecided (never 0 %), the judges are named, the exit code is 3, and `report interaction`
    prints the exact command that completes the run; that command completes the outage ones."""
    recs, gold = records()
    recs = recs[:4] + recs[-4:]  # 4 answerable in effect (the agent answers the gold) + 4 unanswerable
    base = responder(gold)
    down = {"on": True}

    def respond(req):
        text = req.messages[-1]["content"]
        if text.startswith(OPEN["feedback"]):
            return "It is hard to say whether that matches."
        if down["on"] and text.startswith(OPEN["respond"]) and ("batch" in text.split("**Question:** ")[1][:40]):
            return http_error(500, "upstream unavailable")
        return base(req)

    install(ScriptedLLM(respond))
    Catalog().register(demo_db_path, "university")
    path = tmp_path / "questions.json"
    path.write_text(json.dumps(recs))
    assert main(["import", str(path)]) == 0
    capsys.readouterr()
    argv = ["interact", "--db", "university", "--modes", "taxonomy_free", "--max-steps", "0"]
    assert main(argv) == 3
    captured = capsys.readouterr()
    assert "4 conversation(s) incomplete (4 because the system agent's endpoint gave no answer" in captured.out
    assert "FB of sys (Taxonomy-free) could not be decided: 4 undecided" in captured.err
    assert "FB judges without a usable vote" in captured.out

    assert main(["report", "interaction"]) == 3
    report = capsys.readouterr().out
    command = next(line for line in report.splitlines() if line.startswith("Complete them with:"))
    assert "quandary interact --db university --modes taxonomy_free --max-steps 0" in command
    leak_head = next((line for line in report.splitlines() if line.startswith("Leakage")), None)
    assert leak_head is None or leak_head.endswith("[provisional]")

    down["on"] = False  # the endpoint is back: the printed command completes the outage conversations
    assert main(argv) == 3  # FB is still undecided: the garbage judges' answers are what they said
    out = capsys.readouterr().out
    assert "incomplete" not in out.split("Table 4")[0]
    con = open_audit()
    scores = _frame(con, "SELECT * FROM interaction_scores")
    con.close()
    assert scores.height == 8 and (scores["end"] != "system_failed").all()
    assert scores.filter(pl.col("group") != "unanswerable")["solved"].all()
