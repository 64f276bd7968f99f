"""A small real SQLite database and a benchmark file with planted faults of every deterministic kind
beside clean items (``PLANTED``: item index -> the flags it must get, exactly) and weak items
(``WEAK``: correct golds that cannot tell systems apart here, reported apart from the flags)."""

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
    ("Which products are meat?", "SELECT product_name FROM product WHERE category = 'Meat'", "", set()),  # weak
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
        "List every fruit ordered by stock count.",
        "SELECT product_name FROM product WHERE category = 'Fruit' ORDER BY product_name",
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
    # 18-: near misses (errors) against weak items, the question's shape, ids in evidence
    ("Which products are fruit?", "SELECT product_name FROM product WHERE category = 'fruit'", "", {"empty_result"}),
    ("What does Kale cost?", 'SELECT unit_price FROM product WHERE product_name = "Kale "', "", {"empty_result"}),
    (
        "Which suppliers sell our products?",
        "SELECT DISTINCT s.name FROM supplier AS s JOIN product AS p ON s.category = p.category",
        "",
        {"empty_result"},
    ),
    ("What remarks are there?", "SELECT remark FROM note", "", set()),  # weak: remark is NULL everywhere
    (
        "What does Greenfeld Farms sell?",
        "SELECT category FROM supplier WHERE name = 'Greenfeld Farms'",
        "",
        {"empty_result"},
    ),
    (
        "List fruits sorted by unit price.",
        "SELECT product_name FROM product WHERE category = 'Fruit' ORDER BY unit_price",
        "",
        set(),
    ),
    ("How many vegetables are there?", "SELECT product_name FROM product WHERE category = 'Veg'", "", {"answer_shape"}),
    (
        "What are the names of the vegetables?",
        "SELECT count(*) FROM product WHERE category = 'Veg'",
        "",
        {"answer_shape"},
    ),
    ("Is there a fruit?", "SELECT product_name FROM product WHERE category = 'Fruit'", "", {"answer_shape"}),
    (
        "Which products have a unit price of at least 3?",
        "SELECT product_name FROM product WHERE unit_price > 3",
        "",
        {"comparison_strictness"},
    ),
    ("Which products cost less than 3?", "SELECT product_name FROM product WHERE unit_price < 3", "", set()),
    (
        "Which supplier has the best rating?",
        "SELECT name FROM supplier ORDER BY rating DESC LIMIT 1",
        "",
        {"text_sorted_as_number"},
    ),
    (
        "Which paints are blue?",
        "SELECT p.name FROM paint AS p JOIN color AS c ON p.colour_id = c.id WHERE c.colour = 'Blue'",
        "blue refers to colour_id = 1",
        set(),
    ),
    (
        "Which paints are red?",
        "SELECT name FROM paint WHERE colour_id = 2",
        "red refers to colour = 'Red'",
        set(),
    ),
    (
        "Which paints are green?",
        "SELECT name FROM paint WHERE colour_id = 2",
        "green refers to colour = 'Green'",
        {"evidence_ignored"},
    ),
    (
        "List the products with a stock count above 5.",
        "SELECT product_name FROM product WHERE unit_price > 4",
        "",
        {"question_column_untouched"},
    ),
]
PLANTED = {i: flags for i, (_, _, _, flags) in enumerate(ITEMS)}
WEAK = {1: {"weak_empty_result"}, 21: {"weak_null_column"}}
SUPPLIERS = [(1, "Greenfield Farms", " Fruit", "9"), (2, "Leafy Co", " Veg", "10"), (3, "Orchard Ltd", " Fruit", "8")]
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
    # categories with a leading space (a join that meets only trimmed); ratings as TEXT numbers
    con.execute("CREATE TABLE supplier (id INTEGER PRIMARY KEY, name TEXT, category TEXT, rating TEXT)")
    con.executemany("INSERT INTO supplier VALUES (?, ?, ?, ?)", SUPPLIERS)
    con.execute("CREATE TABLE note (id INTEGER PRIMARY KEY, remark TEXT)")
    con.executemany("INSERT INTO note VALUES (?, ?)", [(1, None), (2, None)])
    con.execute("CREATE TABLE paint (id INTEGER PRIMARY KEY, name TEXT, colour_id INT REFERENCES color(id))")
    con.executemany("INSERT INTO paint VALUES (?, ?, ?)", [(1, "Sky", 1), (2, "Brick", 2)])
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
