"""The Dagster UI (a real webserver) on the instance the CLI used: the CLI's run is there, the funnel
chart and table and each stage's decisions are shown in place (not behind "[Show Markdown]"), the
launchpad's config schema flags an unknown style, and launching a run with a value the schema cannot
express (``n: -1``, an unknown generator) is refused with the CLI's message before a run exists."""

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.cli.conftest import REPO, GatedStub, council_file, quandary, runs_in
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e
BIN = Path(sys.executable).parent


def _graphql(port: int, query: str, variables: dict | None = None) -> dict:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query, "variables": variables or {}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:  # a PythonError result comes as HTTP 500 with the JSON body
        body = exc.read()
        try:
            return json.loads(body)
        except ValueError:
            raise AssertionError(f"GraphQL HTTP {exc.code}: {body[:2000]!r}") from None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


METADATA = """query($key: [String!]!) { assetOrError(assetKey: {path: $key}) { ... on Asset {
  assetMaterializations(limit: 1) { runId metadataEntries { __typename label
    ... on MarkdownMetadataEntry { mdStr } } } } } }"""
LAUNCH = """mutation($params: ExecutionParams!) { launchRun(executionParams: $params) { __typename
  ... on PythonError { message } ... on RunConfigValidationInvalid { errors { message } }
  ... on LaunchRunSuccess { run { runId } } } }"""
# ui-core MetadataEntry.tsx renders Markdown in place on the asset page below this length
UI_INLINE_MARKDOWN_CHARS = 1000
REPOS = "{ repositoriesOrError { ... on RepositoryConnection { nodes { name location { name } } } } }"
VALID = """query($selector: PipelineSelector!, $config: RunConfigData) {
  isPipelineConfigValid(pipeline: $selector, mode: "default", runConfigData: $config) { __typename
    ... on RunConfigValidationInvalid { errors { message } } } }"""


def test_ui_shows_cli_run_tables_and_refuses_bad_grid(cli_env, tmp_path):
    with GatedStub() as stub:
        env = {**cli_env, "QUANDARY_COUNCIL_CONFIG": str(council_file(tmp_path / "c.json", stub.url))}
        run = quandary("run", "--db", "university", "--grid", str(tmp_path / "grid.yaml"), env=env)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]

    port = _free_port()
    proc = subprocess.Popen(
        [str(BIN / "dagster-webserver"), "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        cwd=REPO,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def code_location():  # the server, then the code location, come up
            try:
                return _graphql(port, REPOS)["data"]["repositoriesOrError"].get("nodes")
            except (OSError, KeyError, TypeError):
                return None

        repos = wait_until(
            code_location, 300, "dagster-webserver with the code location", alive=lambda: proc.poll() is None
        )
        entries, markdown = {}, {}
        for key in ("rejection_report", "s03_category_conformance"):
            mats = _graphql(port, METADATA, {"key": [key]})["data"]["assetOrError"]["assetMaterializations"]
            assert mats, f"the CLI's run of {key} is not in the UI's instance"
            entries[key] = {e["label"]: e["__typename"] for e in mats[0]["metadataEntries"]}
            markdown.update({(key, e["label"]): e["mdStr"] for e in mats[0]["metadataEntries"] if "mdStr" in e})
        chart = markdown[("rejection_report", "funnel")]
        # stage names are cut so every funnel line fits the metadata column (#31 item 7)
        assert len(chart) < UI_INLINE_MARKDOWN_CHARS and "s10_style_c" in chart and "█" in chart
        assert max(len(line) for line in chart.splitlines()) <= 30
        assert entries["rejection_report"]["funnel_table"] == "TableMetadataEntry"
        assert entries["rejection_report"]["survivors s03_category_conformance"] == "IntMetadataEntry"
        # a stage's decisions: a list whose reasons wrap, in place (a table cut them at 1,366 px, #42 item 7)
        assert entries["s03_category_conformance"]["decisions"] == "MarkdownMetadataEntry"
        decisions = markdown[("s03_category_conformance", "decisions")]
        assert len(decisions) < UI_INLINE_MARKDOWN_CHARS and all(
            line.startswith("- ") for line in decisions.splitlines()
        )

        selector = {
            "pipelineName": "abiss_dataset_job",
            "repositoryName": repos[0]["name"],
            "repositoryLocationName": repos[0]["location"]["name"],
        }
        bad = {"ops": {"generation_requests": {"config": {"styles": ["shouty"]}}}}
        answer = _graphql(port, VALID, {"selector": selector, "config": bad})["data"]["isPipelineConfigValid"]
        assert answer["__typename"] == "RunConfigValidationInvalid"
        assert any("shouty" in e["message"] for e in answer["errors"]), answer
        good = {"ops": {"generation_requests": {"config": {"styles": ["formal"], "difficulties": ["highly complex"]}}}}
        answer = _graphql(port, VALID, {"selector": selector, "config": good})["data"]["isPipelineConfigValid"]
        assert answer["__typename"] == "PipelineConfigValidationValid", answer

        runs_before = len(runs_in(tmp_path / "dagster_home"))
        for grid, needle in (
            ({"n": -1}, "n: must be at least 1 (got -1)"),
            ({"generators": ["gpt9"]}, "generators: unknown generator(s) ['gpt9']"),
        ):
            params = {
                "selector": {k if k != "pipelineName" else "jobName": v for k, v in selector.items()},
                "runConfigData": {"ops": {"generation_requests": {"config": grid}}},
                "mode": "default",
                "executionMetadata": {"tags": [{"key": "dagster/partition", "value": "university"}]},
            }
            launched = _graphql(port, LAUNCH, {"params": params})["data"]["launchRun"]
            assert launched["__typename"] != "LaunchRunSuccess", launched
            assert needle in json.dumps(launched), launched
        assert len(runs_in(tmp_path / "dagster_home")) == runs_before, "a refused launch created a run"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
