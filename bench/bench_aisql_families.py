"""The judge on the generator-made rewrite families (#33 items 1, 2, 6, 7; needs ../shared/data/sembench).

    .venv/bin/python bench/bench_aisql_families.py [--per-family 2] [--no-test-suite] [--write pairs.jsonl]

Judges every family pair (11 equivalent, 9 not; labelled by construction) with the engine of
``quandary aisql compare/evaluate`` on the movie database and the label oracle (p = 0.1), and
prints per family the structural method and final verdict, then the decided share, errors,
coverage per method and pairs per second (deterministic layers only; the database build and the
runtime start are timed apart). ``--write`` saves the pairs as ``quandary aisql evaluate`` input.
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

from pipelines.aisql.judging import PairToJudge, judge_pairs, open_judging  # noqa: E402
from pipelines.aisql.pipeline import AisqlSettings, prepare_db  # noqa: E402
from pipelines.aisql.rewrite_families import family_pairs, prediction_rows  # noqa: E402

DATA = REPO.parent / "shared" / "data"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-family", type=int, default=2)
    ap.add_argument("--no-test-suite", action="store_true")
    ap.add_argument("--write", default=None)
    args = ap.parse_args()
    home = Path(os.environ.get("QUANDARY_HOME") or tempfile.mkdtemp(prefix="bench_families_"))
    pairs = family_pairs(seed=0, per_family=args.per_family)
    if args.write:
        Path(args.write).write_text("".join(json.dumps(r) + "\n" for r in prediction_rows(pairs)))
    t0 = time.perf_counter()
    db = prepare_db("movie", DATA, home)
    t1 = time.perf_counter()
    judging = open_judging(AisqlSettings(), db)
    judging.ctx.test_suite = not args.no_test_suite
    t2 = time.perf_counter()
    todo = [PairToJudge(f"{p.family}-{i}", p.gold_sql, p.candidate_sql, "bigquery") for i, p in enumerate(pairs)]
    try:
        done = judge_pairs(judging, todo, ("ex", "layers"))
    finally:
        judging.close()
    t3 = time.perf_counter()
    per_method: dict[str, Counter] = {m: Counter() for m in ("structural", "layers", "ex")}
    print("| family | equivalent | structural method | layers | ex | s |")
    print("|---|---|---|---|---|---|")
    for p, (r, secs) in zip(pairs, done):
        sv = r.evidence.structural if r.evidence is not None else None
        print(
            f"| {p.family} | {p.equivalent} | {sv.method if sv else '-'} ({sv.verdict if sv else '-'}) "
            f"| {r.final} | {r.layer('ex').verdict} | {secs:.2f} |"
        )
        for m in per_method:
            v = r.layer(m).verdict
            right = (v == "accept") == p.equivalent
            per_method[m]["decided" if v != "cannot decide" else "undecided"] += 1
            if v != "cannot decide":
                per_method[m]["right" if right else "wrong"] += 1
            if sv is not None and m == "structural" and sv.method == "test_suite" and sv.verdict != "differ":
                per_method[m]["equal on the test suite"] += 1
    n = len(pairs)
    print(
        f"\n{n} pairs; database {t1 - t0:.2f} s, runtime start {t2 - t1:.2f} s, judging {t3 - t2:.2f} s "
        f"= {n / (t3 - t2):.1f} pairs/s"
    )
    for m, c in per_method.items():
        print(
            f"{m}: decided {c['decided']}/{n} ({100 * c['decided'] / n:.0f} %), right {c['right']}, "
            f"wrong {c['wrong']}"
            + (f", equal on the test suite {c['equal on the test suite']}" if m == "structural" else "")
        )


if __name__ == "__main__":
    main()
