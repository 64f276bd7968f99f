"""The one Dagster ``Definitions`` object (loaded by workspace.yaml): the merge of one slice per job.

Each folder under ``assets/`` is a slice, Dagster's ``defs``-folder convention: its assets, config,
partitions, checks, jobs and job-specific resources, exported as ``defs`` from its
``definitions.py``. A newcomer opens one folder to see everything Dagster knows about a job.

    shared/      IO manager + resources every job uses (catalog, safe SQL, council)
    databases/   seed databases and their prompt context (used by abiss and interaction)
    abiss/       job 1: generate + validate a benchmark (ABISS §3–4)
    interaction/ job 2: evaluate agents in dialogues (ABISS §5)
    ambitab/     job 3: convert corpora + evaluate asking policies (AmbiTab)
    aisql/       job 4: judge AI-operator SQL by splitting it (The Stochastic Shift)
    benchmark_audit/ job 5: audit someone else's benchmark (Spider / BIRD gold, issue 32)
"""

from resources.startup import heavy_imports

# Every process that loads the Definitions (the CLI, code servers, run workers, the webserver)
# imports Dagster and the five jobs here: seconds of CPU, a fifth of it the garbage collector's
with heavy_imports():
    from dagster import Definitions

    from assets.abiss import definitions as abiss
    from assets.aisql import definitions as aisql
    from assets.ambitab import definitions as ambitab
    from assets.benchmark_audit import definitions as benchmark_audit
    from assets.databases import definitions as databases
    from assets.interaction import definitions as interaction
    from assets.shared import definitions as shared
    from assets.shared.pool_wait import pool_aware_in_process_executor

MAIN_JOB = abiss.abiss_job.name

defs = Definitions.merge(
    shared.defs,
    databases.defs,
    abiss.defs,
    interaction.defs,
    ambitab.defs,
    aisql.defs,
    benchmark_audit.defs,
    # One process: the embedded LLM server and the call-log connection are per process, and the
    # work is LLM-bound (concurrency lives inside each stage, bounded per council member).
    # The executor installs the pool-wait fix when a run starts (never on import; see pool_wait.py).
    Definitions(executor=pool_aware_in_process_executor),
)
