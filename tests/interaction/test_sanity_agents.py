"""Issue 22 sanity check, kept true as a test: through `quandary interact` (a real Dagster run per
database, a scripted council), a perfect custom agent scores Rec = Cls = EX = FB = 100% in every
mode and a naive one scores 0 on the ambiguous and unanswerable questions — on two small fixture
databases balanced together as one dataset."""

import json
import re
import shutil
from collections import Counter

import polars as pl
import pytest

from cli import main
from pipelines.interaction.prompts import PROMPT_OPENINGS as OPEN
from resources.catalog import Catalog
from storage.audit import open_audit
from storage.audit import query_frame as _frame
from tests.interaction import sanity_agents
from tests.interaction.helpers import use_council_file
from tests.llm_fakes import ScriptedLLM, install

pytestmark = pytest.mark.integration

PERFECT, NAIVE = "tests.interaction.sanity_agents:Perfect", "tests.interaction.sanity_agents:Naive"
CATEGORY = {
    "answerable": ("Answerable", "Without Evidence", True, True),
    "lexical_overlap": ("Semantic Mapping Ambiguity", "Lexical Overlap", False, True),
    "missing_entity": ("Missing Schema Elements", "Missing Entities or Attributes", False, False),
}


def gold(db):
    q = "List the emails of the students."
    return [
        {
            "db_id": db,
            "question": "How many departments are there?",
            "subcategory": "answerable",
            "sql": "SELECT COUNT(*) FROM departments",
            "hidden_knowledge": None,
        },
        {
            "db_id": db,
            "question": q,
            "subcategory": "lexical_overlap",
            "sql": "SELECT personal_email FROM students",
            "hidden_knowledge": "emails means the personal email address",
        },
        {
            "db_id": db,
            "question": q,
            "subcategory": "lexical_overlap",
            "sql": "SELECT institutional_email FROM students",
            "hidden_knowledge": "emails means the institutional email address",
        },
        {
            "db_id": db,
            "question": "What is each professor's salary?",
            "subcategory": "missing_entity",
            "sql": None,
            "hidden_knowledge": "There is no salary information for professors.",
        },
    ]


def reference_record(g):
    name, subname, answerable, solvable = CATEGORY[g["subcategory"]]
    rec = {
        "db_id": g["db_id"],
        "question": g["question"],
        "evidence": None,
        "sql": g["sql"],
        "category": {"name": name, "subname": subname, "answerable": answerable, "solvable": solvable},
        "question_style": "formal",
        "question_difficulty": "simple",
    }
    if not answerable:
        rec.update(hidden_knowledge=g["hidden_knowledge"], is_solvable=solvable)
    return rec


def council_reply(req):
    text = req.messages[-1]["content"]
    if text.startswith(OPEN["user_classify"]):
        label = "Relevant" if "Hidden Knowledge" in text else "Technical"
        return json.dumps({"reasoning": "", "relevancy": label, "node_ids": []})
    if text.startswith(OPEN["user_answer"]):
        hk = re.search(r"\*\*What You Actually Mean:\*\* (.*)\n", text)
        return json.dumps({"answer": f"I mean: {hk.group(1)}" if hk else "No preference."})
    if text.startswith(OPEN["tournament"]):
        return json.dumps({"analysis": "", "answer": "A"})
    if text.startswith(OPEN["feedback"]):
        expected = text.split("## Expected Feedback\n", 1)[1].split("\n\n", 1)[0]
        given = text.split("## System's Feedback\n", 1)[1].split("\n\n", 1)[0]
        return json.dumps({"analysis": "", "matches": "Yes" if expected == given else "No"})
    return "?"


@pytest.fixture
def scripted_council(tmp_path, monkeypatch):
    from resources.llm import reset_councils

    users = ["u1", "u2", "u3"]
    use_council_file(tmp_path, monkeypatch, {"default": ["u1"], "user_simulator": users, "feedback_judges": users})
    handler = ScriptedLLM(council_reply)
    install(handler)
    yield handler
    reset_councils()


def test_perfect_agent_scores_100_and_naive_0_on_the_hard_questions(
    scripted_council, demo_db_path, tmp_path, capsys, monkeypatch
):
    college = tmp_path / "college.sqlite"
    shutil.copy(demo_db_path, college)
    Catalog().register(demo_db_path, "university")
    Catalog().register(college, "college")
    monkeypatch.setattr(sanity_agents, "GOLD", gold("university") + gold("college"))
    path = tmp_path / "ref.json"
    path.write_text(json.dumps([reference_record(g) for g in sanity_agents.GOLD]))
    assert main(["import", str(path)]) == 0
    capsys.readouterr()

    code = main(["interact", "--db", "university", "college", "--agents", PERFECT, NAIVE, "--balanced"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "balanced over college, university" in out and "incomplete" not in out.split("Not counted")[0]

    con = open_audit()
    scores = _frame(con, "SELECT * FROM interaction_scores")
    subset = _frame(con, "SELECT * FROM interaction_subset")
    con.close()
    # one subset balanced over both databases: 2 per subcategory (4 readings → 2), not per database
    assert Counter(subset["subcategory"].to_list()) == {"answerable": 2, "lexical_overlap": 2, "missing_entity": 2}
    assert set(subset["db_id"]) == {"university", "college"}
    assert (scores["end"] != "user_failed").all()
    assert scores.filter(pl.col("ex_status") == "undecided").height == 0
    assert scores.filter(pl.col("fb_status") == "undecided").height == 0

    # lazy: after the setup above it (environment, monkeypatch or sys.path)
    from cli.interaction_runs import stored_metric_rows

    rows = stored_metric_rows()
    perfect = [r for r in rows if r["agent"] == "perfect" and r["denominator"]]
    rates = [r for r in perfect if r["metric"] in ("rec", "cls", "ex", "fb", "ans_ex", "amb_ex", "air")]
    modes = {r["mode"] for r in rates if r["metric"] == "ex"}
    assert modes == {"ground_truth", "predicted", "taxonomy_only", "taxonomy_free"}
    assert {r["metric"] for r in rates} >= {"rec", "cls", "ex", "fb", "ans_ex", "amb_ex", "air"}
    assert all(r["value"] == 1.0 for r in rates), [r for r in rates if r["value"] != 1.0]
    assert all(r["value"] == 1.0 for r in perfect if r["table"] == "figure2")

    naive = scores.filter(pl.col("agent") == "naive")
    hard = naive.filter(pl.col("group") != "answerable")
    assert hard.filter(pl.col("mode") == "predicted")["recognition"].sum() == 0
    amb = naive.filter(pl.col("group") == "ambiguous")
    unans = naive.filter(pl.col("group") == "unanswerable")
    assert amb.height and amb["solved"].sum() == 0 and amb["solved"].null_count() == 0
    assert unans.height and unans["explained"].sum() == 0 and unans["explained"].null_count() == 0
