"""The benchmark audit's deterministic checks over real benchmarks (issue 32): counts per check and
error type, and the time they take.

    .venv/bin/python bench/bench_benchmark_audit.py [--spider FILE --spider-dbs DIR] [--bird FILE
        --bird-dbs DIR] [--timeout S] [--json OUT] [--examples N]

Defaults: Spider dev (``../shared/data/spider/dev.json``, its 19 SQLite databases; ``wta_1`` has
no file and is reported as skipped) and BIRD's superhero dev questions
(``../shared/data/bird/dev/superhero_dev_questions.arcwise.json`` on ``dev_databases``). Calls
the domain (:func:`pipelines.benchmark_audit.audit.audit_database`) directly, one database at a
time, as the job's asset does: no Dagster, no LLM. ``--examples N`` prints N flagged items per
check for reading by hand.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "data"

import polars as pl  # noqa: E402

from pipelines.benchmark_audit.audit import audit_database, rates  # noqa: E402
from pipelines.benchmark_audit.checks import CHECKS, ERROR_TYPES  # noqa: E402
from pipelines.benchmark_audit.records import by_database, database_path, file_digest, read_items  # noqa: E402
from resources.catalog import inspect_database  # noqa: E402
from resources.sql import close_workers  # noqa: E402


def audit_file(path: Path, dbs: Path, timeout_s: float) -> tuple[pl.DataFrame, dict]:
    items = read_items(path)
    digest = file_digest(path)
    frames, skipped, per_db_s = [], {}, {}
    start = time.perf_counter()
    for db_id, group in by_database(items).items():
        db = database_path(dbs, db_id)
        if db is None:
            skipped[db_id] = len(group)
            continue
        t = time.perf_counter()
        df, _ = audit_database(
            group, db, benchmark=path.stem, digest=digest, schema=inspect_database(db, db_id), timeout_s=timeout_s
        )
        per_db_s[db_id] = time.perf_counter() - t
        frames.append(df)
    wall = time.perf_counter() - start
    df = pl.concat(frames)
    slowest = max(per_db_s, key=per_db_s.get)
    return df, {
        "file": str(path),
        "items": len(items),
        "audited": df.height,
        "databases": len(per_db_s),
        "skipped": skipped,
        "wall_s": round(wall, 2),
        "ms_per_item": round(1000 * wall / max(1, df.height), 1),
        "slowest_db": f"{slowest} {per_db_s[slowest]:.2f} s",
    }


def report(name: str, df: pl.DataFrame, info: dict, examples: int) -> dict:
    r = rates(df).filter(pl.col("db_id") == "ALL").row(0, named=True)
    print(f"\n## {name}: {info['audited']} of {info['items']} items on {info['databases']} databases")
    if info["skipped"]:
        print(f"skipped (no database file): {info['skipped']}")
    print(f"time: {info['wall_s']} s ({info['ms_per_item']} ms per item; slowest database {info['slowest_db']})")
    print(f"flagged: {r['flagged']} ({100 * r['flagged_rate']:.1f} %)")
    print("| check | type | items |\n|---|---|---:|")
    for c in CHECKS:
        print(f"| {c} | {ERROR_TYPES[c]} | {r[c]} |")
    print("| type | items | rate |\n|---|---:|---:|")
    for t in ("E1", "E2", "E3", "E4"):
        print(f"| {t} | {r[t]} | {100 * r[t + '_rate']:.1f} % |")
    for c in CHECKS if examples else ():
        hits = df.filter(pl.col("flags").str.split(",").list.contains(c)).head(examples)
        for row in hits.iter_rows(named=True):
            detail = next(f["detail"] for f in json.loads(row["findings"]) if f["check"] == c)
            print(f"  [{c}] {row['db_id']} #{row['item_index']}: {row['question'][:90]} -- {detail[:160]}")
    return {"info": info, "rates": r}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spider", type=Path, default=SHARED / "spider" / "dev.json")
    ap.add_argument("--spider-dbs", type=Path, default=SHARED / "spider" / "database")
    ap.add_argument("--bird", type=Path, default=SHARED / "bird" / "dev" / "superhero_dev_questions.arcwise.json")
    ap.add_argument("--bird-dbs", type=Path, default=SHARED / "bird" / "dev_databases")
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--examples", type=int, default=0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    out = {}
    try:
        for name, path, dbs in (
            ("Spider dev", args.spider, args.spider_dbs),
            ("BIRD superhero dev", args.bird, args.bird_dbs),
        ):
            if not path.is_file():
                print(f"skipping {name}: {path} not found (../shared/data is only in the workplace checkout)")
                continue
            df, info = audit_file(path, dbs, args.timeout)
            out[name] = report(name, df, info, args.examples)
    finally:
        close_workers()
    if args.json:
        args.json.write_text(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
