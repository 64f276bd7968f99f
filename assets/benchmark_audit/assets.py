"""The benchmark audit's asset (issue 32), one partition per (benchmark file, database):
``<benchmark name>.<db_id>``, added by ``quandary audit benchmark`` before its runs.

    benchmark_audit_findings   one row per item: flags, error types, the probes behind them;
                               rates per database and over the file's audited databases so far
                               (metadata and a chart); the flagged items exported for review
    benchmark_audit_council    (its own job, `--council`) the council's verdicts per (item, check),
                               votes with their call ids; LLM-judged, never mixed with the above

Thin: the checks are :mod:`pipelines.benchmark_audit`.
"""

from pathlib import Path

import polars as pl
from dagster import AssetExecutionContext, Config, DynamicPartitionsDefinition, Failure, MetadataValue, asset
from pydantic import Field

from assets.shared.charts import chart_metadata, chart_path
from assets.shared.checked_config import checked_config, op_config
from assets.shared.checks import contract_check_result, contract_check_spec
from assets.shared.io_manager import keyed_output, path_markdown, preview_markdown
from assets.shared.pools import LLM_POOL
from assets.shared.progress import step_progress
from assets.shared.resources import CouncilResource
from pipelines.abiss.prompts import PROMPT_VERSIONS
from pipelines.abiss.stages import StageContext
from pipelines.benchmark_audit.audit import DEFAULT_TIMEOUT_S, audit_database, rates
from pipelines.benchmark_audit.council_checks import calls_bound, council_verdicts
from pipelines.benchmark_audit.records import BenchmarkFileError, database_path, file_digest, read_items
from pipelines.benchmark_audit.report import rates_chart, rates_markdown
from pipelines.benchmark_audit.review import review_rows, write_review
from pipelines.benchmark_audit.verdicts import COUNCIL_CHECKS, DEFAULT_COUNCIL_CHECKS
from pipelines.benchmark_audit.verifier import DEFAULT_MAX_PROBES, VERIFY_VERSION
from pipelines.sqltools.schema_context import fit_schema_context, focused_fitter
from quality.benchmark_audit import BENCHMARK_AUDIT_COUNCIL, BENCHMARK_AUDIT_FINDINGS
from resources.catalog import inspect_database
from storage.paths import artifacts_dir, path_segment
from storage.stores import artifact_store, latest_frame, latest_partitions

FINDINGS = "benchmark_audit_findings"
# a stored row is defined by the file's content and the item's place in it: two files sharing a
# partition (same name, same database) keep both their rows, also when audited at once (#45 item 2)
FINDINGS_KEY = ("benchmark_sha256", "item_index")
COUNCIL_KEY = ("benchmark_sha256", "item_index", "check")
GROUP = "benchmark_audit"
benchmark_partitions = DynamicPartitionsDefinition(name="benchmark_audit_databases")


def partition_key(benchmark: str, db_id: str) -> str:
    return path_segment(f"{benchmark}.{db_id}", "partition key")


def split_partition(key: str) -> tuple[str, str]:
    """``(benchmark name, db_id)`` of a partition key."""
    benchmark, _, db_id = key.partition(".")
    return benchmark, db_id


class BenchmarkAuditConfig(Config):
    """`quandary audit benchmark FILE --dbs DIR`: the file, its database folder, the timeout."""

    benchmark_path: str = Field(description="Spider / BIRD JSON (or JSONL): db_id, question, query|SQL[, evidence]")
    dbs_dir: str = Field(description="folder holding <db_id>/<db_id>.sqlite (or <db_id>.sqlite)")
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, description="seconds each gold query and probe may run")


def stored_rows(benchmark: str, digest: str, skip: str | None = None) -> pl.DataFrame | None:
    """Every stored row of this version of the file (all its audited databases), None when none;
    ``skip``: a partition left out (the one a run is writing)."""
    store = artifact_store()
    frames = []
    for key in latest_partitions(store, FINDINGS):
        if key != skip and split_partition(key)[0] == benchmark:
            df = latest_frame(FINDINGS, key, store)
            if df is not None:
                frames.append(df.filter(pl.col("benchmark_sha256") == digest))
    frames = [f for f in frames if f.height]
    return pl.concat(frames, how="diagonal_relaxed").sort("item_index") if frames else None


def file_rates(benchmark: str, digest: str, fresh: pl.DataFrame, partition: str) -> pl.DataFrame:
    """Rates over every database of this file audited so far (this run's rows for this partition)."""
    others = stored_rows(benchmark, digest, skip=partition)
    return rates(fresh if others is None else pl.concat([others, fresh], how="diagonal_relaxed"))


@asset(
    name=FINDINGS,
    group_name=GROUP,
    partitions_def=benchmark_partitions,
    code_version="1",
    check_specs=[contract_check_spec(BENCHMARK_AUDIT_FINDINGS, FINDINGS)],
    config_schema=checked_config(BenchmarkAuditConfig),  # paths confined before launch (#45 item 1)
    description="One row per gold item of one database of an audited benchmark: the deterministic checks' flags, "
    "error types (E1-E4), probe queries and results, a suggested fix; other files' rows are kept.",
)
def benchmark_audit_findings(context: AssetExecutionContext):
    config = BenchmarkAuditConfig(**op_config(context))
    benchmark, db_id = split_partition(context.partition_key)
    path = Path(config.benchmark_path)
    try:
        items = [i for i in read_items(path) if i.db_id == db_id]
    except BenchmarkFileError as exc:
        raise Failure(str(exc)) from None
    if not items:
        raise Failure(f"{path}: no item of database {db_id!r}")
    db_path = database_path(config.dbs_dir, db_id)
    if db_path is None:
        raise Failure(f"{config.dbs_dir}: no database file for {db_id!r} (<db_id>/<db_id>.sqlite)")
    digest = file_digest(path)
    stored = latest_frame(FINDINGS, context.partition_key)
    with step_progress(context, total=len(items)) as p:  # items checked or reused
        fresh, reused = audit_database(
            items,
            db_path,
            benchmark=benchmark,
            digest=digest,
            schema=inspect_database(db_path, db_id),
            timeout_s=config.timeout_s,
            stored=stored,
            advance=p.advance,
        )
    per_db = rates(fresh)
    overall = file_rates(benchmark, digest, fresh, context.partition_key)
    png = rates_chart(overall, chart_path(context, FINDINGS, overall), f"{benchmark}: flagged items by error type")
    folder = artifacts_dir() / FINDINGS / "exports"
    flagged = review_rows(fresh.filter(pl.col("flagged")))
    exports = [
        write_review(flagged, folder / f"{context.partition_key}-{digest[:12]}.{ext}") for ext in ("jsonl", "csv")
    ]
    row = per_db.filter(pl.col("db_id") == "ALL").row(0, named=True)
    # this run's rows only: the store merges them into the rows stored when it writes (#45 item 2)
    yield keyed_output(
        fresh,
        FINDINGS_KEY,
        items=MetadataValue.int(len(items)),
        reused=MetadataValue.int(reused),
        flagged=MetadataValue.int(row["flagged"]),
        weak=MetadataValue.int(row["weak"]),  # correct but empty here: apart from the flags
        **{t: MetadataValue.int(row[t]) for t in ("E1", "E2", "E3", "E4")},
        **{f"{t}_rate": MetadataValue.float(row[f"{t}_rate"]) for t in ("E1", "E2", "E3", "E4")},
        rates_database=MetadataValue.md(rates_markdown(per_db.filter(pl.col("db_id") != "ALL"))),
        rates_file_so_far=MetadataValue.md(rates_markdown(overall)),
        benchmark_sha256=MetadataValue.text(digest),
        export_jsonl=path_markdown(str(exports[0])),
        export_csv=path_markdown(str(exports[1])),
        source=MetadataValue.text("deterministic checks (no LLM)"),
        preview=MetadataValue.md(
            preview_markdown(fresh.filter(pl.col("flagged")).select("item_index", "flags", "question"))
        ),
        **chart_metadata(png, "flagged items by error type"),
    )
    yield contract_check_result(BENCHMARK_AUDIT_FINDINGS, fresh)


BENCHMARK_AUDIT_ASSETS = [benchmark_audit_findings]


COUNCIL = "benchmark_audit_council"


class CouncilAuditConfig(Config):
    """`quandary audit benchmark ... --council`: which council checks (LLM-judged, reported apart)."""

    benchmark_path: str = Field(description="as the deterministic audit's")
    dbs_dir: str = Field(description="as the deterministic audit's")
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, description="seconds each gold query and member's SQL may run")
    checks: list[str] = Field(
        default=list(DEFAULT_COUNCIL_CHECKS),
        description="council_gold_unsatisfying, council_evidence_unneeded, council_rewrites_differ, council_verifier",
    )
    max_probes: int = Field(default=DEFAULT_MAX_PROBES, ge=0, le=10, description="council_verifier: probes per member")
    context_tokens: int = Field(
        default=6000, description="the schema context's budget in tokens (fitted per gold's tables)"
    )


@asset(
    name=COUNCIL,
    group_name=GROUP,
    partitions_def=benchmark_partitions,
    code_version=f"1-{PROMPT_VERSIONS['s04']}-{PROMPT_VERSIONS['s05']}-{VERIFY_VERSION}",
    pool=LLM_POOL,
    check_specs=[contract_check_spec(BENCHMARK_AUDIT_COUNCIL, COUNCIL)],
    config_schema=checked_config(CouncilAuditConfig),
    description="The council's verdicts on one database's gold items (cascade stages 4 and 5, SQL rewrites): one row "
    "per (item, check) with the votes and their call ids; 'undecided' when the decision rests on failed calls.",
)
def benchmark_audit_council(context: AssetExecutionContext, council: CouncilResource):
    config = CouncilAuditConfig(**op_config(context))
    benchmark, db_id = split_partition(context.partition_key)
    path = Path(config.benchmark_path)
    unknown = sorted(set(config.checks) - set(COUNCIL_CHECKS))
    if unknown:
        raise Failure(f"unknown council check(s) {', '.join(unknown)}; checks: {', '.join(COUNCIL_CHECKS)}")
    try:
        items = [i for i in read_items(path) if i.db_id == db_id]
    except BenchmarkFileError as exc:
        raise Failure(str(exc)) from None
    db_path = database_path(config.dbs_dir, db_id)
    if not items or db_path is None:
        raise Failure(f"{path}: no item of {db_id!r} with a database file in {config.dbs_dir}")
    digest = file_digest(path)
    info = inspect_database(db_path, db_id)
    validators = council.get_council("validators")
    ctx = StageContext(
        db_path=str(db_path),
        schema_context=fit_schema_context(info, config.context_tokens).text,
        council=validators,
        timeout_s=config.timeout_s,
        schema_fitter=focused_fitter(info, config.context_tokens),
    )
    bound = calls_bound(items, ctx.n_members, config.checks, config.max_probes)
    with step_progress(context, total=bound):  # calls count themselves
        verdicts = council_verdicts(items, digest, ctx, config.checks, config.max_probes)
    by_index = {i.index: i for i in items}
    fresh = pl.DataFrame(
        [
            {
                "benchmark": benchmark,
                "benchmark_sha256": digest,
                "db_id": db_id,
                "item_key": by_index[v.item_index].key(),
                "source": "council",
                "members": ",".join(validators.member_names),
                **v.to_row(),
            }
            for v in verdicts
        ],
        schema=COUNCIL_SCHEMA,
    )
    counts = {
        f"{check}_{verdict}": MetadataValue.int(
            fresh.filter((pl.col("check") == check) & (pl.col("verdict") == verdict)).height
        )
        for check in config.checks
        for verdict in ("flag", "pass", "undecided")
    }
    yield keyed_output(
        fresh.sort(list(COUNCIL_KEY)),
        COUNCIL_KEY,
        items=MetadataValue.int(len(items)),
        benchmark_sha256=MetadataValue.text(digest),
        source=MetadataValue.text("council (LLM-judged), never mixed with the deterministic findings"),
        calls=MetadataValue.int(int(ctx.stats["calls"])),
        calls_cached=MetadataValue.int(int(ctx.stats["cached"])),
        calls_failed=MetadataValue.int(int(ctx.stats["call_failed"] + ctx.stats["parse_failed"])),
        **counts,
    )
    yield contract_check_result(BENCHMARK_AUDIT_COUNCIL, fresh)


COUNCIL_SCHEMA = {
    "benchmark": pl.Utf8,
    "benchmark_sha256": pl.Utf8,
    "db_id": pl.Utf8,
    "item_index": pl.Int64,
    "item_key": pl.Utf8,
    "source": pl.Utf8,
    "members": pl.Utf8,
    "check": pl.Utf8,
    "error_type": pl.Utf8,
    "verdict": pl.Utf8,
    "reason": pl.Utf8,
    "votes": pl.Utf8,  # JSON: member, comparison, vote, parsed_ok, llm_call_id
}
BENCHMARK_AUDIT_COUNCIL_ASSETS = [benchmark_audit_council]
