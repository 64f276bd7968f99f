"""Issue 45 item 5: a really full disk (a tiny tmpfs as QUANDARY_HOME) gives `aisql evaluate` and
`import` one line naming the file, the cause and the remedy — no traceback, no temporary file left.
Needs permission to mount a tmpfs (root in the workplace); skipped elsewhere."""

import json
import os
import subprocess
import uuid
from pathlib import Path

import polars as pl
import pytest

from pipelines.abiss.outputs import to_abiss_records
from tests.cli.conftest import QUANDARY, REPO

pytestmark = pytest.mark.integration


@pytest.fixture
def tiny_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode().strip()[:120]})")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(mount: Path, leave_kb: int) -> None:
    (mount / "fill").unlink(missing_ok=True)
    st = os.statvfs(mount)
    size = max(0, st.f_bavail * st.f_frsize - leave_kb * 1024)
    with (mount / "fill").open("wb") as fh:
        try:
            fh.write(b"\0" * size)
        except OSError:  # full before the last block: as intended
            pass


def _run(args, home: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "QUANDARY_HOME": str(home),
        "DAGSTER_HOME": str(tmp_path / "dagster_home"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_OFFLINE_MODE": "true",
    }
    return subprocess.run([QUANDARY, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def _one_line_and_clean(done: subprocess.CompletedProcess, mount: Path) -> None:
    text = done.stdout + done.stderr
    assert done.returncode != 0 and "Traceback" not in text, text[-3000:]
    assert "no space left on the device (ENOSPC)" in text, text[-3000:]
    leftovers = [p for p in mount.rglob("*") if ".tmp" in p.name or p.name.startswith(".import-staging")]
    assert not leftovers, leftovers


def test_import_on_a_full_disk_is_one_line(tiny_disk, tmp_path):
    from tests.cli.test_import_boundaries import ROW

    records = to_abiss_records(pl.DataFrame(ROW))
    path = tmp_path / "in.json"
    path.write_text(json.dumps([dict(r, question=f"{r['question']} {i}") for i in range(2000) for r in records]))
    for leave_kb in (0, 64):
        _fill(tiny_disk, leave_kb)
        done = _run(["import", str(path)], tiny_disk / "home", tmp_path)
        _one_line_and_clean(done, tiny_disk)
        assert "cannot " in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_aisql_evaluate_on_a_full_disk_is_one_line(tiny_disk, tmp_path, sembench_root):
    from tests.aisql.conftest import movie_query

    gold = movie_query(sembench_root, "bigquery", "Q3")
    row = {"scenario": "movie", "question": "q", "gold_sql": gold, "predicted_sql": gold}
    path = tmp_path / f"p-{uuid.uuid4().hex[:6]}.jsonl"
    path.write_text(json.dumps({"id": 1, **row}) + "\n")
    # full: the input cannot be staged; nearly full: the scenario database cannot be built
    for leave_kb in (0, 16):
        _fill(tiny_disk, leave_kb)
        done = _run(["aisql", "evaluate", str(path), "--data", str(sembench_root)], tiny_disk / "home", tmp_path)
        _one_line_and_clean(done, tiny_disk)


@pytest.fixture
def sembench_root():
    from tests.aisql.conftest import SEMBENCH

    if not SEMBENCH.is_dir():
        pytest.skip(f"SemBench data not found at {SEMBENCH}")
    return SEMBENCH.parents[1]
