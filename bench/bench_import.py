"""Seconds and peak memory of `quandary import`: one large ABISS JSON file vs the same records in
several files (issue 23 item 9: a 56 MB import took 82 s).

    .venv/bin/python bench/bench_import.py [--mb 56] [--files 10] [--src /path/to/other/checkout] [--smoke]

Records are real gold SQL (Spider dev + BIRD dev, from ../shared/data) repeated under distinct
questions and all 13 subcategories, written as ABISS JSON lists. The small files split the records
by database, so importing them one after another stores the same rows as the one large file.
Each import runs the CLI of ``--src`` (default: this checkout; pass main's checkout for the
"before" column) in a fresh process with a fresh ``QUANDARY_HOME`` and ``DAGSTER_HOME``; peak RSS
is the child's own ``VmHWM``. Where the CLI takes several paths, the small files are also
imported in one call. Every run's stored rows are compared with the first run's. ``--smoke``
(``make test``): 0.1 MB in 2 files, imported as one file and as the 2 files in one call.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT))

from pipelines.abiss.outputs import REFERENCE_CATEGORY  # noqa: E402


def _base_records() -> list[tuple[str, str, str | None, str]]:
    spider = json.loads((SHARED / "spider" / "dev.json").read_text())
    bird = json.loads((SHARED / "bird" / "dev" / "dev.jar.json").read_text())
    return [(r["db_id"], r["question"], None, r["query"]) for r in spider] + [
        (r["db_id"], r["question"], r.get("evidence") or None, r["sql"]) for r in bird
    ]


def make_records(megabytes: float) -> list[dict]:
    """ABISS JSON records totalling about ``megabytes`` MB (indented as `quandary export` writes)."""

    base, subs = _base_records(), list(REFERENCE_CATEGORY)
    out, size = [], 0
    for i in itertools.count():
        db_id, question, evidence, sql = base[i % len(base)]
        name, subname = REFERENCE_CATEGORY[subs[i % len(subs)]]
        rec = {
            "db_id": db_id,
            "question": f"{question} (#{i})",
            "evidence": evidence,
            "sql": sql,
            "category": {"name": name, "subname": subname},
            "question_style": "formal",
            "question_difficulty": "simple",
            "hidden_knowledge": "the user means the latest year",
        }
        out.append(rec)
        size += len(json.dumps(rec, indent=2)) + 4
        if size >= megabytes * 1e6:
            return out


def write_files(records: list[dict], folder: Path, n_files: int) -> tuple[Path, list[Path]]:
    """One file with every record, and ``n_files`` files each holding whole databases."""
    big = folder / "all.json"
    big.write_text(json.dumps(records, indent=2))
    db_ids = sorted({r["db_id"] for r in records})
    bucket = {d: i % n_files for i, d in enumerate(db_ids)}
    small = [folder / f"part{i:02d}.json" for i in range(n_files)]
    for i, path in enumerate(small):
        path.write_text(json.dumps([r for r in records if bucket[r["db_id"]] == i], indent=2))
    return big, small


# The child reports its own peak RSS (VmHWM) at exit: ru_maxrss from wait4 would include this
# process's size at fork time (Linux keeps the larger of the two across exec).
_CHILD = """import atexit, sys
atexit.register(lambda: open(sys.argv[1], "w").write(open("/proc/self/status").read()))
from cli import main
sys.exit(main(sys.argv[2:]))"""


def run_import(src: Path, paths: list[Path], home: Path) -> tuple[float, float]:
    """One `quandary import` of ``paths`` by the CLI of ``src``: (seconds, peak RSS in MB)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(src),
        "QUANDARY_HOME": str(home / "q"),
        "DAGSTER_HOME": str(home / "d"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    (home / "d").mkdir(parents=True, exist_ok=True)
    status = home / "status.txt"
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(status), "import", *map(str, paths)],
        cwd=src,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"import failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    hwm = next(line for line in status.read_text().splitlines() if line.startswith("VmHWM:"))
    return seconds, int(hwm.split()[1]) / 1024


def stored_rows(home: Path) -> dict[str, int]:
    root = home / "q" / "artifacts" / "imported_dataset"
    return {d.name: pl.read_parquet(d / (d / "LATEST").read_text().strip()).height for d in sorted(root.iterdir())}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=56.0)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--src", default=str(ROOT), help="the checkout whose CLI is measured (default: this one)")
    ap.add_argument("--smoke", action="store_true", help="0.1 MB in 2 files (make test)")
    args = ap.parse_args()
    if args.smoke:
        args.mb, args.files = 0.1, 2
        missing = [
            p for p in (SHARED / "spider" / "dev.json", SHARED / "bird" / "dev" / "dev.jar.json") if not p.is_file()
        ]
        if missing:
            print(f"SKIP: {missing[0]} not found")
            return 0
    src = Path(args.src).resolve()
    work = Path(tempfile.mkdtemp(prefix="bench-import-"))
    records = make_records(args.mb)
    big, small = write_files(records, work, args.files)
    mb = big.stat().st_size / 1e6
    help_text = subprocess.run(
        [sys.executable, "-c", "import sys; from cli import main; sys.exit(main(sys.argv[1:]))", "import", "--help"],
        cwd=src,
        env={**os.environ, "PYTHONPATH": str(src)},
        capture_output=True,
        text=True,
    ).stdout
    several = "path [path ...]" in help_text
    print(f"code: {src}; load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(
        f"{len(records)} records, {mb:.1f} MB in one file; {args.files} files of "
        f"{min(p.stat().st_size for p in small) / 1e6:.1f}-{max(p.stat().st_size for p in small) / 1e6:.1f} MB"
    )
    rows = []
    t, rss = run_import(src, [big], work / "one")
    rows.append(("one file, one import", t, rss))
    reference = stored_rows(work / "one")
    if not (args.smoke and several):  # smoke: the split files in one import only (each CLI start costs seconds)
        total, peak = 0.0, 0.0
        for path in small:
            t, rss = run_import(src, [path], work / "each")
            total, peak = total + t, max(peak, rss)
        rows.append((f"{args.files} files, {args.files} imports", total, peak))
        assert stored_rows(work / "each") == reference, "the split files stored other rows"
    if several:
        t, rss = run_import(src, small, work / "together")
        rows.append((f"{args.files} files, one import", t, rss))
        assert stored_rows(work / "together") == reference, "the split files stored other rows"
    print(f"{'what':<26} {'seconds':>8} {'records/s':>10} {'peak RSS MB':>12}")
    for what, t, rss in rows:
        print(f"{what:<26} {t:>8.1f} {len(records) / t:>10.0f} {rss:>12.0f}")
    print(f"stored: {sum(reference.values())} rows in {len(reference)} partitions (same in every run)")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
