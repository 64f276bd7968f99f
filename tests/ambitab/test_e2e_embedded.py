"""EW-Bird's keep/drop filter on the real embedded SmolLM2 (one tiny row, two calls).

A one-table database keeps the prompt short enough for 2 cores. The tiny model's SQL is often
wrong; what this asserts is the plumbing (the `solvers` council, structured output, execution on
a real SQLite file, the verdict, the call cache).
"""

import json
import sqlite3

import pytest

from pipelines.ambitab import ewbird

pytestmark = pytest.mark.e2e

CONFIG = """
members:
  smollm2: {model: openai/smollm2, api_base: embedded, temperature: 0.0, max_tokens: 96, seed: 0, max_in_flight: 2}
councils:
  default: [smollm2]
  solvers: [smollm2]
"""


def test_ew_bird_filter_on_embedded_model(tmp_path, monkeypatch):
    root = tmp_path / "data"
    db_dir = root / ewbird.DB_ROOT / "pets"
    db_dir.mkdir(parents=True)
    con = sqlite3.connect(db_dir / "pets.sqlite")
    con.execute("CREATE TABLE pet (name TEXT, kind TEXT)")
    con.executemany("INSERT INTO pet VALUES (?, ?)", [("Rex", "dog"), ("Tom", "cat"), ("Kit", "cat")])
    con.commit()
    con.close()
    (root / ewbird.DEV).parent.mkdir(parents=True)
    (root / ewbird.DEV).write_text(
        json.dumps(
            [
                {
                    "question_id": 1,
                    "db_id": "pets",
                    "question": "How many felines are there?",
                    "evidence": "felines refers to kind = 'cat'",
                    "difficulty": "simple",
                    "sql": "SELECT COUNT(*) FROM pet WHERE kind = 'cat'",
                }
            ]
        )
    )
    cfg = tmp_path / "council.yaml"
    cfg.write_text(CONFIG)
    monkeypatch.setenv("QUANDARY_COUNCIL_CONFIG", str(cfg))
    # lazy: after the setup above it (environment, monkeypatch or sys.path)
    from resources.llm import get_council, reset_councils

    reset_councils()
    try:
        res = ewbird.build(root, council_factory=get_council)
        assert res.stats["executable_rows"] == 1 and res.stats["filter_calls"] == 2
        verdicts = [r.provenance.filter_outcomes["llm_filter"] for r in res.records] + [r.stage for r in res.rejects]
        assert verdicts in (["kept"], ["llm_filter"])  # kept with a benefit, or rejected with the reason
        again = ewbird.build(root, council_factory=get_council)
        assert again.stats["filter_cached"] == 2
    finally:
        reset_councils()
