"""The ABISS interaction benchmark (§5–§6, Appendix D): plain Python, no Dagster.

Modules: ``modes`` (the four category usage modes), ``fragments`` (gold-SQL fragments with
sqlglot), ``prompts`` (every prompt and output schema), ``agents`` (the council baseline and
custom agents by dotted path), ``user`` (the simulated user council: relevancy vote, grounded
answers, tournament), ``dialogue`` (the turn loop), ``metrics`` (per-conversation scores and the
paper's tables, AIR), ``leakage`` (what the simulated user reveals), ``balance`` (balanced subsets
pooled over databases, stratified caps), ``tables`` (artifact frames and the
reference results-layout export).
"""

from pathlib import Path

from pipelines.core.prompting import source_version

_SOURCES = (
    "prompts.py",
    "agents.py",
    "user.py",
    "dialogue.py",
    "ends.py",
    "metrics.py",
    "same_rows.py",
    "fragments.py",
    "leakage.py",
)
# Code version of the interaction assets: a change to prompts or rules marks them stale in the UI.
PIPELINE_VERSION = source_version(*(Path(__file__).parent / name for name in _SOURCES))
