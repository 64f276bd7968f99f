"""Stored episodes are a growing table (issue 20 items 1 and 2).

A full evaluation, then a ``--limit 1`` evaluation of another asker, must keep every earlier
episode and leave the report's earlier rows unchanged; the solver (and every model member) is part
of the condition: an ``--solver empty`` run adds its own rows and never replaces LLM verdicts, and
its SR, gain and gap print "–".
"""

import json
import re

import polars as pl
import pytest

from cli import main
from pipelines.ambitab.protocol.task import Task, select_tasks
from pipelines.ambitab.record import records_frame
from storage.artifacts import latest_path, read_latest, write_version
from tests.llm_fakes import ScriptedLLM, install

AVTS = 4  # the stored corpus: the first AVTs of Ambrosia (a "full" evaluation runs all of them)


class AskOnce:
    """A custom (evaluated) asker: one fixed question, then stop."""

    def decide(self, inp):
        return None if inp.history else "Which reading do you mean?"


@pytest.fixture
def corpus(corpus_build):
    records = corpus_build("ambrosia").records
    tasks = select_tasks([Task.from_record(r) for r in records], limit=1)
    avts = list(dict.fromkeys(r.avt_id for r in records))[:AVTS]
    keep = [r for r in records if r.avt_id in avts]
    write_version(records_frame(keep), "ambitab_records", "ambrosia")
    assert tasks
    return keep


@pytest.fixture
def scripted_solver(corpus, tmp_path, monkeypatch):
    """The LLM solver writes a reading's gold SQL when an answer in the summary is its intent."""
    gold = {a.frozen_intent: r.verifier.reference_sql[0] for r in corpus for a in r.ambiguities}
    cfg = tmp_path / "council.yaml"
    member = {
        "model": "scripted/m",
        "temperature": 0.0,
        "max_tokens": 256,
        "seed": 0,
        "max_in_flight": 8,
        "timeout_s": 120.0,  # scripted answers are instant; 5 s could be missed beside other load
        "max_retries": 0,
    }
    cfg.write_text(json.dumps({"members": {"m": member}, "councils": {"default": ["m"]}}))
    monkeypatch.setenv("QUANDARY_COUNCIL_CONFIG", str(cfg))
    from resources.llm import reset_councils  # lazy: after the setup above it (environment, monkeypatch or sys.path)

    reset_councils()

    def respond(req):
        text = "\n".join(m["content"] for m in req.messages)
        answers = re.findall(r"^A\d+: (.*)$", text, re.M)
        sql = next((gold[a] for a in answers if a in gold), "SELECT 1")
        return json.dumps({"reasoning": "", "type": "final_sql", "output": sql})

    install(ScriptedLLM(respond))
    yield
    reset_councils()


def _eval(*extra) -> list[str]:
    return ["ambitab", "eval", "--corpus", "ambrosia", "--oracle", "det", "--seeds", "2", "--no-diagnostics", *extra]


def _report(capsys) -> list[dict]:
    capsys.readouterr()
    assert main(["report", "ambitab", "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def _key(row):
    return (row["solver"], row["oracle"], row["asker"], row["prompt"])


CUSTOM = f"{__name__}:AskOnce"


def test_a_limited_run_of_another_asker_keeps_every_earlier_episode(corpus, scripted_solver, capsys):
    assert main(_eval("--asker", f"none,full,{CUSTOM}")) == 0, capsys.readouterr().err
    before = read_latest("ambitab_episodes", "ambrosia")
    assert before.height == 3 * 2 * len(corpus)
    report_before = {_key(r): r for r in _report(capsys)}

    assert main(_eval("--asker", "generic", "--seeds", "1", "--limit", "1")) == 0, capsys.readouterr().err
    after = read_latest("ambitab_episodes", "ambrosia")
    kept = after.join(before.select("episode_id"), on="episode_id", how="semi")
    assert kept.sort("episode_id").equals(before.sort("episode_id").select(kept.columns))
    assert after.height > before.height and set(after["asker"]) == {"none", "full", f"custom:{CUSTOM}", "generic"}

    report_after = {_key(r): r for r in _report(capsys)}
    for key, row in report_before.items():
        assert report_after[key] == row, key
    row = report_before[("llm:m", "det_intent", f"custom:{CUSTOM}", "")]
    assert row["records"] == len(corpus) and row["episodes"] == 2 * len(corpus)


def test_the_empty_solver_is_its_own_condition_and_prints_dashes(corpus, scripted_solver, capsys):
    assert main(_eval("--asker", f"none,full,{CUSTOM}")) == 0, capsys.readouterr().err
    llm = read_latest("ambitab_episodes", "ambrosia")
    assert main(_eval("--asker", f"none,full,{CUSTOM}", "--solver", "empty")) == 0, capsys.readouterr().err
    both = read_latest("ambitab_episodes", "ambrosia")
    assert both.height == 2 * llm.height
    assert (
        both.filter(pl.col("solver") == "llm:m").sort("episode_id").equals(llm.sort("episode_id").select(both.columns))
    )
    empty = both.filter(pl.col("solver") == "empty")
    assert empty["verdict"].null_count() == empty.height  # no SQL: cannot decide, never 0

    rows = {_key(r): r for r in _report(capsys)}
    e, m = rows[("empty", "det_intent", f"custom:{CUSTOM}", "")], rows[("llm:m", "det_intent", f"custom:{CUSTOM}", "")]
    assert e["asker_sr"] is None and e["gain"] is None and e["gap"] is None and e["nodis"] is None
    assert m["full_sr"] == 100.0 and m["solver_model"] == "m=scripted/m"
    assert e["rec"] == m["rec"] and e["prec"] == m["prec"]  # asking metrics do not depend on the solver

    assert main(["report", "ambitab"]) == 0
    md = capsys.readouterr().out
    line = next(x for x in md.splitlines() if "| empty |" in x and "custom:" in x)
    cells = [c.strip() for c in line.strip("|").split("|")]
    head = next(x for x in md.splitlines() if x.startswith("| corpus |"))
    names = [c.strip() for c in head.strip("|").split("|")]
    for col in ("NoDis", "Asker", "Full", "gain", "gap"):
        assert cells[names.index(col)] == "–", col
    assert "aggregates" in md and "solver" in names


@pytest.mark.parametrize(
    "flag,value,valid",
    [
        ("--oracle", "nonsense", "det_intent"),
        ("--asker", "smart", "full_adv"),
        ("--prompt", "chatty", "checklist_ledger"),
        ("--asker", "no.such.module:Asker", "dotted path"),
    ],
)
def test_unknown_names_are_refused_before_a_run_exists(corpus, capsys, flag, value, valid):
    code = main(["ambitab", "eval", "--corpus", "ambrosia", "--asker", "none", "--solver", "empty", flag, value])
    cap = capsys.readouterr()
    assert code == 2
    assert value in cap.err and valid in cap.err and "Traceback" not in cap.err
    assert "Dagster instance" not in cap.out and "evaluating" not in cap.out  # no run was started
    assert latest_path("ambitab_episodes", "ambrosia") is None


def test_deterministic_is_the_long_form_of_det(corpus, capsys):
    assert (
        main(
            [
                "ambitab",
                "eval",
                "--corpus",
                "ambrosia",
                "--asker",
                "full",
                "--oracle",
                "deterministic",
                "--solver",
                "empty",
                "--seeds",
                "1",
                "--limit",
                "1",
            ]
        )
        == 0
    ), capsys.readouterr().err
    assert set(read_latest("ambitab_episodes", "ambrosia")["oracle"]) == {"det_intent"}
