"""Reading a benchmark file: Spider and BIRD keys, and one-line refusals naming the file and record."""

import json

import pytest

from pipelines.benchmark_audit.records import (
    BenchmarkFileError,
    by_database,
    database_path,
    read_benchmark,
    read_items,
)


def _write(tmp_path, records, name="b.json"):
    path = tmp_path / name
    path.write_text(records if isinstance(records, str) else json.dumps(records))
    return path


def test_spider_and_bird_keys(tmp_path):
    spider = _write(tmp_path, [{"db_id": "a", "question": "q?", "query": "SELECT 1", "sql": {"parsed": 1}}])
    bird = _write(
        tmp_path, [{"db_id": "a", "question": "q?", "SQL": "SELECT 2", "evidence": "e", "question_id": 7}], "c.json"
    )
    jar = _write(tmp_path, [{"db_id": "a", "question": "q?", "sql": "SELECT 3", "evidence": None}], "d.json")
    assert read_items(spider)[0].gold_sql == "SELECT 1"  # Spider's parsed "sql" tree is not the gold
    b = read_items(bird)[0]
    assert (b.gold_sql, b.evidence, b.question_id) == ("SELECT 2", "e", "7")
    assert read_items(jar)[0].evidence == ""


def test_jsonl_is_read(tmp_path):
    path = _write(
        tmp_path,
        '{"db_id": "a", "question": "q", "query": "SELECT 1"}\n{"db_id": "b", "question": "r", "query": "SELECT 2"}\n',
    )
    assert [i.db_id for i in read_items(path)] == ["a", "b"]


@pytest.mark.parametrize(
    ("records", "message"),
    [
        (
            [{"db_id": "a", "question": "q", "query": "SELECT 1"}, {"db_id": "a", "question": "q"}],
            "record 1: no gold SQL",
        ),
        ([{"question": "q", "query": "SELECT 1"}], "record 0: missing or empty 'db_id'"),
        ([{"db_id": "a", "question": " ", "query": "SELECT 1"}], "record 0: missing or empty 'question'"),
        (
            [{"db_id": "a", "question": "q", "query": "SELECT 1", "evidence": 3}],
            "record 0: 'evidence' must be a string",
        ),
        (
            [{"db_id": "../x", "question": "q", "query": "SELECT 1"}],
            "record 0: db_id '../x' is not a database folder name",
        ),
        ([3], "record 0: expected an object"),
        ("[{", "not valid JSON"),
        ("[]", "no auditable records"),
        ('"x"', "expected a JSON list"),
    ],
)
def test_malformed_files_are_refused_in_one_line(tmp_path, records, message):
    path = _write(tmp_path, records)
    with pytest.raises(BenchmarkFileError) as err:
        read_items(path)
    text = str(err.value)
    assert text.startswith(str(path)) and message in text and "\n" not in text


def test_abiss_records_without_gold_by_design_are_counted_not_refused(tmp_path):
    unsolvable = {"category": {"name": "Non-Existent Column", "answerable": False, "solvable": False}}
    path = _write(
        tmp_path,
        [
            {"db_id": "a", "question": "q", "sql": "SELECT 1", "evidence": None, "category": {"solvable": True}},
            {"db_id": "a", "question": "r", "sql": None, "is_solvable": False, **unsolvable},
            {"db_id": "a", "question": "s", "sql": "SELECT 2", "hidden_knowledge": "the user means X"},
        ],
    )
    items, no_gold = read_benchmark(path)
    assert [i.index for i in items] == [0, 2] and no_gold == 1
    assert items[1].hidden_knowledge == "the user means X"
    solvable_without_sql = _write(tmp_path, [{"db_id": "a", "question": "q", "sql": None, "category": {}}], "e.json")
    with pytest.raises(BenchmarkFileError, match="record 0: no gold SQL"):
        read_items(solvable_without_sql)  # only a category that says unsolvable excuses a missing gold


def test_missing_file(tmp_path):
    with pytest.raises(BenchmarkFileError, match="no such file"):
        read_items(tmp_path / "nope.json")


def test_database_layouts(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "a.sqlite").write_bytes(b"")
    (tmp_path / "b.db").write_bytes(b"")
    assert database_path(tmp_path, "a") == tmp_path / "a" / "a.sqlite"
    assert database_path(tmp_path, "b") == tmp_path / "b.db"
    assert database_path(tmp_path, "c") is None


def test_items_grouped_by_database(tmp_path):
    path = _write(tmp_path, [{"db_id": d, "question": "q", "query": "SELECT 1"} for d in ("b", "a", "b")])
    assert {k: [i.index for i in v] for k, v in by_database(read_items(path)).items()} == {"a": [1], "b": [0, 2]}
