"""Benchmark the AmbiTab conversions: records built per second per corpus; AmbiQT unit DBs.

    .venv/bin/python bench/bench_ambitab.py [--data PATH] [--repeat R] [--corpus NAME ...] [--smoke]

Runs each deterministic conversion (no LLM: EW-Bird's filter and Bird's authoring are skipped,
as with ``--no-llm``) ``--repeat`` times into a fresh ``$QUANDARY_HOME`` and reports the median
wall time, records and records/s. For AmbiQT it also reports the cold build of the unit databases
(time and disk per unit) and the warm rebuild (content-addressed units reused). ``--smoke``: the
same path on 5 Ambrosia records and 3 AmbiQT units, once (seconds; ``make test`` runs it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DETERMINISTIC = ("ambrosia", "ambiqt", "taco", "ew_bird", "bird_interact")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--corpus", action="append", choices=DETERMINISTIC)
    ap.add_argument("--smoke", action="store_true", help="tiny inputs, seconds (make test)")
    args = ap.parse_args(argv)
    data = Path(args.data)
    if not data.is_dir():
        if args.smoke:
            print(f"SKIP: data folder {data} not found")
            return 0
        print(f"data folder {data} not found (pass --data)", file=sys.stderr)
        return 2
    # --smoke: a few records and units of the two corpora with a size knob, once
    sizes = {"ambrosia": {"limit": 5}, "ambiqt": {"limit_units": 3}} if args.smoke else {}
    if args.smoke:
        args.corpus, args.repeat = list(sizes), 1
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["QUANDARY_HOME"] = tmp
        from pipelines.ambitab import ambiqt  # lazy: only on this branch
        from pipelines.ambitab.corpora import build_corpus

        print(f"{'corpus':<14} {'records':>8} {'median s':>9} {'records/s':>10}")
        for corpus in args.corpus or DETERMINISTIC:
            times, n = [], 0
            for i in range(args.repeat):
                out = Path(tmp) / f"units-{corpus}-{i}"  # AmbiQT: a cold unit build every repeat
                t0 = time.perf_counter()
                options = {"out_dir": out} if corpus == "ambiqt" else {}
                res = build_corpus(corpus, data, **options, **sizes.get(corpus, {}))
                times.append(time.perf_counter() - t0)
                n = len(res.records)
            med = statistics.median(times)
            print(f"{corpus:<14} {n:>8} {med:>9.2f} {n / med:>10.1f}")

        out = Path(tmp) / "units-bench"
        t0 = time.perf_counter()
        ambiqt.build(data, out_dir=out, **sizes.get("ambiqt", {}))
        cold_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        ambiqt.build(data, out_dir=out, **sizes.get("ambiqt", {}))
        warm_s = time.perf_counter() - t0
        files = list(out.glob("*.sqlite"))
        total = sum(f.stat().st_size for f in files)
        print(
            f"\nAmbiQT unit databases: {len(files)} built in {cold_s:.2f} s cold "
            f"({1000 * cold_s / max(len(files), 1):.1f} ms/unit incl. execution filter), "
            f"{warm_s:.2f} s warm (reused)"
        )
        print(
            f"disk: {total / 1e6:.1f} MB total, {total / max(len(files), 1) / 1e3:.1f} kB per unit "
            f"(min {min(f.stat().st_size for f in files) / 1e3:.0f} kB, max {max(f.stat().st_size for f in files) / 1e3:.0f} kB)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
