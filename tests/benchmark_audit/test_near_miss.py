"""An empty gold is an annotation error only with a near miss to show; the question checks read the
question's words against the gold's clauses (real SQLite files, brute-force references)."""

import sqlite3

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.benchmark_audit import near_miss
from pipelines.benchmark_audit.checks import execution_findings, parse
from pipelines.benchmark_audit.question_checks import comparison_findings, question_column_findings
from resources.catalog import inspect_database
from resources.sql import execute_sql
from tests.benchmark_audit.conftest import TIMEOUT_S

VARIANTS = st.sampled_from(["ab", "AB", "Ab", "ab ", " AB", "cd", "Cd ", "ef"])


def _db(path, values):
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    con.executemany("INSERT INTO t (v) VALUES (?)", [(v,) for v in values])
    con.commit()
    con.close()
    return path


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(VARIANTS, min_size=1, max_size=6), literal=VARIANTS)
def test_an_empty_gold_is_an_error_exactly_when_its_constant_nearly_occurs(tmp_path, values, literal):
    path = _db(tmp_path / f"t_{abs(hash((tuple(values), literal)))}.sqlite", values)
    sql = f"SELECT id FROM t WHERE v = '{literal}'"
    outcome = execute_sql(path, sql, timeout_s=TIMEOUT_S)
    found = [f.check for f in execution_findings(sql, outcome, path, parse(sql), inspect_database(path), TIMEOUT_S)]
    # brute force: literals here are shorter than the misspelling search's minimum, so only case / whitespace
    if literal in values:
        expected = []
    elif any(v.strip().lower() == literal.strip().lower() for v in values):
        expected = ["empty_result"]
    else:
        expected = ["weak_empty_result"]
    assert found == expected


def test_a_near_miss_names_the_value_found_and_fixes_the_constant(shop_dbs):
    db = shop_dbs / "shop" / "shop.sqlite"
    schema = inspect_database(db)
    sql = "SELECT p.unit_price FROM product AS p WHERE p.product_name = 'kale' AND p.category = \"Veg\""
    (miss,) = near_miss.near_misses(db, parse(sql), schema, TIMEOUT_S).misses
    assert (miss.where, miss.written, miss.found, miss.how) == ("product.product_name", "kale", ("Kale",), "case")
    assert near_miss.mechanical_fix(sql, [miss]) == sql.replace("'kale'", "'Kale'")
    # a double-quoted string that names no column is SQLite's string literal, and it occurs: no near miss
    clean = near_miss.near_misses(db, parse(sql.replace("'kale'", "'Kale'")), schema, TIMEOUT_S)
    assert clean.misses == [] and clean.unchecked == []


def test_aliases_resolve_in_their_own_select(shop_dbs):
    # T1 is product in the first SELECT and color in the second: each constant is checked on its own table
    db = shop_dbs / "shop" / "shop.sqlite"
    sql = (
        "SELECT T1.id FROM product AS T1 WHERE T1.category = 'fruit' "
        "INTERSECT SELECT T1.id FROM color AS T1 WHERE T1.colour = 'blue'"
    )
    misses = near_miss.near_misses(db, parse(sql), inspect_database(db), TIMEOUT_S).misses
    assert sorted((m.where, m.found) for m in misses) == [("color.colour", ("Blue",)), ("product.category", ("Fruit",))]


def test_a_column_null_everywhere_is_weak_but_null_in_the_picked_rows_is_a_flag(shop_dbs):
    db = shop_dbs / "shop" / "shop.sqlite"
    schema = inspect_database(db)
    for sql, expected in (
        ("SELECT remark FROM note", "weak_null_column"),
        ("SELECT stock_count FROM product WHERE id = 4", "null_result"),  # other rows have a stock count
        ("SELECT sum(unit_price) FROM product WHERE category = 'Meat'", "weak_empty_result"),  # over no row
        ("SELECT sum(unit_price) FROM product WHERE category = 'fruit'", "null_result"),  # 'Fruit' exists
    ):
        outcome = execute_sql(db, sql, timeout_s=TIMEOUT_S)
        assert [f.check for f in execution_findings(sql, outcome, db, parse(sql), schema, TIMEOUT_S)] == [expected], sql


def test_question_columns_count_only_in_sort_and_filter_phrases(shop_dbs):
    schema = inspect_database(shop_dbs / "shop" / "shop.sqlite")
    gold = "SELECT product_name FROM product ORDER BY product_name"

    def flagged(question, sql=gold):
        return [f.check for f in question_column_findings(question, parse(sql), schema)]

    assert flagged("List the products sorted by their unit price.") == ["question_column_untouched"]
    assert flagged("List the products in descending order of unit price.") == ["question_column_untouched"]
    assert flagged("List the products sorted by product name.") == []
    assert flagged("What is the unit price of every product?") == []  # names it, neither sorts nor filters
    assert flagged("List the products whose stock count is above 5.") == ["question_column_untouched"]
    by_stock = "SELECT product_name FROM product ORDER BY stock_count DESC LIMIT 1"
    assert flagged("Which product's stock count is the largest?", by_stock) == []
    assert flagged("List the products whose stock count is the largest.", by_stock) == []  # a sort answers it
    by_count = "SELECT category FROM product GROUP BY category ORDER BY count(*)"
    assert flagged("List the categories ordered by the number of products.", by_count) == []


def test_strict_and_inclusive_bounds():
    def flagged(question, sql):
        return [f.check for f in comparison_findings(question, parse(sql))]

    having = "SELECT a FROM t GROUP BY a HAVING count(*) {} 2"
    assert flagged("Which a have less than 2 rows?", having.format("<=")) == ["comparison_strictness"]
    assert flagged("Which a have less than two rows?", having.format("<")) == []
    assert flagged("Which a have at least 2 rows?", having.format(">")) == ["comparison_strictness"]
    assert flagged("Which a have at least 2 rows?", having.format(">=")) == []
    assert flagged("Which a do not have more than 2 rows?", having.format("<=")) == []  # negated: <= is right
    assert flagged("Which a have more than 2 rows?", "SELECT a FROM t GROUP BY a HAVING 2 <= count(*)") == [
        "comparison_strictness"
    ]


def test_a_comparison_that_cannot_be_checked_is_said_on_the_weak_item(shop_dbs):
    db = shop_dbs / "shop" / "shop.sqlite"
    schema = inspect_database(db)
    sql = "SELECT product_name FROM product JOIN color ON product.id = color.id WHERE colour = 'Blue' AND category = 'Veg'"
    diagnosis = near_miss.near_misses(db, parse(sql), schema, TIMEOUT_S)
    assert diagnosis.misses == [] and diagnosis.unchecked == []  # every comparison checked
    # c is a derived table's column: no table of the schema holds it, so the weak item says it was
    # not checked instead of claiming every comparison was
    derived = "SELECT x FROM (SELECT product_name AS x, category AS c FROM product) AS sub WHERE c = 'Meat'"
    outcome = execute_sql(db, derived, timeout_s=TIMEOUT_S)
    (finding,) = execution_findings(derived, outcome, db, parse(derived), schema, TIMEOUT_S)
    assert finding.check == "weak_empty_result" and "not checked: c vs 'Meat' (column not resolved)" in finding.detail


def test_a_superlative_ranks_by_the_column_it_names(shop_dbs):
    schema = inspect_database(shop_dbs / "shop" / "shop.sqlite")

    def flagged(question, sql):
        return [f.check for f in question_column_findings(question, parse(sql), schema)]

    by_stock = "SELECT product_name FROM product ORDER BY stock_count DESC LIMIT 1"
    by_price = "SELECT product_name FROM product ORDER BY unit_price DESC LIMIT 1"
    by_max = "SELECT product_name FROM product WHERE unit_price = (SELECT max(unit_price) FROM product)"
    assert flagged("Which product has the highest unit price?", by_stock) == ["question_column_untouched"]
    assert flagged("Which product has the highest unit price?", by_price) == []
    assert flagged("Which product has the highest unit price?", by_max) == []
    assert flagged("What is the cheapest product?", by_stock) == ["question_column_untouched"]  # cheapest: price
    assert flagged("What is the cheapest product?", by_price.replace(" DESC", "")) == []
    most = "SELECT category FROM product GROUP BY category ORDER BY count(*) DESC LIMIT 1"
    assert flagged("Which category has the most products?", most) == []  # an aggregate key
