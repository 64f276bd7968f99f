"""Fixtures for CLI tests that run `quandary` as a user would: a subprocess with its own state
folders, the demo database registered, and a loopback OpenAI-compatible stub whose requests can be
held (to interrupt or kill a run while a call is in flight) — every wait is on an event."""

import contextlib
import hashlib
import io
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from resources.catalog import Catalog
from tests.llm_fakes import LoopbackStub, StubHandler, chat_completion

REPO = Path(__file__).resolve().parents[2]
QUANDARY = str(Path(sys.executable).parent / "quandary")
# One JSON object every ABISS output model accepts (models ignore keys they do not declare).
UNIVERSAL_ANSWER = json.dumps(
    {
        "verdict": "yes",
        "reason": "ok",
        "sql": "SELECT COUNT(*) FROM departments",
        "answerable": False,
        "choice": "A",
        "style": "formal",
        "question": "How many departments are there?",
    }
)
SMALL_GRID = (
    "generators: [programmatic]\nsubcategories: [answerable, lexical_overlap, missing_entity]\n"
    "styles: [formal]\ndifficulties: [moderate]\nn: 1\nseed: 7\n"
)


class GatedStub(LoopbackStub):
    """Answers the first ``answer_first`` requests, then holds every further one until ``release()``
    (and then answers the held requests whose client still waits).
    ``held`` is set when a request is being held; ``answered`` keeps a key per answered request,
    ``requests`` one per request received; ``peak`` is the most requests it had in flight at once.
    Each answer takes ``latency_s`` (a server's simulated slowness, so concurrent clients overlap)."""

    def __init__(self, answer_first: int = 10**9, latency_s: float = 0.0):
        self.answer_first = answer_first
        self.latency_s = latency_s
        self.answered: list[str] = []
        self.requests: list[str] = []
        self.in_flight = self.peak = 0
        self.held = threading.Event()
        self._gate = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        outer = self

        class Handler(StubHandler):
            def do_POST(self):
                req = self.read_json()
                key = hashlib.sha256(
                    json.dumps([req.get("messages"), req.get("seed")], sort_keys=True).encode()
                ).hexdigest()
                with outer._lock:
                    hold = len(outer.answered) >= outer.answer_first and not outer._gate.is_set()
                    outer.requests.append(key)
                    outer.in_flight += 1
                    outer.peak = max(outer.peak, outer.in_flight)
                try:
                    self._answer(key, hold)
                finally:
                    with outer._lock:
                        outer.in_flight -= 1

            def _answer(self, key: str, hold: bool) -> None:
                if hold:
                    outer.held.set()
                    outer._gate.wait(600)
                    # a killed client's request is never answered (a write to its closed socket may
                    # still "succeed"); one still waiting (it was sent just before release) is
                    if self.client_gone():
                        return
                outer._stop.wait(outer.latency_s)
                if not self.send_json(200, chat_completion(UNIVERSAL_ANSWER)):
                    return
                with outer._lock:
                    outer.answered.append(key)

        self._serve(Handler)

    def release(self) -> None:
        self._gate.set()

    def unblock(self) -> None:
        self.release()
        self._stop.set()


def council_file(path: Path, api_base: str, timeout_s: float = 120.0) -> Path:
    member = {
        "model": "openai/stub",
        "api_base": api_base,
        "api_key_env": "QUANDARY_KEY_STUB",
        "temperature": 0.0,
        "max_tokens": 64,
        "seed": 0,
        "max_in_flight": 1,
        "timeout_s": timeout_s,
        "max_retries": 0,
        "backoff_base_s": 0.0,
        "backoff_max_s": 0.0,
    }
    path.write_text(json.dumps({"members": {"stub": member}, "councils": {"default": ["stub"]}}))
    return path


@pytest.fixture
def cli_env(tmp_path, isolated_home, demo_db_path):
    """Environment for `quandary` subprocesses: own QUANDARY_HOME / DAGSTER_HOME, demo db registered."""

    Catalog().register(demo_db_path, "university")
    env = {
        **os.environ,
        "QUANDARY_HOME": str(isolated_home),
        "DAGSTER_HOME": str(tmp_path / "dagster_home"),
        "QUANDARY_KEY_STUB": "none",
        "QUANDARY_PROGRESS": "1",
    }
    env.pop("QUANDARY_COUNCIL_CONFIG", None)
    (tmp_path / "grid.yaml").write_text(SMALL_GRID)
    return env


def quandary(*args, env, cwd=None, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([QUANDARY, *args], env=env, cwd=cwd or REPO, capture_output=True, text=True, timeout=timeout)


def quandary_here(*args, env, cwd=None) -> subprocess.CompletedProcess:
    """`quandary ARGS` run by ``cli.main`` in this process, with ``env`` as the environment and the
    output captured: for a command refused before any run exists, where a separate process is not
    what is tested (each `quandary` process spends ~2.5 s of CPU importing Dagster and the job cards,
    #44). The same parser, checks and messages; only the console script's ``sys.exit`` is left out."""
    from cli import main

    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd or REPO)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as exc:  # argparse's errors and --help
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["quandary", *args], code, out.getvalue(), err.getvalue())


def runs_in(dagster_home: Path) -> list:
    """The runs recorded in a Dagster instance folder (read in this process)."""
    from dagster import DagsterInstance  # lazy: dagster is slow to import (~1 s); only the tests that need it pay

    if not (dagster_home / "dagster.yaml").exists():
        return []  # never created: no run can exist
    with DagsterInstance.from_config(str(dagster_home)) as instance:
        return list(instance.get_runs())
