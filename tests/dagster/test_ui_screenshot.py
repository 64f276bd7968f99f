"""#31 item 7, #42 items 4 and 7: asset pages at 1,366 px in a real headless browser. After CLI runs
of the ABISS and interaction jobs and an interrupted interaction run, every asset page the runs wrote
renders its metadata in place (no "[Show Markdown]" but for the charts' PNGs), what the interaction
report and Figure 2 show is not cut off at the value column's edge (measured where the text lies on
screen, not only found in the DOM), no asset reads "Failed" after the interrupted run, rates have 3
digits, and no community pop-up covers a page. The screenshots are kept beside the test's files (and
in $QUANDARY_SCREENSHOTS when set) for a person to look at. Skips with the reason when no chromium
is installed (`make chromium` installs it). The UI is loaded once; the test then goes from asset page
to asset page inside it, as its links do (a full load of each page cost ~1 s of CPU, #44)."""

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from resources.catalog import Catalog
from tests.cli.conftest import SMALL_GRID, GatedStub, council_file, quandary, runs_in
from tests.cli.test_first_week_interrupts import _interrupt_when_held
from tests.cli.test_runs import _start
from tests.dagster.browser import CHROMIUM, Browser
from tests.dagster.test_webserver import BIN, REPO, free_port, graphql
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e
WIDTH, HEIGHT = 1366, 3000  # the whole metadata table of the page in one image


# What a page shows of each metadata row: its value's text and whether that text reaches past the
# edge that clips it (the value column ends at ~995 px beside Dagster's side panel; a code line or a
# table row does not wrap, so what is past the edge cannot be read without scrolling sideways)
METADATA_ROWS_JS = """(() => {
  const out = {};
  for (const tr of document.querySelectorAll('tr')) {
    const tds = tr.querySelectorAll(':scope > td');
    if (tds.length < 3 || tr.parentElement.closest('tr')) continue;  // not a preview's own rows
    const key = tds[0].innerText.trim();
    const cell = tds[tds.length - 1];
    let edge = window.innerWidth;
    for (let e = cell.parentElement; e; e = e.parentElement) {
      if (getComputedStyle(e).overflowX !== 'visible') edge = Math.min(edge, e.getBoundingClientRect().right);
    }
    let right = 0;
    const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    while (walk.nextNode()) {
      const range = document.createRange();
      range.selectNodeContents(walk.currentNode);
      for (const box of range.getClientRects()) right = Math.max(right, box.right);
    }
    const links = [...cell.querySelectorAll('a')].map(a => ({title: a.title, href: a.href}));
    out[key] = {text: cell.innerText, cut: right > edge + 1, links};
  }
  return out;
})()"""

# The asset page's "Latest materialization" line (its status: a time, "Failed", "Never materialized")
STATUS_JS = """(() => {
  const label = [...document.querySelectorAll('*')].find(
    n => n.childElementCount === 0 && n.textContent.trim() === 'Latest materialization');
  return label ? label.parentElement.innerText.replace('Latest materialization', '').trim() : null;
})()"""

# ready: the metadata table and the status line are rendered (no skeleton), no row's value empty
READY_JS = f"""(() => {{
  const rows = [...document.querySelectorAll('tr')].filter(
    tr => tr.querySelectorAll(':scope > td').length >= 3 && !tr.parentElement.closest('tr'));
  return rows.length > 2 && rows.every(tr => tr.lastElementChild.innerText.trim() !== '') && !!{STATUS_JS};
}})()"""


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (`make chromium` installs it as root)")
def test_the_asset_pages_read_whole_at_1366px(tmp_path, isolated_home, demo_db_path):
    Catalog().register(demo_db_path, "university")
    home = tmp_path / "dagster_home"
    env = {**os.environ, "DAGSTER_HOME": str(home), "QUANDARY_KEY_STUB": "none"}
    env.pop("QUANDARY_COUNCIL_CONFIG", None)
    (tmp_path / "grid.yaml").write_text(SMALL_GRID)
    with GatedStub() as stub:
        env["QUANDARY_COUNCIL_CONFIG"] = str(council_file(tmp_path / "c.json", stub.url))
        run = quandary("run", "--db", "university", "--grid", str(tmp_path / "grid.yaml"), env=env)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        interact = quandary("interact", "--db", "university", "--max-steps", "1", env=env)
        assert interact.returncode == 0, interact.stdout[-2000:] + interact.stderr[-2000:]
    assert "nux:\n  enabled: false" in (home / "dagster.yaml").read_text()  # the CLI's instance setup
    # #42 item 4: a later run of the same assets interrupted (Ctrl-C) while a call is in flight: it
    # reads CANCELED, and the pages below must not call the assets it did not finish failed
    with GatedStub(answer_first=0) as stub:
        env["QUANDARY_COUNCIL_CONFIG"] = str(council_file(tmp_path / "c.json", stub.url, 600))
        code, out, err = _interrupt_when_held(
            stub, _start("interact", "--db", "university", "--max-steps", "2", env=env), signal.SIGINT, "interact"
        )
    assert code == 130, out[-2000:] + err[-2000:]
    assert runs_in(home)[0].status.name == "CANCELED"

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
        with Browser(WIDTH, HEIGHT) as browser:  # one browser, one tab, every page (#42: a browser per page cost ~4 s)
            pages = _every_asset_page_reads_in_place(browser, port, home, tmp_path)
        _the_rejection_report_shows_its_funnel_in_place(pages["rejection_report"], tmp_path)
        _the_interaction_pages_read_whole(pages)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def _every_asset_page_reads_in_place(browser: Browser, port: int, home: Path, tmp_path: Path) -> dict:
    """#42 item 7: every asset page the runs wrote metadata for, at 1,366 px: nothing behind
    "[Show Markdown]" (the charts' PNGs aside), the dataset preview names the columns it leaves out,
    a stage's decisions are a list whose reasons wrap, the funnel's columns all have headers; no
    asset reads "Failed" (#42 item 4: the last run was interrupted). Returns each page's
    (html, rows, status)."""
    from dagster import DagsterInstance

    with DagsterInstance.from_config(str(home)) as instance:
        assets = sorted(k.to_user_string() for k in instance.get_asset_keys())
    assert {"dataset", "s03_category_conformance", "rejection_report", "interaction_metrics"} <= set(assets), assets
    pages = {}
    for i, asset in enumerate(assets):
        path = f"/assets/{asset}?partition=university"
        # ready on this asset's page: its metadata names this asset's artifact (the tab keeps its
        # document from one page to the next, so the last page's table must not pass for this one)
        ready = f"({READY_JS}) && !!document.querySelector('a[title*=\"/artifacts/{asset}/university/\"]')"
        if i == 0:  # the app loads once, as for a person who opens the UI ...
            browser.open(f"http://127.0.0.1:{port}{path}", ready)
        else:  # ... and goes from page to page inside it, as its links do (#44: ~1 s of CPU a page less)
            browser.route(path, ready)
        dom, rows, status = browser.html(), browser.js(METADATA_ROWS_JS), browser.js(STATUS_JS)
        (tmp_path / f"{asset}.html").write_text(dom)
        if asset in ("rejection_report", "interaction_metrics"):
            shot = browser.screenshot(tmp_path / f"{asset}_1366.png")
            if os.environ.get("QUANDARY_SCREENSHOTS"):
                Path(os.environ["QUANDARY_SCREENSHOTS"]).mkdir(parents=True, exist_ok=True)
                shutil.copy(shot, Path(os.environ["QUANDARY_SCREENSHOTS"]) / shot.name)
            with open(shot, "rb") as fh:  # PNG header: width and height, big-endian, at bytes 16-24
                assert int.from_bytes(fh.read(24)[16:20], "big") == WIDTH
        assert "Metadata" in dom, f"{asset}: the page did not render its metadata"
        charts = {"rejection_report": 1, "interaction_metrics": 1}.get(asset, 0)  # a PNG is long Markdown
        hidden = [k for k, v in rows.items() if "Show Markdown" in v["text"]]
        assert len(hidden) <= charts, f"{asset}: metadata behind [Show Markdown]: {hidden}"
        # round 2 of #42 item 7: a 100-character path or a 64-digit hash widened the value column past
        # the page's edge, and every row's text ran past it; now no row of any page is cut there
        cut = {k: v["text"][:120] for k, v in rows.items() if v["cut"] and k not in hidden}
        assert not cut, f"{asset}: cut at the value column's edge: {cut}"
        assert {"path", "content_hash", "preview"} <= set(rows), f"{asset}: {sorted(rows)}"
        assert re.fullmatch(r"[0-9a-f]{16}…", rows["content_hash"]["text"].strip()), rows["content_hash"]
        # the file's name reads in place, its whole path is the title it shows on hover (Dagster turns
        # a file:// target into javascript:void(0), so the title is where the page keeps it)
        (link,) = rows["path"]["links"]
        assert Path(link["title"]).name == rows["path"]["text"].strip() and Path(link["title"]).is_file(), link
        assert status and "Failed" not in status and "Never" not in status, (
            f"{asset}: latest materialization {status!r}"
        )
        if asset == "dataset":
            assert "more column(s), in the artifact" in dom
        if asset.startswith("s03_"):
            assert "<li>" in dom and "rejected" in dom, "the stage's decisions are not a list in place"
        if asset == "rejection_report":
            assert all(f">{header}<" in dom for header in ("stage", "rejected", "kept"))
        pages[asset] = (dom, rows, status)
    return pages


def _the_rejection_report_shows_its_funnel_in_place(page, tmp_path: Path) -> None:
    """#31 item 7: the funnel and the per-stage table in place, rates to 3 digits, no pop-up."""
    dom, rows, _ = page
    assert "s10_style_confo" in dom and "█" in dom, "the funnel is not rendered in place"
    assert "<td>s03 category</td>" in dom, "the per-stage table is not rendered in place"
    assert "Show Markdown" not in rows["per_stage"]["text"], "per_stage is behind [Show Markdown]"
    assert not rows["funnel"]["cut"], "the funnel's bars are cut off"
    assert not re.search(r">\s*\d+\.\d{4,}\s*<", dom), "a value with more than 3 digits"
    assert "Join the Dagster" not in dom and "community" not in dom.lower(), "a pop-up covers the page"


def _the_interaction_pages_read_whole(pages: dict) -> None:
    """#42 item 7: the interaction report and Figure 2 were behind "[Show Markdown]"; Table 4's
    legend was cut at the value column's edge. Each is in place and none of its text is cut off."""
    _, rows, _ = pages["interaction_metrics"]
    for key in ("report", "figure2", "table4", "table4_legend"):
        assert key in rows, f"interaction_metrics has no {key}: {sorted(rows)}"
        assert "Show Markdown" not in rows[key]["text"], f"{key} is behind [Show Markdown]"
        assert not rows[key]["cut"], f"{key} is cut off at the value column's edge: {rows[key]['text'][:200]!r}"
    assert "Table 5" in rows["report"]["text"] and "report_path" in rows["report"]["text"]
    assert "conversations, 0 incomplete" in rows["report"]["text"], rows["report"]["text"]
    assert "Figure 2" in rows["figure2"]["text"] and "Answerable" in rows["figure2"]["text"]
    assert "Show Markdown" in rows["figure2_chart"]["text"]  # the PNG: long Markdown, the one allowed
    assert rows["report_path"]["text"].endswith(".txt")
    # the conversations' nested column types made the schema ~1,500 characters: in place now
    assert "Show Markdown" not in pages["interaction_conversations"][1]["schema"]["text"]
