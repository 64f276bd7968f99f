"""`quandary audit benchmark` end to end on a real Dagster instance and real SQLite files: runs per
database, resume, the one-item explanation, the review export and the corrected file."""

import csv
import json

import pytest
from dagster import AssetKey

from assets.benchmark_audit.assets import FINDINGS
from assets.shared.io_manager import location_of
from cli import main
from cli.runs import get_instance
from pipelines.benchmark_audit.checks import ERROR_TYPES
from resources.llm import reset_councils
from storage.stores import latest_frame
from tests.abiss.cascade_helpers import Script
from tests.benchmark_audit.conftest import ITEMS, PLANTED, WEAK, write_shop
from tests.llm_fakes import ScriptedLLM, install

pytestmark = pytest.mark.integration


def _reused(partition: str) -> list[int]:
    instance = get_instance()
    events = instance.fetch_materializations(AssetKey(FINDINGS), limit=10).records
    return [e.asset_materialization.metadata["reused"].value for e in events if e.partition_key == partition]


def _metadata(partition: str) -> dict:
    events = get_instance().fetch_materializations(AssetKey(FINDINGS), limit=10).records
    return next(e.asset_materialization.metadata for e in events if e.partition_key == partition)


def test_audit_resume_explain_export_fix(planted_file, shop_dbs, tmp_path, capsys):
    args = ["audit", "benchmark", str(planted_file), "--dbs", str(shop_dbs), "--timeout", "1"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "plan for benchmark_audit_job on planted_dev.shop" in out and "LLM calls: none" in out
    flagged = sum(1 for f in PLANTED.values() if f)
    assert f"| ALL | {len(ITEMS)} | {flagged} ({100 * flagged / len(ITEMS):.1f} %)" in out
    assert f"| {len(WEAK)} ({100 * len(WEAK) / len(ITEMS):.1f} %) |" in out  # weak items, apart
    assert "weak_empty_result" in out and "weak_null_column" in out
    df = latest_frame(FINDINGS, "planted_dev.shop")
    assert {r["item_index"]: set(filter(None, r["flags"].split(","))) for r in df.iter_rows(named=True)} == PLANTED

    meta = _metadata("planted_dev.shop")

    def typed(t):
        return sum(1 for f in PLANTED.values() if any(ERROR_TYPES[c] == t for c in f))

    assert meta["E2"].value == typed("E2") and meta["E4"].value == typed("E4") and meta["flagged"].value == flagged
    assert (
        "data:image/png;base64," in meta["chart"].value and f"| shop | {len(ITEMS)} |" in meta["rates_database"].value
    )
    exported = [json.loads(x) for x in open(location_of(meta["export_jsonl"]))]
    assert sorted(r["item_index"] for r in exported) == sorted(i for i, f in PLANTED.items() if f)

    assert main(args) == 0  # resume: every unchanged item is reused
    assert sorted(_reused("planted_dev.shop")) == [0, len(ITEMS)]
    capsys.readouterr()

    assert main(["audit", "benchmark-item", str(planted_file), "3"]) == 0
    shown = capsys.readouterr().out
    assert "[E4] ties_at_limit (deterministic)" in shown and "LIMIT 3" in shown

    review = tmp_path / "flagged.csv"
    assert main(["audit", "benchmark-export", str(planted_file), "--out", str(review)]) == 0
    rows = list(csv.DictReader(review.open()))
    assert sorted(int(r["item_index"]) for r in rows) == sorted(i for i, f in PLANTED.items() if f)
    for r in rows:
        r["accept"] = "yes" if r["item_index"] == "12" else ""
    with review.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    fixed = tmp_path / "fixed.json"
    assert main(["audit", "benchmark-fix", str(planted_file), "--review", str(review), "--out", str(fixed)]) == 0
    records = json.loads(fixed.read_text())
    original = json.loads(planted_file.read_text())
    assert records[12]["evidence"] == "blue refers to colour = 'Blue'"
    assert [r for i, r in enumerate(records) if i != 12] == [r for i, r in enumerate(original) if i != 12]


def test_bad_input_is_one_line_before_a_run(planted_file, shop_dbs, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"db_id": "shop", "question": "q", "SQL": "SELECT 1"}, {"db_id": "shop"}]))
    assert main(["audit", "benchmark", str(bad), "--dbs", str(shop_dbs)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"audit benchmark: {bad}: record 1: missing or empty 'question'"
    assert main(["audit", "benchmark", str(planted_file), "--dbs", str(tmp_path / "none")]) == 2
    assert "--dbs" in capsys.readouterr().err
    assert main(["audit", "benchmark", str(planted_file), "--dbs", str(shop_dbs), "--databases", "nope"]) == 2
    assert "--databases nope: not in" in capsys.readouterr().err
    assert main(["audit", "benchmark", str(planted_file), "--dbs", str(shop_dbs), "--name", "../up"]) == 2
    assert "--name" in capsys.readouterr().err
    assert main(["audit", "benchmark", str(planted_file), "--dbs", str(shop_dbs), "--council-checks", "x"]) == 2
    assert "--council-checks needs --council" in capsys.readouterr().err
    assert (
        main(["audit", "benchmark", str(planted_file), "--dbs", str(shop_dbs), "--council", "--council-checks", "x"])
        == 2
    )
    assert "--council-checks x: unknown" in capsys.readouterr().err
    two = tmp_path / "two.json"
    two.write_text(
        json.dumps(
            [
                {"db_id": "shop", "question": "q", "SQL": "SELECT 1"},
                {"db_id": "gone", "question": "q", "SQL": "SELECT 1"},
            ]
        )
    )
    assert main(["audit", "benchmark", str(two), "--dbs", str(shop_dbs)]) == 2
    assert "no database file" in capsys.readouterr().err and not get_instance().get_runs()


def test_databases_run_one_partition_each(tmp_path, capsys):
    dbs = tmp_path / "dbs"
    write_shop(dbs / "shop" / "shop.sqlite")
    write_shop(dbs / "store" / "store.sqlite")
    path = tmp_path / "two.json"
    path.write_text(
        json.dumps(
            [
                {"db_id": "shop", "question": "q", "query": "SELECT count(*) FROM product"},
                {"db_id": "store", "question": "r", "query": "SELECT nope FROM product"},
            ]
        )
    )
    assert main(["audit", "benchmark", str(path), "--dbs", str(dbs)]) == 0
    out = capsys.readouterr().out
    assert "| shop | 1 | 0 (0.0 %)" in out and "| store | 1 | 1 (100.0 %)" in out
    assert latest_frame(FINDINGS, "two.store")["flags"].to_list() == ["gold_error"]


@pytest.fixture
def scripted_validators(tmp_path, monkeypatch):
    """Three scripted validators: every gold is 'not an answer' (stage 4), every rewrite is SELECT 1."""
    cfg = tmp_path / "council.yaml"
    # timeout_s: scripted answers are instant; it only guards a hang, sized for a loaded 2-core machine
    # (5 s timed out beside two CPU hogs, #44)
    member = {"temperature": 0.0, "max_tokens": 64, "seed": 0, "max_in_flight": 4, "timeout_s": 120.0, "max_retries": 0}
    cfg.write_text(
        json.dumps(
            {
                "members": {n: {"model": f"scripted/{n}", **member} for n in "abc"},
                "councils": {"default": ["a"], "validators": ["a", "b", "c"]},
            }
        )
    )
    monkeypatch.setenv("QUANDARY_COUNCIL_CONFIG", str(cfg))
    reset_councils()
    handler = ScriptedLLM(
        Script(ground_truth=lambda m, t: {"verdict": "no"}, write_sql=lambda m, t: {"sql": "SELECT 1"})
    )
    install(handler)
    yield handler
    reset_councils()


def test_council_flags_are_reported_apart(tmp_path, scripted_validators, capsys):
    dbs = tmp_path / "dbs"
    write_shop(dbs / "shop" / "shop.sqlite")
    path = tmp_path / "small.json"
    gold = "SELECT count(*) FROM product WHERE category = 'Fruit'"
    path.write_text(json.dumps([{"db_id": "shop", "question": "How many fruits?", "SQL": gold, "evidence": ""}]))
    args = ["audit", "benchmark", str(path), "--dbs", str(dbs), "--council"]
    args += ["--council-checks", "council_gold_unsatisfying,council_rewrites_differ"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "| ALL | 1 | 0 (0.0 %)" in out  # the deterministic table does not count council flags
    assert "judged by the council" in out and "council_gold_unsatisfying   flag 1, pass 0, undecided 0" in out
    assert main(["audit", "benchmark-item", str(path), "0"]) == 0
    shown = capsys.readouterr().out
    assert "no flag: every deterministic check passed" in shown
    assert "[E1] council_gold_unsatisfying: flag" in shown and "call " in shown
    review = tmp_path / "r.jsonl"
    assert main(["audit", "benchmark-export", str(path), "--out", str(review)]) == 0
    (line,) = [json.loads(x) for x in review.read_text().splitlines()]
    assert line["flags"] == "" and "council_gold_unsatisfying (E1)" in line["council_flags"]
