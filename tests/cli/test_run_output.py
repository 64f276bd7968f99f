"""What `quandary run` shows while and after it works (scripted council, real Dagster instance):
progress per step with LLM call counts, the same counts in the Dagster run log, checks as readable
warnings, and the whole prompts behind a vote in `audit question --prompts`."""

import json
import re

import pytest

from cli import main
from pipelines.abiss.prompts import PROMPT_OPENINGS as OPEN
from resources.catalog import Catalog
from storage.audit import open_audit
from tests.abiss.pipeline_helpers import GRID, _last_user, healthy, scripted_council  # noqa: F401
from tests.llm_fakes import json_reply

pytestmark = pytest.mark.integration


def test_run_output_progress_warnings_and_prompts(scripted_council, demo_db_path, tmp_path, capsys):  # noqa: F811
    from dagster import DagsterInstance  # lazy: dagster is slow to import (~1 s); only the tests that need it pay

    def strict(req):  # stage 3 rejects everything: its rate leaves the 95% bound
        if _last_user(req.messages).startswith(OPEN["conformance"]):
            return json_reply({"verdict": "no", "reason": "not this category"})
        return healthy(req)

    scripted_council.responder = strict
    Catalog().register(demo_db_path, "university")
    grid = tmp_path / "grid.yaml"
    grid.write_text(json.dumps(GRID))
    assert main(["run", "--db", "university", "--grid", str(grid)]) == 0
    out = capsys.readouterr().out
    progress = re.findall(
        r"^s03_category_conformance: (\d+)/(\d+) items  LLM calls (\d+) \(cached (\d+), failed 0\)", out, re.M
    )
    assert progress and progress[-1][0] == progress[-1][1] and int(progress[-1][2]) >= int(progress[-1][1])
    m = re.search(
        r"^  warning rejection_report\.rejection_rates_within_bounds: s03_category_conformance rejected "
        r"(\d+)/(\d+) = 100%, 5 points above the 95% maximum",
        out,
        re.M,
    )
    assert m and m.group(1) == m.group(2), out
    assert "FAILED" not in out

    run_id = re.search(r"^run ([0-9a-f]{8}) for partition 'university': succeeded", out, re.M).group(1)
    instance = DagsterInstance.get()
    [run] = [r for r in instance.get_runs() if r.run_id.startswith(run_id)]
    messages = [e.user_message for e in instance.all_logs(run.run_id)]
    assert any(re.match(r"s03_category_conformance: \d+/\d+ items  LLM calls \d+", msg) for msg in messages)

    # the UI shows the funnel as a table and each stage's decisions as a list in place (not collapsed)
    from dagster import AssetKey, TableMetadataValue

    report = instance.get_latest_materialization_event(AssetKey("rejection_report")).asset_materialization.metadata
    funnel = report["funnel_table"]
    assert isinstance(funnel, TableMetadataValue)
    stages = [r.data for r in funnel.records]
    i = next(i for i, r in enumerate(stages) if r["stage"] == "s03 category")
    s03, entered = stages[i], stages[i - 1]["kept"]  # entered: the row above's survivors
    rejected, applicable = map(int, s03["rejected"].split("/"))  # "rejected/applicable"
    assert applicable == rejected == int(m.group(2)) and s03["kept"] == entered - rejected
    assert report["survivors s03_category_conformance"].value == s03["kept"]
    decisions = instance.get_latest_materialization_event(
        AssetKey("s03_category_conformance")
    ).asset_materialization.metadata["decisions"]
    # a Markdown list read in place, each reason whole (a table cut them at 1,366 px, #42 item 7)
    items = [line for line in decisions.value.splitlines() if line.startswith("- ")]
    assert len(items) == applicable and all(line.startswith("- **rejected** `") for line in items), decisions.value

    con = open_audit()
    cid = con.execute(
        "SELECT candidate_id FROM council_votes WHERE stage = 's03_category_conformance' LIMIT 1"
    ).fetchall()[0][0]
    con.close()
    assert main(["audit", "question", cid, "--prompts"]) == 0
    trail = capsys.readouterr().out
    assert "prompt [system]:" in trail and "prompt [user]:" in trail
    user_prompt = trail.split("prompt [user]:", 1)[1]
    assert OPEN["conformance"] in user_prompt and "…" not in trail.split("council votes", 1)[1].split("answer:")[0]
    assert main(["audit", "question", cid, "--prompts", "--width", "40"]) == 0
    assert "…" in capsys.readouterr().out
