"""#31 item 7, #42 item 7: asset pages at 1,366 px in a real headless browser. After a CLI run of the ABISS
job, the webserver's `rejection_report` page renders the funnel and the per-stage table in place
(no "[Show Markdown]" for them), rates to 3 digits, and no community pop-up covers it. The
screenshot is kept beside the test's files (and in $QUANDARY_SCREENSHOTS when set) for a person to
look at. Skips with the reason when no chromium is installed (`make chromium` installs it)."""

import os
import re
import shutil
import signal
import subprocess
import urllib.request
from pathlib import Path

import pytest

from resources.catalog import Catalog
from tests.cli.conftest import SMALL_GRID, GatedStub, council_file, quandary
from tests.dagster.test_webserver import BIN, REPO, free_port, graphql
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e
WIDTH, HEIGHT = 1366, 3000  # the whole metadata table of the page in one image
CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)


def _chromium(*args: str, timeout: int = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            CHROMIUM,
            "--headless=new",
            "--no-sandbox",  # root in a container
            "--disable-gpu",
            "--hide-scrollbars",
            f"--window-size={WIDTH},{HEIGHT}",
            "--virtual-time-budget=30000",  # let the page's scripts fetch and render
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (`make chromium` installs it as root)")
def test_the_asset_page_shows_its_tables_in_place_at_1366px(tmp_path, isolated_home, demo_db_path):
    Catalog().register(demo_db_path, "university")
    home = tmp_path / "dagster_home"
    env = {**os.environ, "DAGSTER_HOME": str(home), "QUANDARY_KEY_STUB": "none"}
    env.pop("QUANDARY_COUNCIL_CONFIG", None)
    (tmp_path / "grid.yaml").write_text(SMALL_GRID)
    with GatedStub() as stub:
        env["QUANDARY_COUNCIL_CONFIG"] = str(council_file(tmp_path / "c.json", stub.url))
        run = quandary("run", "--db", "university", "--grid", str(tmp_path / "grid.yaml"), env=env)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "nux:\n  enabled: false" in (home / "dagster.yaml").read_text()  # the CLI's instance setup

    port = free_port()
    proc = subprocess.Popen(
        [str(BIN / "dagster-webserver"), "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        cwd=REPO,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def loaded():
            try:
                nodes = graphql(port, "{ repositoriesOrError { ... on RepositoryConnection { nodes { name } } } }")
                return nodes["data"]["repositoriesOrError"].get("nodes")
            except (OSError, KeyError, TypeError):
                return None

        wait_until(loaded, 300, "dagster-webserver with the code location", alive=lambda: proc.poll() is None)
        assert graphql(port, "{ shouldShowNux }")["data"]["shouldShowNux"] is False
        url = f"http://127.0.0.1:{port}/assets/rejection_report?partition=university"
        urllib.request.urlopen(url, timeout=30).close()
        shot = tmp_path / "rejection_report_1366.png"
        taken = _chromium(f"--screenshot={shot}", url)
        assert shot.is_file() and shot.stat().st_size > 10_000, taken.stderr[-2000:]
        if os.environ.get("QUANDARY_SCREENSHOTS"):
            Path(os.environ["QUANDARY_SCREENSHOTS"]).mkdir(parents=True, exist_ok=True)
            shutil.copy(shot, Path(os.environ["QUANDARY_SCREENSHOTS"]) / shot.name)
        with open(shot, "rb") as fh:  # PNG header: width and height, big-endian, at bytes 16-24
            head = fh.read(24)
        assert int.from_bytes(head[16:20], "big") == WIDTH
        dom = _chromium("--dump-dom", url).stdout
        (tmp_path / "rejection_report.html").write_text(dom)
        assert "s10_style_confo" in dom and "█" in dom, "the funnel is not rendered in place"
        assert "<td>s03 category</td>" in dom, "the per-stage table is not rendered in place"
        assert "Show Markdown" not in dom.split("per_stage")[1][:3000], "per_stage is behind [Show Markdown]"
        assert not re.search(r">\s*\d+\.\d{4,}\s*<", dom), "a value with more than 3 digits"
        assert "Join the Dagster" not in dom and "community" not in dom.lower(), "a pop-up covers the page"
        _every_asset_page_reads_in_place(port, home, tmp_path)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def _every_asset_page_reads_in_place(port: int, home: Path, tmp_path: Path) -> None:
    """#42 item 7: every asset page the run wrote metadata for, at 1,366 px: nothing behind
    "[Show Markdown]" (the charts' PNGs aside), the dataset preview names the columns it leaves out,
    a stage's decisions are a list whose reasons wrap, the funnel's columns all have headers."""
    from dagster import DagsterInstance

    with DagsterInstance.from_config(str(home)) as instance:
        assets = sorted(k.to_user_string() for k in instance.get_asset_keys())
    assert {"dataset", "s03_category_conformance", "rejection_report"} <= set(assets), assets
    for asset in assets:
        url = f"http://127.0.0.1:{port}/assets/{asset}?partition=university"
        dom = _chromium("--dump-dom", url).stdout
        (tmp_path / f"{asset}.html").write_text(dom)
        assert "Metadata" in dom, f"{asset}: the page did not render its metadata"
        charts = 1 if asset == "rejection_report" else 0  # the funnel's PNG is long Markdown
        assert dom.count("Show Markdown") <= charts, f"{asset}: metadata behind [Show Markdown]"
        if asset == "dataset":
            assert "more column(s), in the artifact" in dom
        if asset.startswith("s03_"):
            assert "<li>" in dom and "rejected" in dom, "the stage's decisions are not a list in place"
        if asset == "rejection_report":
            assert all(f">{header}<" in dom for header in ("stage", "rejected", "kept"))
