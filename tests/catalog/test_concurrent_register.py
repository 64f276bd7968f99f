"""Item 7: concurrent `db register` keeps every entry; a fresh DAGSTER_HOME survives concurrent first use."""

import os
import sqlite3
import subprocess
import sys

import pytest

from resources.catalog import Catalog
from tests.sql.hostile_sql import REPO_ROOT

pytestmark = pytest.mark.integration  # real processes, servers or files under stress

N = 8
# Each child blocks on stdin until the parent releases all of them at once (an event, not a sleep).
CHILD = (
    "import sys; sys.stdin.read(1); from cli import main; "
    "sys.exit(main(['db', 'register', sys.argv[1], '--db-id', sys.argv[2]]))"
)


def _db(folder, i):
    path = folder / f"db{i}.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t(a INTEGER)")
    con.execute("INSERT INTO t VALUES (?)", (i,))
    con.commit()
    con.close()
    return path


def _release_all(procs):
    for p in procs:
        p.stdin.write(b"g")
        p.stdin.flush()
    for p in procs:
        p.stdin.close()
    return [(p.wait(timeout=300), p.stderr.read().decode()) for p in procs]


def _spawn(paths, env):
    return [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(p), f"db{i}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=REPO_ROOT,
            env=env,
        )
        for i, p in enumerate(paths)
    ]


def test_concurrent_registrations_are_all_kept(tmp_path, isolated_home):
    paths = [_db(tmp_path, i) for i in range(N)]
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    results = _release_all(_spawn(paths, env))
    assert all(rc == 0 for rc, _ in results), results
    assert sorted(Catalog().ids()) == sorted(f"db{i}" for i in range(N))


def test_fresh_dagster_home_survives_concurrent_registrations(tmp_path, isolated_home):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    paths = [_db(tmp_path, i) for i in range(4)]
    results = _release_all(_spawn(paths, {**os.environ, "DAGSTER_HOME": str(home)}))
    assert all(rc == 0 and "Traceback" not in err for rc, err in results), results
    assert sorted(Catalog().ids()) == [f"db{i}" for i in range(4)]
    from dagster import DagsterInstance  # lazy: after the setup above it (environment, monkeypatch or sys.path)

    os.environ["DAGSTER_HOME"] = str(home)
    try:
        parts = DagsterInstance.get().get_dynamic_partitions("databases")
    finally:
        del os.environ["DAGSTER_HOME"]
    assert sorted(parts) == [f"db{i}" for i in range(4)]
