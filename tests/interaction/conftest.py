"""Fixtures shared by the interaction tests: a database past the row cap, a scripted council file."""

import sqlite3
from pathlib import Path

import pytest

from resources.sql.results import DEFAULT_MAX_ROWS
from tests.interaction.helpers import use_council_file


@pytest.fixture(scope="module")
def big_db(tmp_path_factory) -> Path:
    """A table five rows past the executor's row cap (results beyond it are digested, not held)."""
    path = tmp_path_factory.mktemp("big") / "big.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER)")
    con.execute(
        f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {DEFAULT_MAX_ROWS + 5}) "
        "INSERT INTO t SELECT i, i % 7 FROM n"
    )
    con.commit()
    con.close()
    return path


@pytest.fixture
def council_file(tmp_path, monkeypatch):
    """System agent ``sys``; user council (and FB judges) u1-u3."""
    from resources.llm import reset_councils

    councils = {"default": ["sys"], "system_agents": ["sys"], "user_simulator": ["u1", "u2", "u3"]}
    yield use_council_file(tmp_path, monkeypatch, councils)
    reset_councils()
