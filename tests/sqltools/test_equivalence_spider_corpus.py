"""Relaxed equivalence on a labelled corpus of query pairs over Spider databases, and the CLI.

The corpus (tests/fixtures/equiv_pairs.json) labels each (gold, pred) pair equivalent or not
under Appendix A; every gold query must return rows on its database so that a verdict is never
decided by two empty results.
"""

import json
from collections import Counter
from pathlib import Path

import pytest

from cli import main
from pipelines.sqltools.equivalence import sql_equivalent
from resources.sql import execute_sql

SPIDER_DATABASES = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "spider" / "database"
CORPUS = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "equiv_pairs.json").read_text())

pytestmark = pytest.mark.shared_data


def spider_db(db_id: str) -> Path:
    path = SPIDER_DATABASES / db_id / f"{db_id}.sqlite"
    if not path.is_file():
        pytest.skip(f"Spider database {db_id} not found at {path} (needs ../shared/data/spider)")
    return path


def test_corpus_covers_every_required_case():
    assert len(CORPUS) >= 30
    assert len({p["id"] for p in CORPUS}) == len(CORPUS)
    covers = Counter(p["covers"] for p in CORPUS)
    required = {
        "reordered rows",
        "reordered columns",
        "aliases",
        "extra columns",
        "missing columns",
        "DISTINCT dropped",
        "order direction",
        "NULL handling",
        "LIMIT changes",
        "different filters",
    }
    assert required <= set(covers), required - set(covers)
    labels = Counter(p["equivalent"] for p in CORPUS)
    assert labels[True] >= 10 and labels[False] >= 10, labels


@pytest.mark.parametrize("pair", CORPUS, ids=[p["id"] for p in CORPUS])
def test_corpus_pair_verdict(pair):
    db = spider_db(pair["db"])
    gold = execute_sql(db, pair["gold"])
    assert gold.ok, gold
    assert gold.rows, "gold returns no rows: the pair would not test anything"
    verdict = sql_equivalent(db, pair["gold"], pair["pred"], order_sensitive=pair["order_sensitive"])
    assert verdict.failed is None, verdict.reason
    assert verdict.equivalent is pair["equivalent"], verdict.reason


# ----------------------------------------------------------------------------- CLI


def test_cli_equivalent_exits_0(capsys):
    db = spider_db("concert_singer")
    code = main(["equiv", str(db), "SELECT name, age FROM singer", "SELECT age AS a, name, country FROM singer"])
    assert code == 0
    assert capsys.readouterr().out == "equivalent\n"


def test_cli_not_equivalent_exits_1_with_reason(capsys):
    db = spider_db("concert_singer")
    code = main(["equiv", str(db), "SELECT country FROM singer", "SELECT DISTINCT country FROM singer"])
    assert code == 1
    assert capsys.readouterr().out == "not equivalent: row count differs: gold 6, pred 3\n"


def test_cli_order_sensitive_flag(capsys):
    db = spider_db("concert_singer")
    args = ["equiv", str(db), "SELECT name FROM singer ORDER BY age", "SELECT name FROM singer ORDER BY age DESC"]
    assert main(args) == 0
    assert main([*args, "--order-sensitive"]) == 1
    assert "different order" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("gold", "pred", "which"),
    [
        ("SELECT nope FROM singer", "SELECT name FROM singer", "gold"),
        ("SELECT name FROM singer", "SELEC name FROM singer", "pred"),
        ("SELECT name FROM singer", "DROP TABLE singer", "pred"),
    ],
)
def test_cli_query_failure_exits_2_with_one_line(capsys, gold, pred, which):
    db = spider_db("concert_singer")
    assert main(["equiv", str(db), gold, pred, "--timeout", "2"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {which} failed: ")


def test_cli_timeout_is_a_failure(capsys):
    db = spider_db("world_1")
    slow = "SELECT count(*) FROM city AS a, city AS b, city AS c"
    assert main(["equiv", str(db), "SELECT 1", slow, "--timeout", "0.2"]) == 2
    assert capsys.readouterr().err.startswith("error: pred failed: timeout")
