"""A small real SQLite database and a benchmark file with planted faults of every deterministic kind
beside clean items (``PLANTED``: item index -> the flags it must get, exactly)."""

import json
import sqlite3
from pathlib import Path

import pytest

PRODUCTS = [
    (1, "Apple", 1.0, "Fruit", 10),
    (2, "Pear", 2.0, "Fruit", 10),
    (3, "Kale", 3.0, "Veg", 5),
    (4, "Leek", 3.0, "Veg", None),
    (5, "Fig", 5.0, "Fruit", 7),
]

# (question, gold, evidence, the flags it must get)
ITEMS = [
    ("List product names.", "SELECT nme FROM product", "", {"gold_error"}),
    ("Which products are meat?", "SELECT product_name FROM product WHERE category = 'Meat'", "", {"empty_result"}),
    ("What is the stock of Leek?", "SELECT stock_count FROM product WHERE id = 4", "", {"null_result"}),
    (
        "The two most expensive products?",
        "SELECT product_name FROM product ORDER BY unit_price DESC LIMIT 2",
        "",
        {"ties_at_limit"},
    ),
    ("The most expensive product?", "SELECT product_name FROM product ORDER BY unit_price DESC LIMIT 1", "", set()),
    ("Any product?", "SELECT product_name FROM product ORDER BY RANDOM() LIMIT 1", "", {"nondeterministic"}),
    ("Two fruits?", "SELECT product_name FROM product WHERE category = 'Fruit' LIMIT 2", "", {"nondeterministic"}),
    ("Vegetables?", "SELECT product_name FROM product WHERE category = 'Veg' LIMIT 5", "", set()),
    ("How many fruits are there?", "SELECT count(*) FROM product WHERE category = 'Fruit'", "", {"duplicate_conflict"}),
    ("how many fruits are  there", "SELECT count(*) FROM product", "", {"duplicate_conflict"}),
    ("What is the price of Kale?", "SELECT unit_price FROM product WHERE product_name = 'Kale'", "", set()),
    ("What is the price of Kale ?", "SELECT unit_price FROM product WHERE product_name='Kale'", "", set()),
    (
        "What is the id of blue?",
        "SELECT id FROM color WHERE colour = 'Blue'",
        "blue refers to colour = 'blue'",
        {"evidence_contradicted"},
    ),
    (
        "Which products are expensive?",
        "SELECT product_name FROM product WHERE unit_price > 2",
        "expensive refers to unit_price > 4",
        {"evidence_ignored"},
    ),
    (
        "How many fruit products?",
        "SELECT count(*) FROM product WHERE category = 'Fruit'",
        "fruit refers to category = 'Fruit'",
        set(),
    ),
    (
        "List the stock count of every fruit.",
        "SELECT product_name FROM product WHERE category = 'Fruit'",
        "",
        {"question_column_untouched"},
    ),
    (
        "Count forever.",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
        "",
        {"gold_timeout"},
    ),
    (
        "Vegetables by name?",
        "SELECT product_name, unit_price FROM product WHERE category = 'Veg' ORDER BY product_name",
        "",
        set(),
    ),
]
PLANTED = {i: flags for i, (_, _, _, flags) in enumerate(ITEMS)}
TIMEOUT_S = 1.0


def write_shop(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    con.execute(
        "CREATE TABLE product (id INTEGER PRIMARY KEY, product_name TEXT, unit_price REAL, category TEXT, stock_count INT)"
    )
    con.executemany("INSERT INTO product VALUES (?, ?, ?, ?, ?)", PRODUCTS)
    con.execute("CREATE TABLE color (id INTEGER PRIMARY KEY, colour TEXT)")
    con.executemany("INSERT INTO color VALUES (?, ?)", [(1, "Blue"), (2, "Red")])
    con.commit()
    con.close()
    return path


def write_benchmark(path: Path, gold_key: str = "SQL") -> Path:
    records = [
        {"question_id": i, "db_id": "shop", "question": q, "evidence": e, gold_key: sql}
        for i, (q, sql, e, _) in enumerate(ITEMS)
    ]
    path.write_text(json.dumps(records, indent=1))
    return path


@pytest.fixture
def shop_dbs(tmp_path) -> Path:
    dbs = tmp_path / "dbs"
    write_shop(dbs / "shop" / "shop.sqlite").chmod(0o444)
    return dbs


@pytest.fixture
def planted_file(tmp_path) -> Path:
    return write_benchmark(tmp_path / "planted_dev.json")
