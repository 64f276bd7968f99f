"""Issue #38 before/after: judges that never answer, an outage of the system's endpoint, machine load.

    .venv/bin/python bench/bench_interaction_outage.py [--outage 0.3] [--unanswerable 40] [--smoke]

Real code (dialogue loop, council layer with its call log and retries, scoring, tables) with a
scripted model behind the council (``tests/llm_fakes.ScriptedLLM``), on BIRD dev superhero: its 129
questions with their real gold SQL (answerable) plus ``--unanswerable`` generated questions the
agent must explain (FB). The scripted agent answers the gold SQL for two thirds of the answerable
questions and a wrong one for the rest; it explains nine in ten unanswerable ones (answering SQL to the others). Ground-truth mode, the
final turn only (``max_steps=0``): what is measured is the scoring, not the dialogue.

1. **Clean**: EX (GT) and FB (GT) with honest judges (3, answering "Yes").
2. **Garbage FB judges**: every judge call answers prose. *Before*: the rate over the items left
   decided (those decided by rule) was printed, "FB 0.0"; *after*: the cell as printed, whether the
   tables are provisional, the judges named, and the exit code of `interact` / `report interaction`.
3. **Outage**: HTTP 500 on ``--outage`` of the system agent's calls, on every retry (2 retries).
   *Before*: such a conversation ended as a give-up, EX False (rescored that way here); *after*:
   ``system_failed``, incomplete, counted apart; EX over the completed conversations.
4. **Load**: a 562,500-row gold (superhero × superhero ids) and an identical prediction under a
   0.5 s budget: *before* the prediction alone, read to its end and digested, within the budget (as
   the old code did); *after* ``execution_match``. And a slow gold (a recursive count) with a
   prediction budget ten times below the gold's own time: *before* that budget; *after*
   ``execution_match`` (twice the gold's time, one retry).

``--smoke``: 12 answerable + 4 unanswerable questions, no large gold; seconds.
"""

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SUPERHERO = REPO.parent / "shared" / "data" / "bird"
if not SUPERHERO.is_dir():
    SUPERHERO = Path("/work/shared/data/bird")
DB = SUPERHERO / "dev_databases" / "superhero" / "superhero.sqlite"
WRONG_SQL = "SELECT COUNT(*) FROM superhero WHERE id < 0"


def questions(n_unanswerable: int, limit: int | None) -> list[dict]:
    from tests.interaction.helpers import question_row

    dev = [r for r in json.loads((SUPERHERO / "dev" / "dev.jar.json").read_text()) if r["db_id"] == "superhero"]
    rows = [
        question_row(
            "answerable_with_evidence" if r.get("evidence") else "answerable",
            r["question"],
            sql=r["sql"],
            evidence=r.get("evidence") or None,
            qid=f"q{r['question_id']}",
            db_id="superhero",
        )
        for r in dev[:limit]
    ]
    rows += [
        question_row(
            "improper_question",
            f"Which hero would win a dance contest, round {i}?",
            feedback="Not a question the database can answer.",
            qid=f"u{i}",
            db_id="superhero",
        )
        for i in range(n_unanswerable)
    ]
    return rows


def responder(rows: list[dict], outage: float, garbage_judges: bool):
    from pipelines.interaction.prompts import PROMPT_OPENINGS as OPEN
    from tests.llm_fakes import http_error

    by_question = {r["question"]: r for r in rows}

    def respond(req):
        text = req.messages[-1]["content"]
        if text.startswith(OPEN["respond"]):
            q = by_question[text.split("**Question:** ", 1)[1].split("\n", 1)[0]]
            # the same calls fail on every retry: an outage, not a blip
            if random.Random(f"outage:{q['question_id']}").random() < outage:
                return http_error(500, "upstream unavailable")
            if q["sql"] is None:  # one in ten answered with SQL: FB False by rule, no judge asked
                if random.Random(f"sql:{q['question_id']}").random() < 0.1:
                    return json.dumps({"system_sql": "SELECT 1", "system_feedback": None})
                return json.dumps({"system_sql": None, "system_feedback": "The database cannot tell that."})
            right = random.Random(f"right:{q['question_id']}").random() < 2 / 3
            return json.dumps({"system_sql": q["sql"] if right else WRONG_SQL, "system_feedback": None})
        if text.startswith(OPEN["feedback"]):
            return "I think so, more or less." if garbage_judges else json.dumps({"analysis": "", "matches": "Yes"})
        return "?"

    return respond


def run(rows, outage=0.0, garbage_judges=False) -> list[dict]:
    """Conversations scored by the real code; the call log is a fresh one per scenario."""
    from pipelines.interaction import metrics as M
    from pipelines.interaction.agents import AgentHandle, CouncilSystemAgent
    from pipelines.interaction.dialogue import run_benchmark
    from pipelines.interaction.user import SimulatedUser
    from resources.llm import Council, call_log, reset_councils
    from tests.llm_fakes import ScriptedLLM, install, scripted_member

    os.environ["QUANDARY_HOME"] = tempfile.mkdtemp(prefix="bench38-")
    reset_councils()
    install(ScriptedLLM(responder(rows, outage, garbage_judges)))
    log = call_log()
    system = Council("system_agents", [scripted_member("sys", max_retries=2)], log)
    agent = AgentHandle(CouncilSystemAgent(system, "sys"), "sys", "council", "sys")
    user = SimulatedUser(Council("user_simulator", [scripted_member(f"u{i}") for i in range(3)], log))
    judges = Council("feedback_judges", [scripted_member(f"j{i}", max_retries=0) for i in range(3)], log)
    convs, _ = run_benchmark([agent], rows, ["ground_truth"], user, "schema", str(DB), max_steps=0, workers=4)
    judge = M.council_feedback_judge(judges, "schema")
    golds = M.GoldResults(str(DB))
    qs = {r["question_id"]: r for r in rows}
    return [M.score_conversation(c, qs[c["question_id"]], str(DB), judge, golds=golds) for c in convs]


def cell(rows, metric):
    from pipelines.interaction import metrics as M

    r = next(x for x in rows if (x["table"], x["mode"], x["metric"]) == ("table4", "ground_truth", metric))
    return {
        "printed": M._cell(r).strip(),
        "decided": f"{r['numerator']}/{r['denominator']}",
        "undecided": r.get("undecided"),
    }


def as_give_up(s: dict) -> dict:
    unans = s["group"] == "unanswerable"
    return {
        **s,
        "end": "give_up",
        "solved": None if unans else False,
        "ex_status": "not_applicable" if unans else "scored",
        "explained": False if unans else None,
        "fb_status": "scored" if unans else "not_applicable",
    }


def scoring_part(args) -> dict:
    from cli.commands.interaction import _undecided_exit
    from pipelines.interaction import metrics as M

    rows = questions(args.unanswerable, 12 if args.smoke else None)
    out = {"questions": len(rows)}
    t0 = time.perf_counter()
    clean = M.metric_rows(run(rows))
    out["1 clean"] = {
        "EX (GT)": cell(clean, "ex"),
        "FB (GT)": cell(clean, "fb"),
        "provisional": M.is_provisional(clean),
    }

    garbage = M.metric_rows(run(rows, garbage_judges=True))
    fb = next(x for x in garbage if (x["table"], x["mode"], x["metric"]) == ("table4", "ground_truth", "fb"))
    devnull = open(os.devnull, "w")
    stderr, sys.stderr = sys.stderr, devnull
    try:
        code = _undecided_exit(garbage)
    finally:
        sys.stderr = stderr
    out["2 garbage judges"] = {
        "before: FB printed": M._pct(fb["value"]).strip(),
        "after": cell(garbage, "fb"),
        "provisional": M.is_provisional(garbage),
        "judges named": [r["agent"] for r in garbage if r["table"] == "judges"],
        "exit code": code,
    }

    scores = run(rows, outage=args.outage)
    after = M.metric_rows(scores)
    # before: the old dialogue ended an outage as a give-up: EX False on a solvable question, FB
    # False on an unanswerable one (no feedback)
    old = [as_give_up(s) if s["end"] == "system_failed" else s for s in scores]
    before = M.metric_rows(old)
    inc = next(x for x in after if (x["table"], x["mode"], x["metric"]) == ("table4", "ground_truth", "system_failed"))
    out[f"3 outage {args.outage:.0%}"] = {
        "before: EX (GT)": cell(before, "ex"),
        "after: EX (GT)": cell(after, "ex"),
        "clean EX (GT)": cell(clean, "ex")["printed"],
        "incomplete (system outage)": f"{inc['numerator']}/{inc['denominator']}",
        "provisional": M.is_provisional(after),
    }
    out["s"] = round(time.perf_counter() - t0, 1)
    return out


def load_part() -> dict:
    from pipelines.interaction import metrics as M
    from resources.sql import execute_sql

    out = {}
    big = "SELECT a.id, b.id FROM superhero a, superhero b"
    t0 = time.perf_counter()
    old = execute_sql(str(DB), big, timeout_s=0.5, digest_beyond_cap=True)
    t1 = time.perf_counter()
    verdict, reason = M.execution_match(str(DB), big, big, timeout_s=0.5, golds=M.GoldResults(str(DB)))
    t2 = time.perf_counter()
    out["identical 562,500-row prediction, 0.5 s budget"] = {
        "before": "undecided" if not old.ok and old.kind.value == "timeout" else f"read in {t1 - t0:.1f} s",
        "after": verdict,
        "reason": reason,
        "s": round(t2 - t1, 2),
    }
    slow = (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 4000000) "
        "SELECT COUNT(*), SUM(i % 7) FROM n"
    )
    golds = M.GoldResults(str(DB))
    golds.summary(slow)
    budget = golds.elapsed_s(slow) / 10
    old = execute_sql(str(DB), slow, timeout_s=budget)
    verdict, reason = M.execution_match(str(DB), slow, slow, timeout_s=budget, golds=golds)
    out[f"slow gold ({golds.elapsed_s(slow):.1f} s), prediction budget {budget:.2f} s"] = {
        "before": "undecided" if not old.ok else "credited",
        "after": verdict,
        "reason": reason,
    }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--outage", type=float, default=0.3, help="share of the system agent's calls failing")
    ap.add_argument("--unanswerable", type=int, default=40)
    ap.add_argument("--smoke", action="store_true", help="a few questions, no large gold: seconds")
    args = ap.parse_args()
    if args.smoke:
        args.unanswerable = min(args.unanswerable, 4)
    if not DB.is_file():
        print(f"skipped: BIRD superhero not found at {DB} (../shared/data)")
        return 0
    print(json.dumps(scoring_part(args), indent=1, default=str, ensure_ascii=False))
    if not args.smoke:
        print(json.dumps(load_part(), indent=1, default=str, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
