"""AI-operator SQL benchmarks (needs ../shared/data/sembench).

    .venv/bin/python bench/bench_aisql.py [--latency 0.05] [--pairs 12] [--smoke]

``--smoke``: 2 pairs and a 1 ms stub, both measurements once (seconds; ``make test`` runs it).

1. **Operator calls per judged pair, with and without the shared cache.** Split execution of
   movie variant pairs (gold + candidate + 2 structural + AI parts + probe set) on the label
   oracle; "without" gives every query its own empty memo, as if nothing were shared.
2. **Movie Q3 wall time, 16 calls in flight vs one at a time**, with the AI operator answered by a
   loopback OpenAI-compatible stub that takes ``latency`` seconds per request (council layer,
   structured output, call log; a fresh log per run so nothing is cached).
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipelines.aisql.evalset import build_pairs  # noqa: E402
from pipelines.aisql.execute import run_query  # noqa: E402
from pipelines.aisql.operators import AIRuntime, CouncilOperator, LabelOracle  # noqa: E402
from pipelines.aisql.pipeline import prepare_db  # noqa: E402
from pipelines.aisql.scenarios import MOVIE, load_labels, load_queries, visible_columns  # noqa: E402
from pipelines.aisql.split_execution import EvalContext, execute_pair, table_columns_of  # noqa: E402
from resources.llm import Council  # noqa: E402
from resources.llm.config import Member  # noqa: E402
from resources.llm.registry import call_log  # noqa: E402
from tests.llm_fakes import StubOpenAIServer, StubScript  # noqa: E402

DATA = REPO.parent / "shared" / "data"


def calls_per_pair(n_pairs: int) -> tuple[float, float, int]:
    db = prepare_db("movie", DATA, Path(os.environ["QUANDARY_HOME"]))
    golds = [g for g in load_queries("movie", DATA) if g.question_id in ("Q2", "Q3", "Q4", "Q8")]
    pairs = build_pairs("movie", DATA, golds).head(n_pairs)
    labels = load_labels(db.labels_path)

    class Unshared(AIRuntime):  # every query starts from an empty memo
        def begin(self, *args, **kwargs):
            self.memo.clear()
            return super().begin(*args, **kwargs)

    out = []
    for cls in (AIRuntime, Unshared):
        rt = cls(LabelOracle(labels, MOVIE.vocabulary, p=0.1, score_of=MOVIE.score_of))
        ctx = EvalContext(db.path, rt, MOVIE.key_columns(), table_columns_of(visible_columns(db.path)))
        for p in pairs.iter_rows(named=True):
            execute_pair(ctx, p["gold_sql"], p["candidate_sql"], p["dialect"])
        out.append(rt.totals.made / pairs.height)
        rt.close()
    return out[0], out[1], pairs.height


def q3_wall(latency: float, in_flight: int) -> tuple[float, int]:
    db = prepare_db("movie", DATA, Path(os.environ["QUANDARY_HOME"]))
    sql = (DATA / "sembench" / "files" / "movie" / "query" / "bigquery" / "Q3.sql").read_text()
    with StubOpenAIServer(StubScript(latency_s=latency, content='{"answer": true}')) as stub:
        member = Member(
            name=f"stub{in_flight}",
            model="openai/stub",
            api_base=stub.base_url,
            max_in_flight=in_flight,
            max_retries=0,
            timeout_s=30,
            structured_output="prompt",
        )
        log = call_log(Path(tempfile.mkdtemp()) / "calls.sqlite")
        rt = AIRuntime(CouncilOperator(Council("ai_operator", [member], log)))
        t0 = time.perf_counter()
        rec = run_query(db.path, sql, "bigquery", rt)
        wall = time.perf_counter() - t0
        rt.close()
    assert rec.ok, rec.error
    return wall, rec.made


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--pairs", type=int, default=12)
    ap.add_argument("--smoke", action="store_true", help="2 pairs, a 1 ms stub: seconds")
    args = ap.parse_args()
    if args.smoke:
        args.pairs, args.latency = 2, 0.001
    if not (DATA / "sembench").is_dir():
        print(f"SKIP: SemBench data not found at {DATA / 'sembench'}")
        return 0
    os.environ["QUANDARY_HOME"] = tempfile.mkdtemp(prefix="quandary-bench-aisql-")
    shared, unshared, n = calls_per_pair(args.pairs)
    print(
        f"operator calls per judged pair (label oracle, {n} movie pairs): "
        f"shared cache {shared:.0f}, without sharing {unshared:.0f} ({unshared / max(shared, 1):.1f}x)"
    )
    print(
        f"movie Q3 (119 distinct calls) against a loopback stub at {args.latency * 1000:.0f} ms/request, "
        f"{os.cpu_count()} CPUs:"
    )
    for level in (1, 16):
        wall, made = q3_wall(args.latency, level)
        print(f"  {level:>2} in flight: {wall:6.2f} s for {made} calls (ideal {made * args.latency / level:5.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
