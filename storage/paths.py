"""Where Quandary keeps its state: one folder, ``$QUANDARY_HOME`` (default ``<project>/.quandary``),
and one Dagster instance, ``$DAGSTER_HOME`` (default ``<project>/.dagster_home``).

Both default to the project checkout, not the working directory, so the CLI from any folder and
``make ui`` see the same runs and artifacts (the Makefile exports the same two paths).

Layout::

    artifacts/<asset>/<partition>/<content-hash>.parquet   versioned artifacts (storage/)
    artifacts/<asset>/<partition>/LATEST                    pointer to the latest version
    llm_calls.sqlite                                        LLM call cache + log (council layer)
    audit.duckdb                                            audit catalog (views over artifacts)
    databases/                                              generated seed databases (demo)
"""

import os
from pathlib import Path


PROJECT_ROOT = Path(__file__).resolve().parents[1]
DAGSTER_YAML = "telemetry:\n  enabled: false\n"


def quandary_home() -> Path:
    home = Path(os.environ.get("QUANDARY_HOME") or PROJECT_ROOT / ".quandary").resolve()
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


_exported_home: str | None = None


def dagster_home() -> tuple[Path, str]:
    """The Dagster instance folder and where its path came from ("DAGSTER_HOME" or "project default").

    Creates it with telemetry off when missing, and exports ``DAGSTER_HOME`` so Dagster (and any
    process started from here) opens the same instance.
    """
    global _exported_home
    env = os.environ.get("DAGSTER_HOME")
    if env and env == _exported_home:
        env = None  # we exported it ourselves earlier in this process: still the project default
    home = Path(env).expanduser().resolve() if env else PROJECT_ROOT / ".dagster_home"
    home.mkdir(parents=True, exist_ok=True)
    yaml_path = home / "dagster.yaml"
    if not yaml_path.exists():
        yaml_path.write_text(DAGSTER_YAML)
    os.environ["DAGSTER_HOME"] = str(home)
    if not env:
        _exported_home = str(home)
    return home, ("DAGSTER_HOME" if env else "project default")
