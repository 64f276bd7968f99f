"""Issue 45 item 2: two `quandary audit benchmark` processes at once, of two different files that
share one partition (same file name, same database), both keep their rows: the stored rows are
keyed by the file's content hash and merged when the store writes, never from a copy read earlier."""

import hashlib
import json
import os
import subprocess

import pytest

from assets.benchmark_audit.assets import FINDINGS
from storage.stores import latest_frame
from tests.benchmark_audit.conftest import ITEMS, write_shop
from tests.cli.conftest import QUANDARY, REPO

pytestmark = pytest.mark.integration

SLOW = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


def _file(folder, tag: str):
    # the same name in two folders: one partition, two contents; gold queries that run to their
    # deadline keep each audit busy for seconds, so the two runs overlap
    records = [
        {"question_id": i, "db_id": "shop", "question": f"{q} ({tag})", "evidence": e, "SQL": sql}
        for i, (q, sql, e, _) in enumerate(ITEMS)
    ]
    records += [{"db_id": "shop", "question": f"Count forever {k} ({tag})", "SQL": SLOW} for k in range(3)]
    folder.mkdir()
    path = folder / "dev.json"
    path.write_text(json.dumps(records))
    return path, len(records)


def test_two_concurrent_audits_of_one_partition_keep_both_files(tmp_path, isolated_home):
    dbs = tmp_path / "dbs"
    write_shop(dbs / "shop" / "shop.sqlite")
    files = [_file(tmp_path / tag, tag) for tag in ("a", "b")]
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),  # this checkout's code
        "QUANDARY_HOME": str(isolated_home),
        "DAGSTER_HOME": str(tmp_path / "dagster_home"),
    }
    procs = [
        subprocess.Popen(
            [QUANDARY, "audit", "benchmark", str(path), "--dbs", str(dbs), "--timeout", "1"],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for path, _ in files
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, out[-2000:] + err[-2000:]
    stored = latest_frame(FINDINGS, "dev.shop")
    for path, n in files:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        mine = stored.filter(stored["benchmark_sha256"] == digest)
        assert mine.height == n, f"{path}: {mine.height} of its {n} rows stored"
