"""End-to-end orchestration shared by the assets and the CLI (plain Python, no Dagster).

    db      = prepare_db("movie", data_root, sample=None)
    runtime = make_runtime(settings, db)                 # oracle (default) or a council member
    pairs   = build_pairs(...)                            # pipelines.aisql.evalset
    execs, evidence = run_executions(pairs, db, runtime, settings, progress)
    verdicts = run_methods(pairs, execs, evidence, settings, schema_of, progress)
    metrics  = metric_table(pairs, verdicts)

Choices where the paper is silent (docs/aisql.md): the meta-evaluation runs on the
label oracle with flip rate p=0.1 by default (p=0 would make every paraphrase return identical
rows, hiding the stochastic shift EX suffers from); LLM judges are the ``judges`` council.
"""

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from pipelines.aisql.compare import ACCEPT, OPEN, REJECT, UNDECIDED, bound_of, judge_evidence, verdict_class
from pipelines.aisql.diffs import ex_equal
from pipelines.aisql.methods import (
    DETERMINISTIC,
    METHODS,
    JudgeSettings,
    PairVerdict,
    autorate,
    ex_verdict,
    solve,
)
from pipelines.aisql.metrics import METHOD_LABELS, metric_table
from pipelines.aisql.normal_form import schema_of
from pipelines.aisql.operators import AIRuntime, CouncilOperator, KeywordOperator, LabelOracle
from pipelines.aisql.scenarios import (
    ScenarioDB,
    build_scenario_db,
    get_scenario,
    leaked_label_columns,
    load_labels,
    visible_columns,
    visible_types,
)
from pipelines.aisql.split_execution import EvalContext, execute_pair, table_columns_of
from resources.progress import Sink
from resources.sql import open_duckdb_readonly
from storage.charts import png_chart


@dataclass
class AisqlSettings:
    backend: str = "oracle"  # oracle | council | keyword (unit tests)
    flip_rate: float = 0.1
    seed: int = 0
    budget: int = 5000
    sample: int | None = None  # rows per group in the scenario DB (LLM operators)
    sample_groups: tuple[str, ...] | None = None  # with sample: keep only these groups (e.g. taken_3)
    probe_n: int = 100
    methods: tuple[str, ...] = METHODS
    threshold: int = 3
    decision: str = "overall"
    relational_gate: bool = False
    operator_member: str | None = None
    judge_member: str | None = None
    llm_split_fallback: bool = False
    compact_judge: bool = False  # the short judge prompt, for small local models
    timeout_s: float = 600.0  # per query (gold, candidate, parts, probes): `aisql compare/evaluate --timeout`


def aisql_home(home: Path) -> Path:
    p = Path(home) / "aisql"
    p.mkdir(parents=True, exist_ok=True)
    return p


def prepare_db(
    scenario: str,
    data_root: Path,
    home: Path,
    *,
    sample: int | None = None,
    seed: int = 0,
    sample_groups: tuple[str, ...] | None = None,
    rebuild: bool = False,
) -> ScenarioDB:
    """The scenario database (built once per sample/seed/groups; ``rebuild`` rewrites it)."""
    db = build_scenario_db(
        scenario,
        data_root,
        aisql_home(home) / "databases",
        sample=sample,
        seed=seed,
        sample_groups=sample_groups,
        rebuild=rebuild,
    )
    leaked = leaked_label_columns(db.path, get_scenario(scenario))
    if leaked:  # never hand a database with the answer in it to an operator, generator or judge
        raise RuntimeError(f"{db.path}: hidden label columns reachable: {leaked}")
    return db


def council_for(role: str, getter: Callable | None = None):
    """The council for ``role`` (``getter`` e.g. a Dagster CouncilResource's), else the ``default`` council."""
    if getter is None:
        from resources.llm import get_council as getter  # lazy: loads litellm; only without a getter from Dagster
    try:
        return getter(role)
    except KeyError:
        try:
            return getter("default")
        except KeyError:
            raise KeyError(
                f"no council for role {role!r} (and no 'default' council) in the council config; "
                f"add `{role}: [member]` under councils"
            ) from None


def make_runtime(
    settings: AisqlSettings, db: ScenarioDB, flip_rate: float | None = None, getter: Callable | None = None
) -> AIRuntime:
    sc = get_scenario(db.scenario)
    if settings.backend == "oracle":
        p = settings.flip_rate if flip_rate is None else flip_rate
        backend = LabelOracle(load_labels(db.labels_path), sc.vocabulary, p=p, seed=settings.seed, score_of=sc.score_of)
    elif settings.backend == "council":
        backend = CouncilOperator(council_for("ai_operator", getter), settings.operator_member)
    elif settings.backend == "keyword":
        backend = KeywordOperator()
    else:
        raise ValueError(f"unknown operator backend {settings.backend!r}; expected oracle, council or keyword")
    return AIRuntime(backend, budget=settings.budget)


def schema_text(db_path: Path, scenario: str, dialect: str, rows: int = 3) -> str:
    """Label-free schema with sample rows, under the dialect's table names (for judges and generators)."""

    sc = get_scenario(scenario)
    con = open_duckdb_readonly(Path(db_path), threads=1)
    try:
        parts = []
        for t in sc.tables:
            name = f"{sc.bigquery_schema}.{t.bigquery_name}" if dialect == "bigquery" else t.name
            cols = con.execute(f'DESCRIBE main."{t.name}"').fetchall()
            sample = con.execute(
                f'SELECT * FROM main."{t.name}" ORDER BY hash(*COLUMNS(*)) LIMIT {int(rows)}'
            ).fetchall()
            lines = [f"TABLE {name} (" + ", ".join(f"{c[0]} {c[1]}" for c in cols) + ")"]
            for r in sample:
                lines.append("  " + " | ".join((str(v)[:80] if v is not None else "NULL") for v in r))
            parts.append("\n".join(lines))
        return "\n".join(parts)
    finally:
        con.close()


EXECUTION_SCHEMA = {
    "pair_id": pl.String,
    "dialect": pl.String,
    "gold_status": pl.String,
    "candidate_status": pl.String,
    "gold_rows": pl.Int64,
    "candidate_rows": pl.Int64,
    "ex_equal": pl.Boolean,
    "relational_equal": pl.Boolean,
    "structural_verdict": pl.String,
    "n_ai_gold": pl.Int64,
    "n_ai_candidate": pl.Int64,
    "split_error": pl.String,
    "calls": pl.Int64,
    "calls_made": pl.Int64,
    "calls_cached": pl.Int64,
    "elapsed_s": pl.Float64,
    "evidence_json": pl.String,
    # the deterministic layers' judgement of the evidence (compare.judge_evidence: the `layers` method)
    "layers_verdict": pl.String,
    "layers_reason": pl.String,
    "verdict_class": pl.String,
    "bound_k": pl.Int64,
}


def run_executions(
    pairs: pl.DataFrame,
    db: ScenarioDB,
    runtime: AIRuntime,
    settings: AisqlSettings,
    progress: Sink | None = None,
    getter: Callable | None = None,
) -> tuple[pl.DataFrame, dict[str, dict]]:
    """Split execution for every pair (one shared runtime: gold, candidate and parts share calls)."""

    sc = get_scenario(db.scenario)
    fallback = council_for("splitter", getter) if settings.llm_split_fallback else None
    ctx = EvalContext(
        db.path,
        runtime,
        sc.key_columns(),
        table_columns_of(visible_columns(db.path)),
        budget=settings.budget,
        probe_n=settings.probe_n,
        seed=settings.seed,
        split_fallback=fallback,
        timeout_s=settings.timeout_s,
        schema=schema_of(visible_types(db.path)),
    )
    rows, evidence = [], {}
    n = pairs.height
    for i, p in enumerate(pairs.iter_rows(named=True), 1):
        start = time.perf_counter()
        before = (runtime.totals.made, runtime.totals.cached)
        ev = execute_pair(ctx, p["gold_sql"], p["candidate_sql"], p["dialect"])
        d = ev.to_dict()
        d["question"] = p["question"]
        evidence[p["pair_id"]] = d
        sv = ev.structural.verdict if ev.structural is not None else "cannot_decide"
        judged = judge_evidence(ev)
        rows.append(
            {
                "pair_id": p["pair_id"],
                "dialect": p["dialect"],
                "gold_status": ev.gold.status,
                "candidate_status": ev.cand.status,
                "gold_rows": ev.gold.row_count,
                "candidate_rows": ev.cand.row_count,
                "ex_equal": ex_equal(ev.gold, ev.cand, ev.ordered),
                # True / False only when the structural layer decided (None = cannot decide, shown as '–')
                "relational_equal": {"equal": True, "differ": False}.get(sv),
                "structural_verdict": sv,
                "n_ai_gold": len(ev.gold_split.ai_parts),
                "n_ai_candidate": len(ev.cand_split.ai_parts),
                "split_error": "; ".join(e for e in (ev.gold_split.error, ev.cand_split.error) if e),
                "calls": ev.calls,
                "calls_made": runtime.totals.made - before[0],
                "calls_cached": runtime.totals.cached - before[1],
                "elapsed_s": round(time.perf_counter() - start, 3),
                "evidence_json": json.dumps(d, default=str),
                "layers_verdict": judged.final,
                "layers_reason": judged.bad_input
                or "; ".join(
                    f"{v.layer} {v.verdict}: {v.reason}" for v in judged.layers if v.layer in ("structural", "ai")
                ),
                "verdict_class": judged.verdict_class,
                "bound_k": bound_of(judged.verdict_class, ev),
            }
        )
        if progress:
            progress(
                f"executed {i}/{n} pairs; operator calls made {runtime.totals.made}, "
                f"cached {runtime.totals.cached}, failed {runtime.totals.failed}"
            )
    return pl.DataFrame(rows, schema=EXECUTION_SCHEMA) if rows else pl.DataFrame(schema=EXECUTION_SCHEMA), evidence


VERDICT_SCHEMA = {
    "pair_id": pl.String,
    "method": pl.String,
    "accepted": pl.Boolean,
    "status": pl.String,
    "reason": pl.String,
    "raw": pl.String,
    "overall": pl.Int64,
    "relational": pl.Int64,
    "ai": pl.Int64,
    "accepted_all": pl.Boolean,
    "error_source": pl.String,
    "inconsistent": pl.Boolean,
    "call_id": pl.String,
    "verdict_class": pl.String,  # compare.verdict_class of this method's verdict; null in artifacts stored before it
    "bound_k": pl.Int64,  # k of "equivalent up to k rows per table", else null
}


def verdicts_frame(verdicts: list[PairVerdict]) -> pl.DataFrame:
    if not verdicts:
        return pl.DataFrame(schema=VERDICT_SCHEMA)
    return pl.DataFrame([v.row() for v in verdicts], schema=VERDICT_SCHEMA)


def evidence_from(executions: pl.DataFrame) -> dict[str, dict]:
    return {
        r["pair_id"]: json.loads(r["evidence_json"])
        for r in executions.select("pair_id", "evidence_json").iter_rows(named=True)
    }


def run_methods(
    pairs: pl.DataFrame,
    executions: pl.DataFrame,
    evidence: dict[str, dict],
    settings: AisqlSettings,
    schema_of: Callable[[str], str],
    progress: Sink | None = None,
    judges=None,
    advance: Callable[[int], None] | None = None,
) -> pl.DataFrame:
    """Every method's verdict for every pair (EX from the executions; LLM methods via ``judges``).
    ``advance(n)``: n more (pair, method) verdicts done, for a progress bar."""
    out: list[PairVerdict] = []
    execs = {r["pair_id"]: r for r in executions.iter_rows(named=True)}
    dialect = {r["pair_id"]: r["dialect"] for r in pairs.select("pair_id", "dialect").iter_rows(named=True)}
    ids = [pid for pid in pairs["pair_id"].to_list() if pid in execs]
    if "ex" in settings.methods:
        for pid in ids:
            e = execs[pid]
            out.append(ex_verdict(pid, e["gold_status"], e["candidate_status"], e["ex_equal"]))
        if advance:
            advance(len(ids))
    if "layers" in settings.methods:
        out += [layers_verdict(pid, execs[pid]) for pid in ids]
        if advance:
            advance(len(ids))
    llm_methods = [m for m in settings.methods if m not in DETERMINISTIC]
    if llm_methods:
        council = judges or council_for("judges")
        for m in llm_methods:
            if progress:
                progress(f"judging {len(ids)} pairs with {m}")
            if m == "ours":
                js = JudgeSettings(
                    settings.threshold,
                    settings.decision,
                    settings.relational_gate,
                    settings.judge_member,
                    settings.compact_judge,
                )
                items = [(pid, dialect[pid], evidence[pid].get("question", ""), evidence[pid]) for pid in ids]
                out += autorate(council, items, schema_of=schema_of, settings=js)
            else:
                out += solve(
                    council,
                    m,
                    [(pid, dialect[pid], evidence[pid]) for pid in ids],
                    schema_of=schema_of,
                    member=settings.judge_member,
                )
            if advance:
                advance(len(ids))
    for v in out:
        if v.verdict_class is None and v.method != "layers":
            final = UNDECIDED if v.status != "ok" else ACCEPT if v.accepted else REJECT
            v.verdict_class = verdict_class(final, None, method=v.method)
    return verdicts_frame(out)


STALE_EXECUTIONS = (
    "the stored executions predate the deterministic layers' verdict (#39); materialize aisql_executions again"
)


def layers_verdict(pair_id: str, execution: dict) -> PairVerdict:
    """The `layers` method's verdict from an execution row (compare.judge_evidence ran there): decided
    only on a proof or a witness; 'cannot decide' is status ``undecided``, never a rejection claimed.
    An execution row stored before that column existed has no verdict to give: undecided, saying so."""
    final = execution.get("layers_verdict")
    if final is None:
        return PairVerdict(pair_id, "layers", False, "undecided", STALE_EXECUTIONS, verdict_class=OPEN)
    return PairVerdict(
        pair_id,
        "layers",
        final == ACCEPT,
        "ok" if final in (ACCEPT, REJECT) else "undecided",
        (execution.get("layers_reason") or "")[:500],
        verdict_class=execution.get("verdict_class") or OPEN,
        bound_k=execution.get("bound_k"),
    )


@dataclass
class SweepResult:
    metrics: pl.DataFrame  # metric_table rows plus flip_rate
    verdicts: pl.DataFrame = field(default_factory=pl.DataFrame)


def flip_rate_sweep(
    pairs: pl.DataFrame,
    db: ScenarioDB,
    settings: AisqlSettings,
    schema_of,
    rates=(0.0, 0.1, 0.2, 0.3),
    progress: Sink | None = None,
    judges=None,
    getter: Callable | None = None,
) -> SweepResult:
    """Accuracy of every method as the label oracle gets noisier (p from 0 to 0.3)."""

    frames = []
    for p in rates:
        runtime = make_runtime(settings, db, flip_rate=p, getter=getter)
        try:
            execs, ev = run_executions(pairs, db, runtime, settings, None, getter=getter)
        finally:
            runtime.close()
        verdicts = run_methods(
            pairs,
            execs,
            ev,
            settings,
            schema_of,
            None,
            judges=judges or council_for("judges", getter)
            if any(m not in DETERMINISTIC for m in settings.methods)
            else None,
        )
        frames.append(metric_table(pairs, verdicts).with_columns(pl.lit(float(p)).alias("flip_rate")))
        if progress:
            progress(f"sweep: p={p:g} done ({len(frames)}/{len(rates)})")
    return SweepResult(pl.concat(frames, how="vertical_relaxed") if frames else pl.DataFrame())


def sweep_png(metrics: pl.DataFrame, path: Path, title: str = "") -> Path:
    """Each method's accuracy against the oracle flip rate, one line per (method, dialect)."""

    with png_chart(path, figsize=(7, 4.2), dpi=110) as ax:
        for (method, dialect), grp in metrics.group_by(["method", "dialect"], maintain_order=True):
            g = grp.sort("flip_rate")
            ax.plot(
                g["flip_rate"].to_list(),
                [100 * (v or 0) for v in g["accuracy"].to_list()],
                marker="o",
                label=f"{METHOD_LABELS.get(method, method)} [{dialect}]",
            )
        ax.set_xlabel("label-oracle flip rate p (AI-operator noise)")
        ax.set_ylabel("accuracy (%)")
        ax.set_ylim(0, 105)
        ax.set_title(title or "Meta-evaluation accuracy vs AI-operator noise")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, loc="lower left")
    return Path(path)
