"""Issue 45 item 5: `audit benchmark-fix` runs every accepted fixed_sql on its database before it
writes anything (a broken one is refused in one line, no file written), and a Spider record whose
query was fixed loses its query_toks / sql, which described the old query."""

import json

import pytest

from cli import main
from tests.benchmark_audit.conftest import write_shop

pytestmark = pytest.mark.integration

GOLD = "SELECT product_name FROM product WHERE category = 'fruit'"  # empty: a near miss of 'Fruit', flagged


def _spider(path):
    records = [
        {
            "db_id": "shop",
            "question": "Which products are meat?",
            "query": GOLD,
            "query_toks": GOLD.split(),
            "query_toks_no_value": GOLD.split(),
            "sql": {"select": [False, []], "from": {"table_units": []}},
        },
        {"db_id": "shop", "question": "How many products?", "query": "SELECT count(*) FROM product", "sql": {}},
    ]
    path.write_text(json.dumps(records))
    return records


def _review(tmp_path, planted, fixed_sql):
    review = tmp_path / "review.jsonl"
    assert main(["audit", "benchmark-export", str(planted), "--out", str(review)]) == 0
    rows = [json.loads(x) for x in review.read_text().splitlines()]
    assert [r["item_index"] for r in rows] == [0]
    rows[0].update(accept=True, fixed_sql=fixed_sql)
    review.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return review


def test_fix_runs_the_fixed_sql_and_drops_spider_derived_fields(tmp_path, capsys):
    dbs = tmp_path / "dbs"
    write_shop(dbs / "shop" / "shop.sqlite")
    planted = tmp_path / "spider_dev.json"
    original = _spider(planted)
    assert main(["audit", "benchmark", str(planted), "--dbs", str(dbs)]) == 0
    out = tmp_path / "fixed.json"

    for broken, needle in (
        ("SELEC broken garbage", "does not run on shop.sqlite"),
        ("SELECT nope FROM product", "no such column"),
    ):
        review = _review(tmp_path, planted, broken)
        capsys.readouterr()
        assert main(["audit", "benchmark-fix", str(planted), "--review", str(review), "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert "line 1: item 0's fixed_sql" in err and needle in err and len(err.splitlines()) == 1, err
        assert not out.exists()

    review = _review(tmp_path, planted, "SELECT product_name FROM product WHERE category = 'Veg'")
    capsys.readouterr()
    # no --dbs: the folder the audit of this file used
    assert main(["audit", "benchmark-fix", str(planted), "--review", str(review), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "1 accepted fix(es)" in printed and "query_toks" in printed
    records = json.loads(out.read_text())
    assert records[0]["query"].endswith("'Veg'")
    assert not {"query_toks", "query_toks_no_value", "sql"} & set(records[0])
    assert records[1] == original[1]  # untouched records keep everything
