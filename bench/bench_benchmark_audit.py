"""The benchmark audit's deterministic checks over real benchmarks (issues 32, 43): counts per check
and error type, weak items apart, the time they take, and precision against people.

    .venv/bin/python bench/bench_benchmark_audit.py [--spider FILE --spider-dbs DIR] [--bird FILE
        --bird-dbs DIR] [--timeout S] [--json OUT] [--examples N] [--labels JSONL] [--smoke]

``--labels`` (default ``tests/fixtures/benchmark_audit_labels.jsonl``): items read by hand, each
``error`` / ``weak`` / ``ok`` with the reason. Printed: per check, the flags on labelled items and
the share of them that are annotation errors (precision); weak items against the items people
called weak; and, from the items drawn at random, the errors the checks miss. ``--smoke``: three
Spider databases and BIRD superhero, in seconds (``make test`` runs it).

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
from pipelines.benchmark_audit.checks import CHECKS, ERROR_TYPES, WEAK_CHECKS  # noqa: E402
from pipelines.benchmark_audit.records import by_database, database_path, file_digest, read_items  # noqa: E402
from resources.catalog import inspect_database  # noqa: E402
from resources.sql import close_workers  # noqa: E402

LABELS = ROOT / "tests" / "fixtures" / "benchmark_audit_labels.jsonl"
SMOKE_DATABASES = ("concert_singer", "flight_2", "student_transcripts_tracking", "superhero")


def audit_file(path: Path, dbs: Path, timeout_s: float, only: tuple[str, ...] = ()) -> tuple[pl.DataFrame, dict]:
    items = read_items(path)
    digest = file_digest(path)
    frames, skipped, per_db_s = [], {}, {}
    start = time.perf_counter()
    for db_id, group in by_database(items).items():
        if only and db_id not in only:
            continue
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
    print(f"weak (correct, but empty here; not flagged): {r['weak']} ({100 * r['weak_rate']:.1f} %)")
    print("| check | type | items |\n|---|---|---:|")
    for c in CHECKS:
        print(f"| {c} | {ERROR_TYPES[c]} | {r[c]} |")
    for c in WEAK_CHECKS:
        print(f"| {c} | weak | {r[c]} |")
    print("| type | items | rate |\n|---|---:|---:|")
    for t in ("E1", "E2", "E3", "E4"):
        print(f"| {t} | {r[t]} | {100 * r[t + '_rate']:.1f} % |")
    for c in CHECKS if examples else ():
        hits = df.filter(pl.col("flags").str.split(",").list.contains(c)).head(examples)
        for row in hits.iter_rows(named=True):
            detail = next(f["detail"] for f in json.loads(row["findings"]) if f["check"] == c)
            print(f"  [{c}] {row['db_id']} #{row['item_index']}: {row['question'][:90]} -- {detail[:160]}")
    return {"info": info, "rates": r}


def _pct(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.0f} %)" if d else "– (none)"


def measure(name: str, df: pl.DataFrame, file_key: str, labels: list[dict]) -> dict:
    """The checks against the people who read the items: precision per check on labelled items,
    weak items against the items called weak, and the errors missed among the random draw."""
    mine = {r["item_index"]: r for r in labels if r["file"] == file_key}
    rows = {r["item_index"]: r for r in df.iter_rows(named=True) if r["item_index"] in mine}
    if not rows:
        print(f"\n### {name}: no labelled item audited here")
        return {}
    flags = {i: set(filter(None, r["flags"].split(","))) for i, r in rows.items()}
    weak = {i: bool(r["weak"]) for i, r in rows.items()}
    label = {i: mine[i]["label"] for i in rows}
    out = {"labelled": len(rows), "per_check": {}}
    print(f"\n### {name}: {len(rows)} labelled items audited ({file_key})")
    print("| check | flags on labelled items | annotation errors (precision) |\n|---|---:|---:|")
    for c in CHECKS:
        hit = [i for i in rows if c in flags[i]]
        if hit:
            right = sum(label[i] == "error" for i in hit)
            out["per_check"][c] = {"flags": len(hit), "errors": right}
            print(f"| {c} | {len(hit)} | {_pct(right, len(hit))} |")
    flagged = [i for i in rows if flags[i]]
    right = sum(label[i] == "error" for i in flagged)
    wrong = sorted(i for i in flagged if label[i] != "error")
    out["flagged"], out["flagged_errors"], out["wrong_flags"] = len(flagged), right, wrong
    print(f"| **any deterministic flag** (items) | {len(flagged)} | {_pct(right, len(flagged))} |")
    if wrong:
        print(f"flags on items people did not call errors: {wrong}")
    called_weak = [i for i in rows if label[i] == "weak"]
    reported_weak = [i for i in rows if weak[i]]
    apart = sum(weak[i] and not flags[i] for i in called_weak)
    out["weak"] = {"called": len(called_weak), "reported_apart": apart, "reported": len(reported_weak)}
    print(
        f"weak items: people called {len(called_weak)} weak, {apart} of them reported weak and not flagged; "
        f"{sum(label[i] == 'weak' for i in reported_weak)} of {len(reported_weak)} reported weak were called weak"
    )
    drawn = [i for i in rows if mine[i]["sample"] == "random"]
    errors = [i for i in drawn if label[i] == "error"]
    missed = [i for i in errors if not flags[i]]
    unflagged_drawn = [i for i in drawn if not flags[i]]
    unflagged_all = int((~df["flagged"]).sum())
    rate = len(missed) / len(unflagged_drawn) if unflagged_drawn else None
    out["random"] = {"drawn": len(drawn), "errors": len(errors), "missed": missed}
    if drawn:
        estimate = f"~{rate * unflagged_all:.0f} of the {unflagged_all} unflagged items" if rate is not None else "–"
        print(
            f"random draw: {len(drawn)} items, {len(errors)} annotation errors, {len(errors) - len(missed)} flagged, "
            f"missed {missed}; estimated missed errors: {_pct(len(missed), len(unflagged_drawn))} of unflagged "
            f"items, {estimate}"
        )
        out["missed_estimate"] = None if rate is None else round(rate * unflagged_all)
    return out


def _label_key(path: Path) -> str:
    """How the labels name a file: its path under ../shared/data (``spider/dev.json``)."""
    try:
        return path.resolve().relative_to(SHARED.resolve()).as_posix()
    except ValueError:
        return path.name


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spider", type=Path, default=SHARED / "spider" / "dev.json")
    ap.add_argument("--spider-dbs", type=Path, default=SHARED / "spider" / "database")
    ap.add_argument("--bird", type=Path, default=SHARED / "bird" / "dev" / "superhero_dev_questions.arcwise.json")
    ap.add_argument("--bird-dbs", type=Path, default=SHARED / "bird" / "dev_databases")
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--examples", type=int, default=0)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--labels", type=Path, default=LABELS, help="hand-read items (JSONL: file, item_index, label)")
    ap.add_argument("--smoke", action="store_true", help=f"only {', '.join(SMOKE_DATABASES)}: seconds")
    args = ap.parse_args()
    labels = [json.loads(x) for x in args.labels.read_text().splitlines() if x.strip()] if args.labels.is_file() else []
    out = {}
    try:
        for name, path, dbs in (
            ("Spider dev", args.spider, args.spider_dbs),
            ("BIRD superhero dev", args.bird, args.bird_dbs),
        ):
            if not path.is_file():
                print(f"skipping {name}: {path} not found (../shared/data is only in the workplace checkout)")
                continue
            df, info = audit_file(path, dbs, args.timeout, SMOKE_DATABASES if args.smoke else ())
            out[name] = report(name, df, info, args.examples)
            out[name]["people"] = measure(name, df, _label_key(path), labels)
    finally:
        close_workers()
    if args.json:
        args.json.write_text(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
