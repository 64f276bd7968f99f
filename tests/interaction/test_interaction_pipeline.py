"""The interaction job on a real Dagster instance with a scripted council, on questions imported
exactly as the ABISS reference code writes them, against BIRD superhero (../shared/data)."""

import json

import polars as pl
import pytest
from dagster import instance_for_test

from cli import main
from cli.runs import run_job_for_partition
from pipelines.abiss.outputs import AbissFormatError, from_abiss_records, to_abiss_records
from pipelines.interaction.prompts import PROMPT_OPENINGS as OPEN
from resources.catalog import Catalog
from storage.audit import open_audit
from storage.audit import query_frame as _frame
from tests.llm_fakes import ScriptedLLM, install

pytestmark = pytest.mark.integration

# The spec's real v16 example, verbatim in the reference layout.
SPEC_EXAMPLE = {
    "db_id": "california_schools",
    "question": "List the schools in my county where the enrollment is greater than 200 students.",
    "evidence": None,
    "sql": 'SELECT "School Name" AS school_name FROM schools WHERE "County Name" = \'Alameda\';',
    "category": {"name": "Missing User Knowledge", "subname": None, "answerable": False, "solvable": True},
    "question_style": "formal",
    "question_difficulty": "simple",
    "hidden_knowledge": "The user is from the Alameda county.",
    "is_solvable": True,
}

TALL = "SELECT superhero_name FROM superhero WHERE height_cm > 200"
TALLER = "SELECT superhero_name FROM superhero WHERE height_cm > 180"


def ref(name, subname, q, sql=None, hk=None, ev=None, answerable=False, solvable=True, difficulty="simple"):
    rec = {
        "db_id": "superhero",
        "question": q,
        "evidence": ev,
        "sql": sql,
        "category": {"name": name, "subname": subname, "answerable": answerable, "solvable": solvable},
        "question_style": "formal",
        "question_difficulty": difficulty,
    }
    if not answerable:
        rec.update(hidden_knowledge=hk, is_solvable=solvable)
    return rec


# One record per subcategory, in the reference vocabulary (answerable ones omit hidden_knowledge).
REFERENCE_RECORDS = [
    ref(
        "Answerable",
        "Without Evidence",
        "How many superheroes are there?",
        "SELECT COUNT(*) FROM superhero",
        answerable=True,
    ),
    ref(
        "Answerable",
        "With Evidence",
        "How many heavy superheroes are there?",
        "SELECT COUNT(*) FROM superhero WHERE weight_kg > 100",
        ev="heavy means weight_kg > 100",
        answerable=True,
        difficulty="highly_complex",
    ),
    ref(
        "Structure Ambiguity",
        "Scope Ambiguity",
        "Which publisher does each hero have?",
        "SELECT s.superhero_name, p.publisher_name FROM superhero s JOIN publisher p ON s.publisher_id = p.id",
        hk="for every hero",
    ),
    ref(
        "Structure Ambiguity",
        "Attachment Ambiguity",
        "List heroes and publishers from Marvel.",
        "SELECT publisher_name FROM publisher WHERE publisher_name = 'Marvel Comics'",
        hk="only publishers",
    ),
    ref(
        "Semantic Mapping Ambiguity",
        "Lexical Overlap",
        "List the names of heroes.",
        "SELECT full_name FROM superhero",
        hk="name means full name",
    ),
    ref(
        "Semantic Mapping Ambiguity",
        "Entity Ambiguity",
        "Show the colour of heroes.",
        "SELECT c.colour FROM superhero s JOIN colour c ON s.eye_colour_id = c.id",
        hk="eye colour",
    ),
    ref("Lexical Vagueness", None, "List the tall superheroes.", TALL, hk="tall means over 200 cm"),
    ref("Lexical Vagueness", None, "List the tall superheroes.", TALLER, hk="tall means over 180 cm"),
    ref(
        "Missing User Knowledge",
        None,
        "List heroes of my publisher.",
        "SELECT s.superhero_name FROM superhero s JOIN publisher p ON s.publisher_id = p.id "
        "WHERE p.publisher_name = 'DC Comics'",
        hk="The user works for DC Comics.",
    ),
    ref(
        "Conflicting Knowledge",
        None,
        "How many heavy heroes?",
        "SELECT COUNT(*) FROM superhero WHERE weight_kg > 100",
        ev="Evidence 1: heavy means > 100 kg\nEvidence 2: heavy means > 150 kg",
        hk="Evidence 1 applies",
    ),
    ref(
        "Missing Schema Elements",
        "Missing Entities or Attributes",
        "What is each hero's salary?",
        hk="There is no salary column.",
        solvable=False,
    ),
    ref(
        "Missing Schema Elements",
        "Missing Relationships",
        "Which hero is the sidekick of Batman?",
        hk="No sidekick relationship exists.",
        solvable=False,
    ),
    ref(
        "Missing External Knowledge",
        None,
        "Which heroes appear in the top box-office films?",
        hk="Box-office data is external.",
        solvable=False,
    ),
    ref("Improper Question", None, "Tell me a joke.", hk="Not a database question.", solvable=False),
]


def system_agent(text: str) -> dict:
    question = text.split("**Question:** ", 1)[1].split("\n", 1)[0]
    if "tall" not in question:  # the taxonomy text holds examples too: decide on the question line only
        text = question
    none = {"system_question": None, "system_sql": None, "system_feedback": None}
    if "tall superheroes" in text and "Turn:** 1 of" in text:
        return {**none, "system_question": "What height counts as tall?"}
    if "tall superheroes" in text:
        return {**none, "system_sql": TALL if "over 200" in text else TALLER}
    if any(w in text for w in ("salary", "sidekick", "box-office", "joke")):
        return {**none, "system_feedback": "The database has no such information."}
    if "heavy" in text:
        return {**none, "system_sql": "SELECT COUNT(*) FROM superhero WHERE weight_kg > 100"}
    return {**none, "system_sql": "SELECT COUNT(*) FROM superhero"}


def responder(req):
    text = req.messages[-1]["content"]
    if text.startswith(OPEN["classify"]):
        return json.dumps({"category": "lexical_vagueness" if "tall" in text else "answerable"})
    if text.startswith(OPEN["respond"]):
        return json.dumps(system_agent(text))
    if text.startswith(OPEN["user_classify"]):
        return json.dumps({"reasoning": "", "relevancy": "Relevant", "node_ids": []})
    if text.startswith(OPEN["user_answer"]):
        hk = "over 200" if "over 200 cm" in text else "over 180"
        return json.dumps({"answer": f"I mean {hk} centimetres ({req.model})"})
    if text.startswith(OPEN["tournament"]):
        return json.dumps({"analysis": "", "answer": "A"})
    if text.startswith(OPEN["feedback"]):
        return json.dumps({"analysis": "", "matches": "Yes"})
    return "?"


@pytest.fixture
def scripted_council(council_file):
    handler = ScriptedLLM(responder)
    install(handler)
    return handler


def test_reference_records_import_and_round_trip():
    df = from_abiss_records(REFERENCE_RECORDS + [SPEC_EXAMPLE])
    assert df["subcategory"].n_unique() == 13
    assert df.filter(pl.col("db_id") == "california_schools")["subcategory"].to_list() == ["missing_user_knowledge"]
    assert "highly complex" in df["difficulty"].to_list()
    out = to_abiss_records(df)
    for rec, back in zip(REFERENCE_RECORDS + [SPEC_EXAMPLE], out):
        assert back["category"] == rec["category"]
        assert back["question_difficulty"] == rec["question_difficulty"]
        assert ("hidden_knowledge" in back) == ("hidden_knowledge" in rec)
        assert back["sql"] == rec["sql"] and back["evidence"] == rec["evidence"]


@pytest.mark.parametrize(
    "bad, message",
    [
        ({**SPEC_EXAMPLE, "sql": "SELEC name FROM (("}, "record 1: 'sql' does not parse"),
        (
            {**SPEC_EXAMPLE, "category": {"name": "Structure Ambiguity", "subname": "Nope"}},
            "record 1: unknown category",
        ),
        (
            {k: v for k, v in SPEC_EXAMPLE.items() if k != "sql"},
            "record 1: Missing User Knowledge / Missing User Knowledge is solvable but has no 'sql'",
        ),
    ],
)
def test_malformed_records_are_refused_with_record_number(bad, message):
    with pytest.raises(AbissFormatError, match=message.replace("(", r"\(")):
        from_abiss_records([SPEC_EXAMPLE, bad])


def test_interaction_job_on_imported_superhero_questions(scripted_council, tmp_path, shared_data, capsys):
    db = shared_data / "bird" / "dev_databases" / "superhero" / "superhero.sqlite"
    Catalog().register(db, "superhero")
    path = tmp_path / "ref.json"
    path.write_text(json.dumps(REFERENCE_RECORDS))
    assert main(["import", str(path)]) == 0
    cfg = {"ops": {"interaction_conversations": {"config": {"max_steps": 3}}}}
    (tmp_path / "dh").mkdir()
    with instance_for_test(temp_dir=str(tmp_path / "dh")) as instance:
        result = run_job_for_partition("abiss_interaction_job", "superhero", instance=instance, run_config=cfg)
        assert result.success
        assert all(c.passed for c in result.get_asset_check_evaluations())
        checks = {c.check_name for c in result.get_asset_check_evaluations()}
        assert {"within_turn_limit", "votes_join_logged_calls", "every_conversation_ends"} <= checks
        calls = scripted_council.count
    # a rerun from the CLI (e.g. after an interruption) repeats no LLM call
    capsys.readouterr()
    assert main(["interact", "--db", "superhero"]) == 0
    out = capsys.readouterr().out
    assert "56 conversations" in out and "0 new LLM calls" in out and "Table 4" in out
    assert scripted_council.count == calls

    con = open_audit()
    turns = _frame(con, "SELECT * FROM interaction_conversations")
    scores = _frame(con, "SELECT * FROM interaction_scores")
    con.close()
    assert scores.height == 14 * 4 and set(scores["mode"]) == {
        "ground_truth",
        "predicted",
        "taxonomy_only",
        "taxonomy_free",
    }
    # the vague question: clarification → Relevant (3 voters) → SQL of the right reading
    tall = turns.filter(pl.col("system_question").is_not_null())
    assert tall.height == 8 and set(tall["relevance"]) == {"Relevant"}
    assert all(len(v) == 3 for v in tall["label_votes"].to_list())
    tall_scores = scores.filter(pl.col("subcategory") == "lexical_vagueness")
    assert tall_scores["solved"].all() and (tall_scores["air_terminal"] == 1).all()
    unans = scores.filter(pl.col("group") == "unanswerable")
    assert unans["explained"].all() and unans["solved"].null_count() == unans.height
    assert scores.filter(pl.col("subcategory") == "answerable")["solved"].all()

    capsys.readouterr()
    assert main(["report", "interaction"]) == 0
    report = capsys.readouterr().out
    assert "Table 4" in report and "sys" in report and "AIR" in report

    cid = tall["conversation_id"][0]
    assert main(["audit", "conversation", cid[:14], "--prompts"]) == 0
    trail = capsys.readouterr().out
    assert "user [Relevant]" in trail and "label vote u1" in trail and "prompt [user]:" in trail

    out = tmp_path / "results"
    assert main(["report", "interaction", "--export", str(out)]) == 0
    doc = json.loads((out / "sys.json").read_text())
    assert doc["user_name"] == "u1+u2+u3" and len(doc["conversations"]) == 56
    conv = next(c for c in doc["conversations"] if c["interactions"][0]["system_response"]["system_question"])
    assert conv["category_use"] in ("ground_truth", "predicted", "no_category", "taxonomy_free")
    assert conv["interactions"][-1]["user_response"] is None and conv["interactions"][0]["relevance"] == "Relevant"
    assert conv["question"]["category"] == {
        "name": "Lexical Vagueness",
        "subname": None,
        "answerable": False,
        "solvable": True,
    }


def test_interact_cli_refuses_bad_input(tmp_path, capsys, demo_db_path):
    assert main(["interact", "--db", "nowhere"]) == 2
    assert "not registered" in capsys.readouterr().err
    Catalog().register(demo_db_path, "university")
    assert main(["interact", "--db", "university"]) == 2
    assert "no dataset for 'university'" in capsys.readouterr().err
    assert main(["interact", "--db", "university", "--modes", "telepathic"]) == 2
    assert "unknown mode" in capsys.readouterr().err
    assert main(["report", "interaction"]) == 1
    assert main(["audit", "conversation", "abc"]) == 1
