"""Tokens per embedded call before/after #24 item 1 (schema-bounded free text, max_tokens sized to
the schema), on the demo's own calls: step 1 generation, step 2 SQL grounding, stage 3 verdicts.

    python bench/bench_embedded_tokens.py            # both modes, one server, fresh call logs
    python bench/bench_embedded_tokens.py --smoke    # seconds (make test): the scripted council

"before" sends the output schema as it is and the member's max_tokens (512), as the code did;
"after" is the current request. Same prompts, seeds and server; only the request shaping differs.
``--smoke`` runs both modes on one grid cell against the scripted council of the pipeline tests
instead of the embedded model: the same steps and call-log reading, no token figure worth reading.
"""

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import resources.llm.client as client  # noqa: E402
from cli.commands.run import DEMO_COUNCIL, DEMO_GRID  # noqa: E402
from pipelines.abiss.demo_db import write_demo_db  # noqa: E402
from pipelines.abiss.generation import generate_nlq_objects, ground_sql  # noqa: E402
from pipelines.abiss.grid import PROGRAMMATIC, GridSpec, expand_grid  # noqa: E402
from pipelines.abiss.stages import StageContext, run_stage  # noqa: E402
from pipelines.sqltools.schema_context import fit_schema_context  # noqa: E402
from resources.catalog import inspect_database  # noqa: E402
from resources.llm import get_council, reset_councils  # noqa: E402
from resources.llm.config import load_council_config, schema_token_budget  # noqa: E402

SMOKE_COUNCIL = """members:
  smollm2: {model: scripted/smollm2, temperature: 0.0, max_tokens: 512, seed: 0, max_in_flight: 4}
councils:
  default: [smollm2]
"""


def run(mode: str, tmp: str, council: Path = DEMO_COUNCIL, subcategories: tuple | None = None) -> dict:
    originals = (client.bounded_schema, client.embedded_max_tokens)
    if mode == "before":
        client.bounded_schema = lambda schema: schema
        client.embedded_max_tokens = lambda member, schema: member.max_tokens
    os.environ["QUANDARY_HOME"] = f"{tmp}/{mode}"
    os.environ["QUANDARY_COUNCIL_CONFIG"] = str(council)
    subs = subcategories or tuple(DEMO_GRID["llm_subcategories"])
    reset_councils()
    try:
        db = write_demo_db(Path(tmp) / f"{mode}.sqlite")
        info = inspect_database(db, "university")
        ctx_text = fit_schema_context(info, schema_token_budget(load_council_config().members.values())).text
        spec = GridSpec(
            ("smollm2",), subs, tuple(DEMO_GRID["styles"]), tuple(DEMO_GRID["difficulties"]), 1, DEMO_GRID["seed"], subs
        )
        requests = [r for r in expand_grid(spec, "university") if r["generator"] != PROGRAMMATIC]
        t0 = time.monotonic()
        objects, _ = generate_nlq_objects(requests, ctx_text, str(db), get_council("generators"))
        rows = ground_sql(objects, ctx_text, get_council("generators"))
        cands = [r for r in rows if r.get("candidate_id")]
        run_stage(3, cands, StageContext(db_path=str(db), schema_context=ctx_text, council=get_council("validators")))
        wall = time.monotonic() - t0
    finally:
        client.bounded_schema, client.embedded_max_tokens = originals
    import sqlite3  # lazy: after the setup above it (environment, monkeypatch or sys.path)

    con = sqlite3.connect(f"{tmp}/{mode}/llm_calls.sqlite")
    calls = con.execute(
        "SELECT tag_stage, prompt_tokens, completion_tokens, latency_ms, status FROM llm_calls"
    ).fetchall()
    con.close()
    by = {}
    for stage, p, c, lat, st in calls:
        by.setdefault(stage, []).append((p, c, lat, st))
    return {
        "mode": mode,
        "wall_s": round(wall, 1),
        "calls": len(calls),
        "completion_tokens_per_call": round(statistics.mean(c[2] for c in calls), 1) if calls else None,
        "prompt_tokens_per_call": round(statistics.mean(c[1] for c in calls), 1) if calls else None,
        "by_stage": {
            s: {
                "calls": len(v),
                "completion_tokens_per_call": round(statistics.mean(x[1] for x in v), 1),
                "median_latency_s": round(statistics.median(x[2] for x in v) / 1000, 1),
                "not_ok": sum(x[3] != "ok" for x in v),
            }
            for s, v in sorted(by.items())
        },
    }


def main() -> int:
    smoke = "--smoke" in sys.argv[1:]
    with tempfile.TemporaryDirectory() as tmp:
        options = {}
        if smoke:
            from tests.abiss.pipeline_helpers import healthy  # lazy: the pipeline tests' scripted council
            from tests.llm_fakes import ScriptedLLM, install

            install(ScriptedLLM(healthy))
            council = Path(tmp) / "council.yaml"
            council.write_text(SMOKE_COUNCIL)
            options = {"council": council, "subcategories": ("answerable",)}
        results = [run(mode, tmp, **options) for mode in ("before", "after")]
        if smoke and not all(r["calls"] and not any(s["not_ok"] for s in r["by_stage"].values()) for r in results):
            print(json.dumps(results), file=sys.stderr)
            return 1
    for r in results:
        print(json.dumps({"bench": "embedded_tokens", "load": [round(x, 1) for x in os.getloadavg()], **r}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
