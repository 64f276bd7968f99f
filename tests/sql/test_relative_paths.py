"""Issue 23 item 3: a relative database path means the caller's working directory, also after it
crosses into the SQL worker process (which runs with the repository as its working directory)."""

import os
import shutil
import subprocess
import sys

import pytest

from resources.sql import QueryResult, execute_sql

pytestmark = pytest.mark.integration


def _copy_here(demo_db_path, tmp_path, monkeypatch):
    folder = tmp_path / "elsewhere" / "seeds"
    folder.mkdir(parents=True)
    shutil.copy(demo_db_path, folder / "uni.sqlite")
    monkeypatch.chdir(tmp_path / "elsewhere")
    return "seeds/uni.sqlite"


def test_worker_opens_relative_path_from_callers_cwd(demo_db_path, tmp_path, monkeypatch):
    monkeypatch.delenv("QUANDARY_SQL_IN_PROCESS", raising=False)
    rel = _copy_here(demo_db_path, tmp_path, monkeypatch)
    out = execute_sql(rel, "SELECT COUNT(*) FROM departments", timeout_s=20)
    assert isinstance(out, QueryResult), out
    assert out.rows[0][0] > 0


def test_cli_sql_and_generate_from_another_folder(demo_db_path, tmp_path, monkeypatch):
    rel = _copy_here(demo_db_path, tmp_path, monkeypatch)
    env = dict(os.environ)
    env.pop("QUANDARY_SQL_IN_PROCESS", None)
    cli = [sys.executable, "-c", "import sys; from cli import main; sys.exit(main(sys.argv[1:]))"]
    r = subprocess.run(
        cli + ["sql", rel, "SELECT COUNT(*) FROM departments"], capture_output=True, text=True, env=env, timeout=120
    )
    assert r.returncode == 0, r.stderr
    here = subprocess.run(
        cli + ["generate", "programmatic", rel, "--json"], capture_output=True, text=True, env=env, timeout=300
    )
    absolute = subprocess.run(
        cli + ["generate", "programmatic", os.path.abspath(rel), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert here.returncode == 0 and absolute.returncode == 0, here.stderr + absolute.stderr
    assert len(here.stdout.splitlines()) == len(absolute.stdout.splitlines()) > 3
