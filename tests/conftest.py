"""Shared test fixtures: an isolated QUANDARY_HOME per test, the demo database, shared data."""

import os
import signal
import threading
from pathlib import Path

# litellm must never reach for the network during tests (set before anything imports it).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

import pytest  # noqa: E402

from pipelines.abiss.demo_db import write_demo_db

# The LLM fakes' fixtures, for every test folder (a test names them as arguments, never imports them).
from tests.llm_fakes import quandary_home, scripted, transport  # noqa: E402, F401

REPO_ROOT = Path(__file__).resolve().parents[1]
KINDS = ("unit", "integration", "e2e")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "embedded_model: starts the embedded model (its lane under `make test`: one model at a time)"
    )


def lane(item) -> str | None:
    """The xdist lane of a test under `make test` (``--dist loadgroup``), None for the shared pool.

    The tests that start the embedded model share one lane, so at most one model runs at a time
    (each is CPU-bound: two at once starve each other and the rest); the multi-node tests (each a
    PostgreSQL server, a daemon and several runs) share another. Other end-to-end tests (a real
    webserver, a browser) run anywhere: they used to queue behind the embedded model in one lane."""
    if item.get_closest_marker("embedded_model") or "embedded" in item.path.name:
        return "embedded"
    if item.path.parent.name == "distributed":
        return "distributed"
    return None


def pytest_collection_modifyitems(items):
    """Folders are jobs and layers; the kind of a test is a marker. A test marked neither
    ``integration`` nor ``e2e`` is a ``unit`` test (``-m unit`` selects the fast, isolated ones)."""
    for item in items:
        if not any(item.get_closest_marker(kind) for kind in KINDS):
            item.add_marker(pytest.mark.unit)
        name = lane(item)
        if name is not None:
            item.add_marker(pytest.mark.xdist_group(name))


SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


def _sigint_ignored() -> bool:
    try:
        with open("/proc/self/status") as fh:
            mask = next(line for line in fh if line.startswith("SigIgn:")).split()[1]
    except (OSError, StopIteration):
        return False
    return bool(int(mask, 16) & (1 << (signal.SIGINT - 1)))


@pytest.fixture(autouse=True)
def default_sigint():
    """Every test starts with Ctrl-C delivered as KeyboardInterrupt. Something in a long run (seen
    only in the full suite with the embedded model, not pinned down) leaves SIGINT ignored at the
    kernel level, and children inherit an ignored SIGINT: a CLI started by a later test would then
    never see the Ctrl-C that test sends."""
    if _sigint_ignored() and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    home = tmp_path / "quandary_home"
    monkeypatch.setenv("QUANDARY_HOME", str(home))
    # the CLI defaults to the project's own .dagster_home: tests get their own (created on first use)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    monkeypatch.delenv("QUANDARY_COUNCIL_CONFIG", raising=False)
    yield home
    # a CLI run points progress at a duplicate of the terminal; the next test must not inherit it
    from resources import progress

    progress.set_default_stream(None)


@pytest.fixture(scope="session")
def demo_db_path(tmp_path_factory) -> Path:
    path = write_demo_db(tmp_path_factory.mktemp("demo") / "university.sqlite")
    path.chmod(0o444)  # the seed file must never be written by anything under test
    return path


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared benchmark data not found at {SHARED_DATA} (only present in the workplace checkout)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def spider_dbs(shared_data) -> list[Path]:
    paths = sorted((shared_data / "spider" / "database").glob("*/*.sqlite"))
    if not paths:
        pytest.skip("no Spider SQLite databases under ../shared/data/spider/database")
    return paths
