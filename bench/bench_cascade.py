"""LLM calls per accepted question and the cascade's own time, with and without short-circuit and cache.

    .venv/bin/python bench/bench_cascade.py [--n 2] [--json PATH] [--smoke]

On the demo university database, the programmatic generator fills a small grid (every
subcategory × formal/colloquial/interrogative × moderate × n) and ``ground_sql`` finishes the
candidates. Stages 1..10 then run exactly as the assets do (``run_stage`` on the survivors join of
the previous stage's decisions) against a zero-latency scripted 3-member validator council, in four
modes: short-circuit on/off × cache cold/warm (the warm run repeats the cold run on the same call
log). Reported per mode: real requests to the scripted provider, requests per accepted question,
council calls (cached ones included), cache hits, calls saved by short-circuit, and the cascade's own
wall time per candidate (with a zero-latency provider this is pure overhead: litellm, parsing, the
SQLite call log, SQL execution and equivalence).

What "short-circuit off" covers: every council vote asks all members (``Council.avote`` overridden
to ask everyone in one wave and then apply the same ``resources.llm.votes.decide``), and the SQL-writing
waves of stages 5 and 6 ask all members (their wave sizing, ``is_decided``/``min_more_votes`` in
``pipelines.abiss.stages.voting``, is patched in this process), and stage 9 asks every comparison
instead of stopping at a candidate's first lost one (``StageContext.stop_at_first_loss``: DESIGN.md
names that stop a short-circuit). The early stop that is the paper's rule stays in both modes: stage 7
stops at the first member whose SQL is judged correct. Decisions must be identical in both modes; the
benchmark checks that. ``--smoke`` (``make test``): the first 12 candidates of a one-sample grid.

The council is deterministic: every answer is a hash of (member, prompt); member a is mostly
positive, b less so, c is a coin flip, so some votes need the third member.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


from pipelines.abiss import outputs  # noqa: E402
from pipelines.abiss.prompts import PROMPT_OPENINGS  # noqa: E402
from pipelines.abiss.stages import STAGES, StageContext, run_stage, voting  # noqa: E402
from pipelines.abiss.taxonomy import DEFAULT_STYLES, SUBCATEGORY_BY_ID  # noqa: E402
from resources.llm.votes import decide  # noqa: E402

MARKERS = {k: v for k, v in PROMPT_OPENINGS.items() if k not in ("generate_question", "ground_sql")}
# share of "positive" answers per member (yes / writes the gold reading / prefers the assigned category)
POSITIVE = {"a": 0.9, "b": 0.7, "c": 0.5}


def _h(*parts) -> float:
    """A deterministic number in [0, 1) from the parts."""
    return int.from_bytes(hashlib.sha256("|".join(map(str, parts)).encode()).digest()[:8], "big") / 2**64


def _field(text: str, name: str) -> str | None:
    m = re.search(rf"^{name}: (.*)$", text, re.MULTILINE)
    return m.group(1).strip() if m else None


class Responder:
    """Answers every stage's prompt from (member, prompt) alone, knowing the candidates by question."""

    def __init__(self, candidates: list[dict]):
        self.by_question: dict[str, dict] = {}
        for c in sorted(candidates, key=lambda r: r.get("interpretation_index") or 0, reverse=True):
            self.by_question[c["question"]] = c  # interpretation 0 wins for a shared question
        self.name_to_id = {s.name: s.id for s in SUBCATEGORY_BY_ID.values()}

    def __call__(self, req) -> str:
        member = req.model.split("/")[-1]
        text = [m for m in req.messages if m["role"] == "user"][-1]["content"]
        kind = next((k for k, marker in MARKERS.items() if marker in text), None)
        question = _field(text, "Question") or ""
        row = self.by_question.get(question, {})
        positive = _h(member, text) < POSITIVE.get(member, 0.5)
        if kind in ("conformance", "ground_truth", "feedback"):
            return json.dumps({"verdict": "yes" if positive else "no"})
        if kind == "style":  # a "negative" answer is another style of the prompt's labels, never an unknown one
            style = row.get("style", "formal")
            other = next(s for s in DEFAULT_STYLES if s != style)
            return json.dumps({"style": style if positive else other})
        if kind == "write_sql":  # "positive" = reads it like the gold (interpretation 0 for ambiguous)
            gold = row.get("sql") or "SELECT 1"
            return json.dumps({"sql": gold if _h("w", member, text) < 0.35 else "SELECT COUNT(*) FROM courses"})
        if kind == "solve":
            solved = _h("s", member, text) < 0.1
            return json.dumps({"answerable": solved, "sql": "SELECT COUNT(*) FROM students" if solved else ""})
        if kind == "consistency":
            a = self.name_to_id.get(re.search(r"^A: (.*?) — ", text, re.MULTILINE).group(1))
            assigned_is_a = a == row.get("subcategory")
            return json.dumps({"choice": "A" if assigned_is_a == (_h("c", member, text) < 0.93) else "B"})
        return "no idea"  # unexpected prompt (e.g. a repair call)


def _make_full_council_cls():
    # lazy: the name means something else at module level
    from resources.llm.council import Council, MemberVote, VoteOutcome, _as_yes_no

    class FullCouncil(Council):
        """Short-circuit off: every vote asks every member at once."""

        async def avote(
            self,
            messages,
            output_model,
            extract,
            rule="strict_majority",
            tag=None,
            *,
            abstain_as_no=False,
            tie="reject",
            overrides=None,
        ):

            yes_no = rule in ("strict_majority", "unanimous")
            results = await asyncio.gather(
                *(self.aask(m.name, messages, output_model, tag, overrides=overrides) for m in self.members)
            )
            votes, cast = [], []
            for m, r in zip(self.members, results):
                v = None
                if r.ok:
                    try:
                        v = extract(r.parsed)
                    except Exception:  # noqa: BLE001
                        v = None
                    if yes_no:
                        v = _as_yes_no(v)
                votes.append(v)
                cast.append(MemberVote(m.name, v, r.call_id, r.ok))
            tally = decide(votes, rule, abstain_as_no=abstain_as_no, tie=tie)
            return VoteOutcome(
                decision=tally.decision,
                votes=cast,
                calls_made=len(votes),
                calls_saved=0,
                rule=rule,
                counts=tally.counts,
                abstentions=sum(v is None for v in votes),
                results=list(results),
            )

    return FullCouncil


class _NoWaveShortCircuit:
    """Patch the SQL-writing waves of stages 5/6 to ask every member (restored on exit)."""

    def __enter__(self):
        self._saved = (voting.is_decided, voting.min_more_votes)
        voting.is_decided = lambda votes, n_remaining, *a, **k: n_remaining == 0
        voting.min_more_votes = lambda votes, n_remaining, *a, **k: n_remaining
        return self

    def __exit__(self, *exc):
        voting.is_decided, voting.min_more_votes = self._saved


def run_cascade(candidates, db_path: str, schema_context: str, council, handler, short_circuit: bool = True) -> dict:
    cands = pl.DataFrame(candidates, infer_schema_length=None)
    previous = None
    totals = {"calls": 0, "cached": 0, "calls_saved": 0}
    per_stage = []
    requests_before = handler.count
    t0 = time.perf_counter()
    for spec in STAGES:
        entering = outputs.survivors(cands, previous)
        ctx = StageContext(db_path, schema_context, council, stop_at_first_loss=short_circuit) if spec.no >= 2 else None
        r0 = handler.count
        decisions = outputs.decisions_frame(run_stage(spec.no, entering.to_dicts(), ctx))
        previous = decisions
        if ctx is not None:
            for k in totals:
                totals[k] += ctx.stats[k]
        applies = decisions.filter(pl.col("applies"))
        per_stage.append(
            {
                "stage": spec.key,
                "entered": applies.height,
                "rejected": int((~applies["passed"]).sum()) if applies.height else 0,
                "requests": handler.count - r0,
            }
        )
    wall = time.perf_counter() - t0
    accepted = sorted(outputs.survivors(cands, previous)["candidate_id"].to_list())
    return {
        "candidates": cands.height,
        "accepted": accepted,
        "requests": handler.count - requests_before,
        "wall_s": wall,
        "per_stage": per_stage,
        **totals,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2, help="samples per grid cell")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--smoke", action="store_true", help="12 candidates of a one-sample grid (make test)")
    args = ap.parse_args()
    if args.smoke:
        args.n = 1

    home = Path(tempfile.mkdtemp(prefix="quandary-bench-cascade-"))
    os.environ["QUANDARY_HOME"] = str(home)
    os.environ.pop("QUANDARY_COUNCIL_CONFIG", None)

    # lazy: after the setup above it (environment, monkeypatch or sys.path)
    from pipelines.abiss.demo_db import write_demo_db
    from pipelines.abiss.generation import generate_nlq_objects, ground_sql
    from pipelines.abiss.grid import GridSpec, expand_grid
    from pipelines.sqltools.schema_context import render_schema_context
    from resources.catalog import inspect_database
    from resources.llm import Council
    from resources.llm.registry import call_log
    from tests.llm_fakes import ScriptedLLM, install, scripted_member

    db_path = str(write_demo_db(home / "university.sqlite"))
    schema_context = render_schema_context(inspect_database(db_path))
    grid = expand_grid(
        GridSpec(
            ("programmatic",), styles=("formal", "colloquial", "interrogative"), difficulties=("moderate",), n=args.n
        ),
        "university",
    )
    objects, _ = generate_nlq_objects(grid, schema_context, db_path)
    candidates = ground_sql(objects, schema_context)[: 12 if args.smoke else None]

    handler = ScriptedLLM(Responder(candidates))
    install(handler)
    # a zero-latency provider never times out on its own: a long timeout keeps a loaded machine's
    # stalls (an event loop busy with the cascade's SQL) from failing a stage
    members = [scripted_member(n, max_in_flight=8, max_retries=0, timeout_s=600) for n in "abc"]
    FullCouncil = _make_full_council_cls()

    results = {}
    for sc in ("on", "off"):
        log = call_log(home / f"llm_calls_sc_{sc}.sqlite")  # each mode starts from a cold cache
        council = Council("validators", members, log) if sc == "on" else FullCouncil("validators", members, log)
        for cache in ("cold", "warm"):
            if sc == "off":
                with _NoWaveShortCircuit():
                    results[(sc, cache)] = run_cascade(
                        candidates, db_path, schema_context, council, handler, short_circuit=False
                    )
            else:
                results[(sc, cache)] = run_cascade(candidates, db_path, schema_context, council, handler)

    accepted = {k: v["accepted"] for k, v in results.items()}
    same = len({tuple(a) for a in accepted.values()}) == 1

    print(
        f"ABISS cascade on the demo database: {len(candidates)} programmatic candidates, "
        f"zero-latency scripted 3-member council\n"
    )
    print(
        "| short-circuit | cache | accepted | LLM requests | requests / accepted | council calls | cache hits "
        "| calls saved | cascade time / candidate |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for (sc, cache), r in results.items():
        n_acc = len(r["accepted"])
        per_acc = f"{r['requests'] / n_acc:.2f}" if n_acc else "n/a"
        print(
            f"| {sc} | {cache} | {n_acc}/{r['candidates']} | {r['requests']} | {per_acc} | {r['calls']} "
            f"| {r['cached']} | {r['calls_saved']} | {1000 * r['wall_s'] / r['candidates']:.1f} ms |"
        )
    print("\nPer stage (short-circuit on, cold cache vs off, cold):\n")
    print("| stage | entered | rejected | requests (on) | requests (off) |")
    print("|---|---:|---:|---:|---:|")
    for on, off in zip(results[("on", "cold")]["per_stage"], results[("off", "cold")]["per_stage"]):
        print(f"| {on['stage']} | {on['entered']} | {on['rejected']} | {on['requests']} | {off['requests']} |")
    on, off = results[("on", "cold")], results[("off", "cold")]
    n_on, n_off = len(on["accepted"]), len(off["accepted"])
    if n_on and n_off:
        ratio = (on["requests"] / n_on) / (off["requests"] / n_off)
        print(f"\nrequests per accepted question, short-circuit on / off: {ratio:.2f}x")
    for label, r in (("on", on), ("off", off)):
        s09 = sum(s["requests"] for s in r["per_stage"] if s["stage"].startswith("s09"))
        print(f"stage 9's share of the requests, short-circuit {label}: {100 * s09 / max(r['requests'], 1):.0f} %")
    print(
        "With short-circuit off, the calls still saved are the paper's early stop (stage 7 at the first "
        "correct solution), kept in both modes."
    )
    print(f"same accepted questions in all four modes: {'yes' if same else 'NO'}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    f"{sc}/{cache}": {k: v for k, v in r.items() if k != "accepted"} | {"accepted": len(r["accepted"])}
                    for (sc, cache), r in results.items()
                },
                indent=2,
            )
        )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
