"""Fixtures shared by the interaction tests: a database past the row cap, a scripted council file."""

import json
import sqlite3
from pathlib import Path

import pytest

from resources.sql.results import DEFAULT_MAX_ROWS


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
    """A council file of scripted members: system agent ``sys``, user council (and FB judges) u1-u3."""
    cfg = tmp_path / "council.yaml"
    member = {"temperature": 0.0, "max_tokens": 64, "seed": 0, "max_in_flight": 8, "timeout_s": 10.0, "max_retries": 0}
    cfg.write_text(
        json.dumps(
            {
                "members": {n: {"model": f"scripted/{n}", **member} for n in ("sys", "u1", "u2", "u3")},
                "councils": {"default": ["sys"], "system_agents": ["sys"], "user_simulator": ["u1", "u2", "u3"]},
            }
        )
    )
    monkeypatch.setenv("QUANDARY_COUNCIL_CONFIG", str(cfg))
    from resources.llm import reset_councils  # lazy: after the environment above is set

    reset_councils()
    yield cfg
    reset_councils()
