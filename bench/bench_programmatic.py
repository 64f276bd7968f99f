"""Benchmark the programmatic generator: candidates per second per database.

    .venv/bin/python bench/bench_programmatic.py [--per-subcategory N] [--repeat R] [--seed S]
        [--db PATH ...] [--smoke]
    .venv/bin/python bench/bench_programmatic.py --wide 50 100 200 500   # scaling with table count

``--wide`` writes synthetic wide SQLite databases (N tables of 20 rows, each with a name, an
amount, a category, a date and a foreign key to its parent table, so the FK graph is a tree) and
reports analysis and generation seconds per size: the generator should grow near-linearly.

Default databases: the embedded demo (written to a temp dir), every Spider dev database under
``../shared/data/spider/database`` and BIRD ``superhero`` (those that exist). Each database is
run ``--repeat`` times (analysis + generation + verification, end to end); the table shows the
median wall time and candidates (NLQ records) per second.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


from pipelines.abiss.demo_db import write_demo_db  # noqa: E402
from pipelines.abiss.programmatic import generate_candidates  # noqa: E402
from pipelines.abiss.programmatic.schema_analysis import analyze  # noqa: E402
from resources.catalog import inspect_database  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"


def wide_db(path: Path, n_tables: int, rows: int = 20) -> Path:
    rng = random.Random(n_tables)
    con = sqlite3.connect(path)
    for i in range(n_tables):
        fk = f", parent_id INTEGER REFERENCES t{i // 2}(id)" if i else ""
        con.execute(f"CREATE TABLE t{i} (id INTEGER PRIMARY KEY, name TEXT, amount REAL, kind TEXT, created DATE{fk})")
        data = []
        for r in range(rows):
            vals = [r, f"item {i}-{r}", round(rng.random() * 100, 2), rng.choice("abc"), f"2020-01-{1 + r % 28:02d}"]
            data.append(vals + ([rng.randrange(rows)] if i else []))
        con.executemany(f"INSERT INTO t{i} VALUES ({','.join('?' * len(data[0]))})", data)
    con.commit()
    con.close()
    return path


def scaling(sizes: list[int], per_subcategory: int, seed: int) -> int:
    print(f"{'tables':>7} {'analyze s':>10} {'generate s':>11} {'total s':>8} {'records':>8} {'s / table':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            db = wide_db(Path(tmp) / f"wide_{n}.sqlite", n)
            t0 = time.perf_counter()
            analysis = analyze(db)
            t1 = time.perf_counter()
            report = generate_candidates(db, per_subcategory=per_subcategory, seed=seed, analysis=analysis)
            t2 = time.perf_counter()
            print(
                f"{n:>7} {t1 - t0:>10.2f} {t2 - t1:>11.2f} {t2 - t0:>8.2f} {len(report.candidates):>8} "
                f"{(t2 - t0) / n:>10.4f}"
            )
    return 0


def default_dbs(tmp: Path) -> list[Path]:
    dbs = [write_demo_db(tmp / "university.sqlite")]
    dbs += sorted((SHARED / "spider" / "database").glob("*/*.sqlite"))
    hero = SHARED / "bird" / "dev_databases" / "superhero" / "superhero.sqlite"
    if hero.is_file():
        dbs.append(hero)
    return dbs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-subcategory", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--db", action="append", type=Path, help="database file (repeatable); default: demo + Spider dev + superhero"
    )
    ap.add_argument("--wide", type=int, nargs="+", help="table counts of synthetic wide databases (scaling run)")
    ap.add_argument("--smoke", action="store_true", help="seconds-long check: the demo database once")
    args = ap.parse_args(argv)
    if args.smoke:
        args.repeat, args.wide = 1, None
    if args.wide:
        return scaling(args.wide, args.per_subcategory, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        dbs = args.db or (default_dbs(Path(tmp))[:1] if args.smoke else default_dbs(Path(tmp)))
        header = f"{'database':<30} {'tables':>6} {'subcats':>7} {'questions':>9} {'records':>7} {'median s':>9} {'records/s':>10}"
        print(header)
        print("-" * len(header))
        tot_records, tot_time, tot_cov = 0, 0.0, []
        for db in dbs:
            times, report = [], None
            for _ in range(max(1, args.repeat)):
                t0 = time.perf_counter()
                report = generate_candidates(db, per_subcategory=args.per_subcategory, seed=args.seed)
                times.append(time.perf_counter() - t0)
            med = statistics.median(times)
            records = len(report.candidates)
            questions = len({c.group_id for c in report.candidates})
            tables = len({t for t in _tables(db)})
            tot_records += records
            tot_time += med
            tot_cov.append(len(report.covered))
            print(
                f"{report.db_id:<30} {tables:>6} {len(report.covered):>4}/13 {questions:>9} {records:>7} {med:>9.3f} {records / med if med else 0:>10.1f}"
            )
        print("-" * len(header))
        avg_cov = sum(tot_cov) / len(tot_cov) if tot_cov else 0
        print(
            f"{'TOTAL (' + str(len(dbs)) + ' dbs)':<30} {'':>6} {avg_cov:>7.2f} {'':>9} {tot_records:>7} {tot_time:>9.3f} "
            f"{tot_records / tot_time if tot_time else 0:>10.1f}"
        )
        print(f"average subcategories covered per database: {avg_cov:.2f} / 13")
    return 0


def _tables(db: Path) -> list[str]:
    return [t.name for t in inspect_database(db).tables]


if __name__ == "__main__":
    sys.exit(main())
