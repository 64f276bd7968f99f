"""The benchmark audit's card (issue 32): one run per (benchmark file, database)."""

from assets.benchmark_audit.assets import (
    COUNCIL,
    FINDINGS,
    BenchmarkAuditConfig,
    CouncilAuditConfig,
    split_partition,
)
from assets.benchmark_audit.definitions import benchmark_audit_council_job, benchmark_audit_job
from assets.shared.cards import JobCard, Plan, council, op_config, op_values
from assets.shared.checked_config import allow_user_paths
from pipelines.benchmark_audit.audit import rates
from pipelines.benchmark_audit.council_checks import calls_bound
from pipelines.benchmark_audit.records import BenchmarkFileError, read_items
from pipelines.benchmark_audit.report import rates_markdown
from storage.stores import latest_frame


def config(**values) -> dict:
    """Run config from plain values (BenchmarkAuditConfig fields; None = the default). The CLI's
    user's file and database folder become read roots of this process (#45 item 1)."""
    allow_user_paths(values, "benchmark_path", "dbs_dir")
    return op_config(FINDINGS, BenchmarkAuditConfig, values)


def estimate(partition: str, run_config: dict | None, council_path: str | None = None) -> Plan | None:
    """The database's items, each executed once plus a probe per LIMIT and per contradicted
    evidence literal; no LLM call."""
    values = op_values(run_config, FINDINGS)
    if "benchmark_path" not in values:
        return None
    _, db_id = split_partition(partition)
    try:
        n = sum(1 for i in read_items(values["benchmark_path"]) if i.db_id == db_id)
    except BenchmarkFileError:
        return None
    stored = latest_frame(FINDINGS, partition)
    done = 0 if stored is None else stored.height
    return Plan(
        items=f"{n} gold items of {db_id} (deterministic checks)",
        calls=0,
        detail=f"{done} rows stored for this partition are reused where the item is unchanged" if done else "",
    )


def summary(result, partition: str) -> list[str]:
    """The database's rates by type."""
    df = latest_frame(FINDINGS, partition)
    events = result.asset_materializations_for_node(FINDINGS)
    if df is None or not events:
        return []
    digest = events[-1].metadata["benchmark_sha256"].value  # this run's file, not an older version's rows
    r = rates(df.filter(df["benchmark_sha256"] == digest))
    return rates_markdown(r.filter(r["db_id"] != "ALL")).splitlines()


CARD = JobCard(
    job=benchmark_audit_job, partitions="a benchmark file's database", config=config, estimate=estimate, summary=summary
)


def council_config(**values) -> dict:
    """Run config of the council checks (CouncilAuditConfig fields; None = the default)."""
    allow_user_paths(values, "benchmark_path", "dbs_dir")
    return op_config(COUNCIL, CouncilAuditConfig, values)


def council_estimate(partition: str, run_config: dict | None, council_path: str | None = None) -> Plan | None:
    """At most one call per validator, item and check; the call log's answers are reused."""
    values = op_values(run_config, COUNCIL)
    if "benchmark_path" not in values:
        return None
    cfg = CouncilAuditConfig(**values)
    _, db_id = split_partition(partition)
    try:
        items = [i for i in read_items(cfg.benchmark_path) if i.db_id == db_id]
    except BenchmarkFileError:
        return None
    members = council(council_path).councils.get("validators", [])
    calls = calls_bound(items, len(members), cfg.checks, cfg.max_probes)
    return Plan(
        items=f"{len(items)} gold items of {db_id} × {len(cfg.checks)} council checks",
        calls=calls,
        bound=True,
        role="validators",
        detail=f"{len(members)} validators; short-circuit votes ask fewer",
        shrink="--council-checks council_gold_unsatisfying --databases ONE",
    )


def council_summary(result, partition: str) -> list[str]:
    events = result.asset_materializations_for_node(COUNCIL)
    if not events:
        return []
    meta = {k: v.value for k, v in events[-1].metadata.items()}
    checks = sorted({k.rsplit("_", 1)[0] for k in meta if k.endswith("_undecided")})
    return [
        f"  {c:<27} flag {meta[c + '_flag']}, pass {meta[c + '_pass']}, undecided {meta[c + '_undecided']} (council)"
        for c in checks
    ]


COUNCIL_CARD = JobCard(
    job=benchmark_audit_council_job,
    partitions="a benchmark file's database",
    config=council_config,
    estimate=council_estimate,
    summary=council_summary,
)
