"""The judge on the generator-made rewrite families and the hand-labelled semantic cases (#33, #39;
needs ../shared/data/sembench).

    .venv/bin/python bench/bench_aisql_families.py [--per-family 2] [--cases] [--flip-rate 0.1]
        [--no-test-suite] [--no-verifier] [--write pairs.jsonl] [--smoke]

Judges every family pair (labelled by construction, movie) and, with ``--cases``, the semantic
cases of :mod:`pipelines.aisql.semantic_cases` (movie and medical, labelled from SQL semantics)
with the engine of ``quandary aisql compare/evaluate`` (methods ``ex,layers``) and the label oracle,
and prints per pair the structural method, the final verdict and its class, then per verdict class
the pairs and errors, the decided share and pairs per second (the database builds and runtime
starts are timed apart). ``--smoke``: two families and two cases, seconds (``make test`` runs it).
``--write`` saves the pairs as ``quandary aisql evaluate`` input.
"""

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipelines.aisql.compare import UNDECIDED, VERDICT_CLASSES  # noqa: E402
from pipelines.aisql.judging import PairToJudge, judge_pairs, open_judging  # noqa: E402
from pipelines.aisql.pipeline import AisqlSettings, prepare_db  # noqa: E402
from pipelines.aisql.rewrite_families import family_pairs  # noqa: E402
from pipelines.aisql.rewrite_families import prediction_rows as family_rows  # noqa: E402
from pipelines.aisql.semantic_cases import CASES  # noqa: E402
from pipelines.aisql.semantic_cases import prediction_rows as case_rows  # noqa: E402

DATA = REPO.parent / "shared" / "data"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-family", type=int, default=2)
    ap.add_argument("--cases", action="store_true", help="also the hand-labelled semantic cases (movie, medical)")
    ap.add_argument("--flip-rate", type=float, default=0.1)
    ap.add_argument("--no-test-suite", action="store_true")
    ap.add_argument("--no-verifier", action="store_true")
    ap.add_argument("--write", default=None)
    ap.add_argument("--smoke", action="store_true", help="two families and two cases: seconds")
    args = ap.parse_args()
    home = Path(os.environ.get("QUANDARY_HOME") or tempfile.mkdtemp(prefix="bench_families_"))
    rows = family_rows(family_pairs(seed=0, per_family=1 if args.smoke else args.per_family))
    if args.smoke:
        rows = rows[:2]
    if args.cases or args.smoke:
        rows += case_rows(CASES[:2] if args.smoke else CASES)
    if args.write:
        Path(args.write).write_text("".join(json.dumps(r) + "\n" for r in rows))
    per_class: Counter = Counter()
    wrong: Counter = Counter()
    decided = judged = 0
    setup = judging_s = 0.0
    print("| pair | equivalent | structural method | final | verdict class | ex | s |")
    print("|---|---|---|---|---|---|---|")
    for scenario in dict.fromkeys(r["scenario"] for r in rows):
        mine = [r for r in rows if r["scenario"] == scenario]
        t0 = time.perf_counter()
        judging = open_judging(AisqlSettings(flip_rate=args.flip_rate), prepare_db(scenario, DATA, home))
        judging.ctx.test_suite = not args.no_test_suite
        judging.ctx.verifier_k = 0 if args.no_verifier else judging.ctx.verifier_k
        t1 = time.perf_counter()
        todo = [PairToJudge(r["id"], r["gold_sql"], r["predicted_sql"], r.get("dialect", "bigquery")) for r in mine]
        try:
            done = judge_pairs(judging, todo, ("ex", "layers"))
        finally:
            judging.close()
        t2 = time.perf_counter()
        setup += t1 - t0
        judging_s += t2 - t1
        for r, (j, secs) in zip(mine, done):
            sv = j.evidence.structural if j.evidence is not None else None
            print(
                f"| {r['id']} | {r['label']} | {sv.method if sv else '-'} ({sv.verdict if sv else '-'}) "
                f"| {j.final} | {j.verdict_class} | {j.layer('ex').verdict} | {secs:.2f} |"
            )
            judged += 1
            per_class[j.verdict_class] += 1
            if j.final != UNDECIDED:
                decided += 1
                wrong[j.verdict_class] += (j.final == "accept") != r["label"]
            elif j.verdict_class != "cannot decide":  # evidence classes claim equality
                wrong[j.verdict_class] += not r["label"]
    print(
        f"\n{judged} pairs; databases and runtimes {setup:.2f} s, judging {judging_s:.2f} s "
        f"= {judged / judging_s:.1f} pairs/s; decided {decided}/{judged} ({100 * decided / judged:.0f} %)"
    )
    print("\n| verdict class | pairs | label contradicts |\n|---|---|---|")
    for name in VERDICT_CLASSES:
        if per_class[name]:
            print(f"| {name} | {per_class[name]} | {wrong[name] if name != 'cannot decide' else '–'} |")


if __name__ == "__main__":
    main()
