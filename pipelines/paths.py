"""Where Quandary keeps its state: one folder, ``$QUANDARY_HOME`` (default ``./.quandary``).

Layout::

    artifacts/<asset>/<partition>/<content-hash>.parquet   versioned artifacts (storage/)
    artifacts/<asset>/<partition>/LATEST                    pointer to the latest version
    llm_calls.sqlite                                        LLM call cache + log (council layer)
    audit.duckdb                                            audit catalog (views over artifacts)
    databases/                                              generated seed databases (demo)
"""

import os
from pathlib import Path


def quandary_home() -> Path:
    home = Path(os.environ.get("QUANDARY_HOME", ".quandary")).resolve()
    home.mkdir(parents=True, exist_ok=True)
    return home


def artifacts_dir() -> Path:
    p = quandary_home() / "artifacts"
    p.mkdir(parents=True, exist_ok=True)
    return p


def llm_calls_path() -> Path:
    return quandary_home() / "llm_calls.sqlite"


def audit_db_path() -> Path:
    return quandary_home() / "audit.duckdb"


def databases_dir() -> Path:
    p = quandary_home() / "databases"
    p.mkdir(parents=True, exist_ok=True)
    return p
