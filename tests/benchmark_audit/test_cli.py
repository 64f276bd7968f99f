"""`quandary audit benchmark` end to end on a real Dagster instance and real SQLite files: runs per
database, resume, the one-item explanation, the review export and the corrected file."""

import json

import pytest

from assets.benchmark_audit.assets import FINDINGS
from cli import main
from cli.runs import get_instance
from storage.stores import latest_frame
from tests.benchmark_audit.conftest import ITEMS, PLANTED, write_shop

pytestmark = pytest.mark.integration


def _reused(partition: str) -> list[int]:
    instance = get_instance()
    from dagster import AssetKey

    events = instance.fetch_materializations(AssetKey(FINDINGS), limit=10).records
    return [e.asset_materialization.metadata["reused"].value for e in events if e.partition_key == partition]


def test_audit_resume_explain_export_fix(planted_file, shop_dbs, tmp_path, capsys):
    args = ["audit", "benchmark", str(planted_file), "--dbs", str(shop_dbs), "--timeout", "1"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "plan for benchmark_audit_job on planted_dev.shop" in out and "LLM calls: none" in out
    assert "| ALL | 18 | 12 (66.7 %)" in out
    df = latest_frame(FINDINGS, "planted_dev.shop")
    assert {r["item_index"]: set(filter(None, r["flags"].split(","))) for r in df.iter_rows(named=True)} == PLANTED

    assert main(args) == 0  # resume: every unchanged item is reused
    assert sorted(_reused("planted_dev.shop")) == [0, len(ITEMS)]
    capsys.readouterr()

    assert main(["audit", "benchmark-item", str(planted_file), "3"]) == 0
    shown = capsys.readouterr().out
    assert "[E4] ties_at_limit (deterministic)" in shown and "LIMIT 3" in shown

    review = tmp_path / "flagged.csv"
    assert main(["audit", "benchmark-export", str(planted_file), "--out", str(review)]) == 0
    import csv

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
