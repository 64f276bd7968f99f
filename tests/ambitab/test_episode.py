"""Episodes: budget, fallback stops, |Amb| = 0, spec randomisation, verifier, provider failures."""

import asyncio
import json
import sqlite3

import pytest

from pipelines.ambitab.protocol.askers import AskerDecision, make_asker
from pipelines.ambitab.protocol.episode import RunSettings, arun_episode, run_episodes
from pipelines.ambitab.protocol.oracles import DeterministicIntentOracle
from pipelines.ambitab.protocol.solver import ScriptedSolver
from pipelines.ambitab.protocol.verifier import Verifier
from pipelines.ambitab.record import Spec
from tests.ambitab.records import amb, task


class AlwaysAsk:
    """A custom asker (loaded by dotted path): asks about 'age' forever."""

    def decide(self, inp):
        return {"type": "clarification", "output": "What age?"}


class Garbage:
    async def decide(self, inp):
        return {"type": "sql", "output": "SELECT 1"}


class SpecEcho:
    """Records the spec it was shown, then stops."""

    seen: list = []

    def decide(self, inp):
        SpecEcho.seen.append(inp.spec.user_query)
        return None


def run(t, asker, solver_sql="SELECT 1", **kw):
    return asyncio.run(
        arun_episode(
            t,
            make_asker(asker) if isinstance(asker, str) else asker,
            DeterministicIntentOracle(),
            ScriptedSolver(solver_sql),
            Verifier(),
            **kw,
        )
    )


TWO = [amb("age", "Age in years."), amb("salary", "Gross salary.")]


def test_generic_asker_spends_the_budget_of_m_plus_2_questions():
    row = run(task(TWO), "generic")
    assert row["n_questions"] == 4 and not row["fallback_stop"]
    turns = json.loads(row["turns_json"])
    assert [t["question"] for t in turns] == ["Could you clarify what you want?", "Please elaborate."] * 2
    assert row["recall"] == 0.0 and row["precision"] == 0.0


def test_question_on_the_final_decision_is_a_fallback_stop():
    row = run(task(TWO), f"{__name__}:AlwaysAsk")
    assert row["fallback_stop"] and row["fallback_reason"] == "question on the final decision"
    assert row["n_questions"] == 4  # m + 2 answered; the 5th decision was reserved for stopping
    assert row["recall"] is None and row["f1"] is None and row["precision"] == 0.25
    assert row["sql"] == "SELECT 1"  # the solver still runs


def test_unparseable_asker_output_is_a_fallback_stop():
    row = run(task(TWO), f"{__name__}.Garbage")
    assert row["fallback_stop"] and "unparseable" in row["fallback_reason"] and row["n_questions"] == 0


def test_full_asker_asks_each_distinct_term_once_in_annotation_order():
    t = task(
        [amb("salary", "Gross salary."), amb("age", "Age in years."), amb("order", "By date.", kind="non_critical")]
    )
    row = run(t, "full")
    assert [x["question"] for x in json.loads(row["turns_json"])] == [
        "Could you clarify what exactly you mean by salary?",
        "Could you clarify what exactly you mean by age?",
    ]
    assert row["recall"] == row["precision"] == 1.0 and row["n_amb"] == 2


def test_controls_skip_clarification_unless_the_flag_is_off():
    control = task([], query="Count the rows.")
    row = run(control, "generic")
    assert row["skipped_clarification"] and row["n_questions"] == 0 and row["recall"] is None
    row = run(control, "generic", settings=RunSettings(skip_clear=False))
    assert not row["skipped_clarification"] and row["n_questions"] == 2  # 0 + 3 decisions, the last a stop


def test_spec_randomisation_changes_only_what_the_asker_reads():
    SpecEcho.seen = []
    donor = Spec(user_query="A donor question on another database.", sql_engine_name="SQLite", db_name="", db_schema="")
    seen_by_solver = []
    t = task(TWO, query="The real question.")
    row = asyncio.run(
        arun_episode(
            t,
            make_asker(f"{__name__}:SpecEcho"),
            DeterministicIntentOracle(),
            ScriptedSolver(lambda spec, h: seen_by_solver.append(spec.user_query) or "SELECT 1"),
            Verifier(),
            asker_spec=donor,
            spec_donor="donor-id",
        )
    )
    assert SpecEcho.seen == ["A donor question on another database."]
    assert seen_by_solver == ["The real question."] and row["spec_donor"] == "donor-id"


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "t.sqlite"
    con = sqlite3.connect(path)
    con.executescript("CREATE TABLE t(x INT, y REAL); INSERT INTO t VALUES (1, 0.5), (2, 1.25), (2, 1.25);")
    con.commit()
    con.close()
    path.chmod(0o444)
    return path


@pytest.mark.parametrize(
    "sql, verdict, reason",
    [
        ("SELECT x FROM t", 1, "same row set"),
        ("SELECT DISTINCT x FROM t ORDER BY x DESC", 1, "same row set"),  # BIRD set comparison
        ("SELECT x, y FROM t", 0, "results differ"),  # column order and count matter
        ("SELECT x FROM t WHERE x > 1", 0, "results differ"),
        ("DELETE FROM t", 0, "forbidden"),
        ("SELECT nope FROM t", 0, "solver SQL failed"),
        ("", 0, "no SQL submitted"),
    ],
)
def test_verifier_scores_with_the_record_policy(db, sql, verdict, reason):
    t = task(TWO, db_path=str(db), reference_sql="SELECT x FROM t")
    v = Verifier().score(t, sql)
    assert v.score == verdict and reason in v.reason
    assert db.stat().st_mode & 0o222 == 0


def test_structural_records_are_not_scored(db):
    v = Verifier().score(task(TWO, db_path=str(db), executable=False), "SELECT 1")
    assert v.score is None and "structural" in v.reason
    assert Verifier().score(task(TWO, db_path="/nonexistent.sqlite"), "SELECT 1").score is None


def test_batch_run_skips_stored_episodes_and_reports_progress(db):
    tasks = [task(TWO, db_path=str(db), reference_sql="SELECT x FROM t", interp=f"i{i}") for i in range(3)]
    seen = []
    rows = run_episodes(
        tasks,
        lambda: make_asker("full"),
        DeterministicIntentOracle(),
        ScriptedSolver("SELECT x FROM t"),
        Verifier(),
        [0, 1],
        progress=lambda d, n: seen.append((d, n)),
    )
    assert len(rows) == 6 and all(r["verdict"] == 1 for r in rows) and seen[-1] == (6, 6)
    assert len({r["episode_id"] for r in rows}) == 6
    again = run_episodes(
        tasks,
        lambda: make_asker("full"),
        DeterministicIntentOracle(),
        ScriptedSolver("SELECT x FROM t"),
        Verifier(),
        [0, 1, 2],
        skip={r["episode_id"] for r in rows},
    )
    assert len(again) == 3 and {r["seed"] for r in again} == {2}


def test_custom_asker_path_errors_are_clear():
    with pytest.raises(ValueError, match="cannot be loaded"):
        make_asker("nowhere.module:Thing")
    with pytest.raises(ValueError, match="unknown asker"):
        make_asker("fancy")
    assert AskerDecision.stop().kind == "stop"
