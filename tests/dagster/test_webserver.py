"""A real `quandary demo` run followed by a real Dagster webserver that shows its results."""

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.waiting import wait_until

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def graphql(port: int, query: str) -> dict:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


@pytest.fixture
def dagster_home(tmp_path, monkeypatch):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


def test_demo_then_webserver_shows_materializations(dagster_home, isolated_home):
    env = dict(os.environ)
    demo = subprocess.run(
        [str(BIN / "quandary"), "demo", "--job", "seed_databases_job"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert "materialized seed_databases" in demo.stdout

    port = free_port()
    # start_new_session: `dagster-webserver` spawns a code server; kill the whole group.
    proc = subprocess.Popen(
        [str(BIN / "dagster-webserver"), "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        cwd=REPO,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def up():
            try:
                return urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2)
            except OSError:
                return None

        wait_until(up, 180, "dagster-webserver", alive=lambda: proc.poll() is None)
        query = """{ assetOrError(assetKey: {path: ["seed_databases"]}) {
              ... on Asset { assetMaterializations(limit: 5) { partition runId } } } }"""

        def materializations():  # the code location may still be loading
            return (graphql(port, query).get("data", {}).get("assetOrError") or {}).get("assetMaterializations")

        mats = wait_until(materializations, 120, "the demo's materialization in the UI")
        assert mats[0]["partition"] == "university"
        nodes = graphql(port, "{ assetNodes { assetKey { path } } }")["data"]["assetNodes"]
        keys = {"/".join(n["assetKey"]["path"]) for n in nodes}
        assert {"seed_databases", "schema_context"} <= keys
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
