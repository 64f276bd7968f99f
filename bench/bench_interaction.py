"""LLM calls and wall time per conversation of the interaction benchmark against a loopback stub.

    .venv/bin/python bench/bench_interaction.py [--latency 0.05] [--questions 12] [--max-steps 3] [--smoke]

``--smoke``: 1 question, no latency, the final turn only (seconds).

The stub (tests/llm_fakes.StubOpenAIServer, in-process) answers every request after ``latency``
seconds with one JSON object that fits every schema: the system agent asks a clarification on
every non-final turn (question beats SQL) and gives SQL on the final turn, each of the three
user-council members labels it Technical and answers (identical answers: no tournament), so each
conversation runs the full 3 + 1 turns. All four modes, one system agent, a 3-member user council.
A second pass repeats the run: every call is a cache hit, so it makes 0 requests.
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

REPLY = {
    "category": "lexical_overlap",
    "system_question": "Which column do you mean?",
    "system_sql": "SELECT COUNT(*) FROM students",
    "system_feedback": None,
    "reasoning": "",
    "relevancy": "Technical",
    "node_ids": [1],
    "answer": "A",
    "analysis": "",
    "matches": "Yes",
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--questions", type=int, default=12)
    ap.add_argument("--max-steps", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="1 question, no latency, final turn only: seconds")
    args = ap.parse_args()
    if args.smoke:
        args.questions, args.latency, args.max_steps = 1, 0.0, 0
    home = Path(tempfile.mkdtemp(prefix="quandary-bench-"))
    os.environ["QUANDARY_HOME"] = str(home)

    # lazy: after the setup above it (environment, monkeypatch or sys.path)
    from pipelines.abiss.demo_db import write_demo_db
    from pipelines.interaction.agents import load_agent
    from pipelines.interaction.dialogue import run_benchmark
    from pipelines.interaction.metrics import score_conversation
    from pipelines.interaction.modes import MODES
    from pipelines.interaction.user import SimulatedUser
    from pipelines.sqltools.schema_context import render_schema_context
    from resources.catalog import inspect_database
    from resources.llm import Council, call_log
    from resources.llm.config import Member
    from tests.llm_fakes import StubOpenAIServer, StubScript

    db = write_demo_db(home / "university.sqlite")
    schema = render_schema_context(inspect_database(db, "university"))
    subs = [("answerable", None), ("lexical_overlap", "personal email"), ("missing_entity", "no phone column")]
    rows = []
    for i in range(args.questions):
        sub, hk = subs[i % 3]
        rows.append(
            {
                "question_id": f"q{i:03d}",
                "db_id": "university",
                "question": f"Question number {i}?",
                "evidence": None,
                "sql": None if sub == "missing_entity" else "SELECT COUNT(*) FROM students",
                "hidden_knowledge": hk if sub == "lexical_overlap" else None,
                "feedback": hk if sub == "missing_entity" else None,
                "subcategory": sub,
                "style": "formal",
            }
        )
    with StubOpenAIServer(StubScript(latency_s=args.latency, content=json.dumps(REPLY))) as stub:

        def member(name):
            return Member(
                name=name,
                model="openai/stub",
                api_base=stub.base_url,
                max_in_flight=8,
                max_retries=0,
                timeout_s=30,
                seed=hash(name) % 100,
            )

        system = Council("system_agents", [member("sys")], call_log())
        user = SimulatedUser(Council("user_simulator", [member("u1"), member("u2"), member("u3")], call_log()))
        judges = Council("judges", [member("u1"), member("u2"), member("u3")], call_log())
        from pipelines.interaction.metrics import council_feedback_judge  # lazy: only on this branch

        judge = council_feedback_judge(judges, schema)
        out = []
        for label in ("cold", "warm"):
            before = stub.requests
            t0 = time.perf_counter()
            convs, _ = run_benchmark(
                [load_agent("sys", system)], rows, list(MODES), user, schema, str(db), args.max_steps, workers=8
            )
            by_q = {r["question_id"]: r for r in rows}
            for c in convs:
                score_conversation(c, by_q[c["question_id"]], str(db), judge)
            wall = time.perf_counter() - t0
            n = len(convs)
            reqs = stub.requests - before
            turns = sum(c["n_turns"] for c in convs)
            out.append((label, n, turns, reqs, wall))
    print(
        f"latency {args.latency * 1000:.0f} ms per request, {args.questions} questions × 4 modes, "
        f"max_steps {args.max_steps}, 3-member user council"
    )
    print(f"{'pass':<6} {'convs':>6} {'turns':>6} {'requests':>9} {'req/conv':>9} {'wall s':>8} {'ms/conv':>8}")
    for label, n, turns, reqs, wall in out:
        print(f"{label:<6} {n:>6} {turns:>6} {reqs:>9} {reqs / n:>9.2f} {wall:>8.2f} {1000 * wall / n:>8.1f}")
    assert out[1][3] == 0, "warm rerun made requests"
    return 0


if __name__ == "__main__":
    sys.exit(main())
