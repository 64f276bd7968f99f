"""AmbiTab corpus assets (thin: call pipelines.ambitab, return tables, report checks).

One multi-asset partitioned by corpus (ambrosia, ambiqt, taco, ew_bird, bird_interact, bird)
materialises two artifacts per corpus:

* ``ambitab_records`` — the task records (:meth:`TaskRecord.to_row` rows), also exported as JSONL
  to ``$QUANDARY_HOME/ambitab/export/<corpus>.jsonl``;
* ``ambitab_rejects`` — the source rows the conversion rejected, with stage and reason.

Checks on the records: the GX contract, |Amb| counting, reference SQL executes where its database
is present, readings of one AVT differ where the paper requires it (all ERROR, blocking: they run
before anything is stored, and a corpus that fails one is neither stored nor exported), and a
WARN check listing every step skipped because a source is missing here. A source file that does
not parse whole fails the build (:class:`~pipelines.ambitab.sources.SourceCorrupt`).
"""

import warnings

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetOut,
    Config,
    DataVersion,
    Failure,
    MetadataValue,
    Output,
    multi_asset,
)
from pydantic import Field

from assets.ambitab.partitions import corpus_partitions  # noqa: E402
from assets.shared.checked_config import check_multi_asset_config_on_launch, op_config
from assets.shared.checks import contract_check_name
from assets.shared.io_manager import path_markdown
from assets.shared.pools import LLM_POOL
from assets.shared.resources import CouncilResource, check_paths_on_launch
from pipelines.ambitab.build import rejects_frame
from pipelines.ambitab.corpora import build_corpus, default_data_root
from pipelines.ambitab.export import export_path
from pipelines.ambitab.record import records_frame, write_jsonl
from pipelines.ambitab.sources import SourceError
from quality.ambitab import (
    AMBITAB_RECORDS,
    AMBITAB_REJECTS,
    amb_count_rule,
    readings_differ_rule,
    reference_executes_rule,
)
from quality.gx_suite import run_contract
from storage.artifacts import content_hash

GROUP = "ambitab"
RECORDS = "ambitab_records"
REJECTS = "ambitab_rejects"
CONVERSION_VERSION = "2"  # bump when a conversion changes: marks the records stale


SKIPPED_CHECK = "ambitab_skipped_steps"
RULE_CHECKS = ("ambitab_amb_count", "ambitab_reference_sql_executes", "ambitab_readings_differ")


class AmbitabBuildConfig(Config):
    """Knobs of the AmbiTab conversions (defaults: the paper's builds on the local data)."""

    data_root: str | None = Field(
        default=None, description="folder holding the source corpora; default $QUANDARY_AMBITAB_DATA or ../shared/data"
    )
    seed: int = Field(default=0, description="build seed (Ambrosia slice, AmbiQT unit draws)")
    llm_steps: str = Field(
        default="auto",
        description="LLM steps (EW-Bird keep/drop filter, Bird authoring): "
        "'on', 'off', or 'auto' = on only when a council config file is set (the embedded "
        "toy model is not used to filter a benchmark); skipped steps are reported",
    )
    max_rows: int | None = Field(default=None, description="cap on source rows for LLM-built corpora (smoke runs)")
    allow_malformed: int = Field(
        default=0,
        ge=0,
        description="source rows that may be unreadable (missing field, duplicate id) before the build fails",
    )


def _check_specs():
    specs = [
        AssetCheckSpec(
            contract_check_name(AMBITAB_RECORDS),
            asset=RECORDS,
            blocking=True,
            description=f"GX suite: {AMBITAB_RECORDS.description}",
        )
    ]
    descriptions = {
        "ambitab_amb_count": "|Amb| counts only critical + knowledge ambiguities",
        "ambitab_reference_sql_executes": "every reading's reference SQL executes where its database is present",
        "ambitab_readings_differ": "readings of one AVT give different results (required for AmbiQT, TACO)",
    }
    specs += [AssetCheckSpec(n, asset=RECORDS, blocking=True, description=descriptions[n]) for n in RULE_CHECKS]
    specs.append(
        AssetCheckSpec(
            contract_check_name(AMBITAB_REJECTS), asset=REJECTS, description=f"GX suite: {AMBITAB_REJECTS.description}"
        )
    )
    specs.append(
        AssetCheckSpec(
            SKIPPED_CHECK,
            asset=RECORDS,
            description=("WARN when a build step could not run here (missing database / file / LLM) — never silent"),
        )
    )
    return specs


@multi_asset(
    outs={
        RECORDS: AssetOut(
            description="AmbiTab task records, one per interpretation",
            code_version=CONVERSION_VERSION,
            group_name=GROUP,
        ),
        REJECTS: AssetOut(
            description="source rows rejected by the conversion, with stage and reason",
            code_version=CONVERSION_VERSION,
            group_name=GROUP,
        ),
    },
    partitions_def=corpus_partitions,
    check_specs=_check_specs(),
    pool=LLM_POOL,
    config_schema=AmbitabBuildConfig.to_fields_dict(),
)
def ambitab_corpus(context: AssetExecutionContext, council: CouncilResource):
    config = AmbitabBuildConfig(**op_config(context))
    corpus = context.partition_key
    data_root = config.data_root or str(default_data_root())
    try:  # issue 34 item 5: the sources folder lies in the project's data roots (multi_asset config
        # cannot carry a launch check: refused at the step's start, before anything is read)
        check_paths_on_launch("data_root")({"data_root": config.data_root})
    except ValueError as exc:
        raise Failure(str(exc)) from None
    if config.llm_steps not in ("auto", "on", "off"):
        raise Failure(f"llm_steps must be auto, on or off (got {config.llm_steps!r})")
    use_llm = config.llm_steps == "on" or (
        config.llm_steps == "auto" and council.council_config().source != "embedded default"
    )
    try:
        result = build_corpus(
            corpus,
            data_root,
            seed=config.seed,
            progress=context.log.info,
            council_factory=council.get_council if use_llm else None,
            max_rows=config.max_rows,
            allow_malformed=config.allow_malformed,
        )
    except SourceError as exc:
        raise Failure(f"{corpus}: {exc}") from exc
    records = records_frame(result.records)
    rejects = rejects_frame(result.rejects)
    # the blocking checks run before anything is stored: a corpus that fails one is neither stored
    # (the last good build stays the latest) nor exported (issue 20)
    outcome = run_contract(AMBITAB_RECORDS, records)
    executes, results = reference_executes_rule(records)
    rules = [amb_count_rule(records), executes, readings_differ_rule(records, results)]
    blocking = (
        [f"{contract_check_name(AMBITAB_RECORDS)} ({'; '.join(outcome.failures[:3])})"] if not outcome.success else []
    )
    blocking += [f"{r.name} ({'; '.join(r.failures[:3])})" for r in rules if not r.passed]
    if blocking:
        raise Failure(f"{corpus}: blocking check(s) failed, records not stored or exported: " + " | ".join(blocking))
    export = write_jsonl(result.records, export_path(corpus))
    by_stage = dict(rejects.group_by("stage").len().sort("stage").iter_rows()) if rejects.height else {}
    skipped = result.skipped_rows()
    stats = {k: v for k, v in result.stats.items() if isinstance(v, (int, float, str))}
    metadata = {
        "records": MetadataValue.int(records.height),
        "avts": MetadataValue.int(records["avt_id"].n_unique() if records.height else 0),
        "with_ambiguities": MetadataValue.int(int((records["n_ambiguities"] > 0).sum()) if records.height else 0),
        "ambiguities": MetadataValue.int(int(records["n_ambiguities"].sum()) if records.height else 0),
        "rejects": MetadataValue.int(rejects.height),
        "rejects_by_stage": MetadataValue.json(by_stage),
        "skipped_steps": MetadataValue.json(skipped),
        "build_stats": MetadataValue.json(stats),
        "jsonl_export": path_markdown(str(export_path(corpus))),
        "exported": MetadataValue.int(export),
    }
    with warnings.catch_warnings():  # `data_version=` is beta; it is the documented way to version content
        warnings.simplefilter("ignore")
        yield Output(records, output_name=RECORDS, data_version=DataVersion(content_hash(records)), metadata=metadata)
    yield Output(
        rejects,
        output_name=REJECTS,
        metadata={"rejects": MetadataValue.int(rejects.height), "by_stage": MetadataValue.json(by_stage)},
    )

    yield AssetCheckResult(
        asset_key=AssetKey(RECORDS),
        check_name=contract_check_name(AMBITAB_RECORDS),
        passed=outcome.success,
        severity=AssetCheckSeverity.ERROR,
        metadata={"failures": MetadataValue.md("\n".join(f"- {f}" for f in outcome.failures) or "none")},
    )
    rej = run_contract(AMBITAB_REJECTS, rejects)
    yield AssetCheckResult(
        asset_key=AssetKey(REJECTS),
        check_name=contract_check_name(AMBITAB_REJECTS),
        passed=rej.success,
        severity=AssetCheckSeverity.ERROR,
        metadata={"failures": MetadataValue.md("\n".join(f"- {f}" for f in rej.failures) or "none")},
    )
    for rule in rules:
        yield AssetCheckResult(
            asset_key=AssetKey(RECORDS),
            check_name=rule.name,
            passed=rule.passed,
            severity=AssetCheckSeverity.ERROR,
            metadata={
                "checked": MetadataValue.int(rule.checked),
                "failures": MetadataValue.md(rule.summary()),
                "notes": MetadataValue.json(rule.notes),
            },
        )
    yield AssetCheckResult(
        asset_key=AssetKey(RECORDS),
        check_name=SKIPPED_CHECK,
        passed=not skipped,
        severity=AssetCheckSeverity.WARN,
        description="; ".join(f"{s['step']}: {s['reason']}" for s in skipped) or "every step ran",
        metadata={
            "skipped": MetadataValue.md(
                "\n".join(f"- **{s['step']}** ({s['affected']} affected): {s['reason']}" for s in skipped) or "none"
            ),
            "n_skipped": MetadataValue.int(len(skipped)),
        },
    )


check_multi_asset_config_on_launch(ambitab_corpus, AmbitabBuildConfig)  # data_root confined before launch (#45)
AMBITAB_ASSETS = [ambitab_corpus]
