"""End to end on the real embedded SmolLM2: the LLM asker and the LLM solver on a two-record
Ambrosia slice with the deterministic oracle, through a real Dagster run.

The tiny model's questions and SQL are mostly poor; what this asserts is the path a real model
takes (prompts, structured output, the council's cache and log, budget, fallback handling,
verification, metrics), not the scores.
"""

import json
import re

import polars as pl
import pytest

from cli import main
from resources.llm import reset_councils
from storage.artifacts import read_latest
from storage.audit import open_audit

pytestmark = pytest.mark.e2e


def test_embedded_asker_and_solver_on_an_ambrosia_slice(stored_corpus, capsys, tmp_path, monkeypatch):
    # the embedded model in every role (a `default` council fills askers / solvers); generous
    # timeouts because the shared 2-core machine can be heavily loaded
    cfg = tmp_path / "council.yaml"
    cfg.write_text(
        json.dumps(
            {
                "members": {
                    "smollm2": {
                        "model": "openai/smollm2",
                        "api_base": "embedded",
                        "temperature": 0.0,
                        "max_tokens": 256,
                        "seed": 0,
                        "max_in_flight": 2,
                        "timeout_s": 900,
                        "max_retries": 1,
                    }
                },
                "councils": {"default": ["smollm2"]},
            }
        )
    )
    monkeypatch.setenv("QUANDARY_COUNCIL_CONFIG", str(cfg))
    reset_councils()
    stored_corpus("ambrosia")
    args = [
        "ambitab",
        "eval",
        "--corpus",
        "ambrosia",
        "--asker",
        "llm",
        "--seeds",
        "1",
        "--limit",
        "2",
        "--no-diagnostics",
        "--concurrency",
        "2",
    ]
    assert main(args) == 0, capsys.readouterr().err
    # Table 8 rows lead with corpus | solver | oracle | asker (the solver is part of the condition)
    assert re.search(r"\| ambrosia \| [^|]+ \| det_intent \| llm \(checklist_ledger\) \|", capsys.readouterr().out)

    eps = read_latest("ambitab_episodes", "ambrosia")
    llm = eps.filter(pl.col("asker") == "llm")
    assert eps.height == llm.height >= 2  # the slice's whole AVT, one seed
    assert eps["verdict"].is_not_null().all()  # every SQL was executed and scored (0 or 1)
    for row in llm.iter_rows(named=True):
        turns = json.loads(row["turns_json"])
        assert len(turns) <= row["n_amb"] + 2
        assert all(t["response"] for t in turns)  # the deterministic oracle answered or refused
        assert row["asker_call_ids"] and row["solver_call_id"]
    con = open_audit()
    logged = dict(con.execute("SELECT call_id, tag_stage FROM llm_calls").fetchall())
    con.close()
    # every asker decision and solver answer is a logged call (readings of one AVT share the spec,
    # so their identical prompts are served once and then from the cache)
    assert {logged[c] for c in eps["solver_call_id"].to_list()} == {"ambitab_solver"}
    assert {logged[c] for ids in llm["asker_call_ids"].to_list() for c in ids} == {"ambitab_asker"}
    n_calls = len(logged)

    assert main(args) == 0  # a rerun: every episode is stored, no model call
    con = open_audit()
    assert con.execute("SELECT count(*) FROM llm_calls").fetchall()[0][0] == n_calls
    con.close()
    reset_councils()
