"""Issue 23 items 1 and 9: `quandary import` refuses records whose db_id would become a path
outside its asset, deeply nested or empty files, with one line naming the record; nothing is written."""

import json

import polars as pl
import pytest

from cli import main
from pipelines.abiss import outputs
from pipelines.abiss.outputs import REFERENCE_CATEGORY, from_abiss_records
from pipelines.core import jsonstream
from pipelines.core.jsonstream import JsonStreamError, iter_json_list

GOOD = {
    "db_id": "university",
    "question": "How many departments?",
    "sql": "SELECT 1",
    "category": {"name": "Answerable", "subname": "Without Evidence"},
}


def _files(home):
    art = home / "artifacts"
    return sorted(p for p in art.rglob("*")) if art.exists() else []


@pytest.mark.parametrize("db_id", ["../candidates/x", "/tmp/quandary-abs-import", "..", "a/b", ".x"])
def test_import_refuses_path_like_db_id(tmp_path, isolated_home, capsys, db_id):
    path = tmp_path / "in.json"
    path.write_text(json.dumps([GOOD, dict(GOOD, db_id=db_id)]))
    assert main(["import", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "record 1" in err and "db_id" in err and str(path) in err, err
    assert _files(isolated_home) == []


def test_import_refuses_deep_nesting_and_empty(tmp_path, isolated_home, capsys):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert main(["import", str(deep)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(deep) in err and "nest" in err, err
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    assert main(["import", str(empty)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no records" in err, err
    assert _files(isolated_home) == []


# --- item 9: a large import streams; split files are the same import; a damaged file writes nothing


def _records(n: int) -> list[dict]:
    """``n`` valid records over 7 databases and every subcategory (ambiguous readings in pairs)."""

    subs = list(REFERENCE_CATEGORY)
    out = []
    for i in range(n):
        name, subname = REFERENCE_CATEGORY[subs[(i // 2) % len(subs)]]
        out.append(
            {
                "db_id": f"db{(i // 2) % 7}",
                "question": f"Which rows have value {i // 2}? ünïcode €",
                "evidence": f"value means column v{i}" if i % 3 else None,
                "sql": f"SELECT a, b FROM t{i % 5} WHERE v = {i} AND name LIKE '%x{i}%' ORDER BY a",
                "category": {"name": name, "subname": subname},
                "question_style": "formal",
                "question_difficulty": "highly_complex" if i % 4 == 0 else "simple",
                "hidden_knowledge": f"reading {i % 2}",
            }
        )
    return out


def _stored(home) -> dict:
    root = home / "artifacts" / "imported_dataset"
    return {d.name: pl.read_parquet(d / (d / "LATEST").read_text().strip()) for d in sorted(root.iterdir())}


@pytest.fixture
def small_batches(monkeypatch):
    """Batches and read chunks far smaller than the file, cut at odd places (inside records, tokens)."""

    monkeypatch.setattr(outputs, "BATCH_ROWS", 701)
    monkeypatch.setattr(jsonstream, "CHUNK", 4099)


def test_large_file_imports_the_same_rows_as_the_records_split_over_files(
    tmp_path, isolated_home, monkeypatch, capsys, small_batches
):

    records = _records(6000)
    big = tmp_path / "all.json"
    big.write_text(json.dumps(records, indent=2, ensure_ascii=False))
    assert big.stat().st_size > 2_000_000
    splits = [tmp_path / f"part{k}.json" for k in range(3)]
    for k, path in enumerate(splits):  # contiguous thirds: each file holds part of every database
        path.write_text(json.dumps(records[k * 2000 : (k + 1) * 2000], ensure_ascii=False))

    assert main(["import", str(big)]) == 0
    whole = _stored(isolated_home)
    monkeypatch.setenv("QUANDARY_HOME", str(tmp_path / "home2"))
    assert main(["import", *map(str, splits)]) == 0
    split = _stored(tmp_path / "home2")
    capsys.readouterr()

    assert sorted(whole) == sorted(split) == [f"db{k}" for k in range(7)]
    expected = from_abiss_records(records)  # the whole list in memory, as before streaming
    for db_id in whole:
        assert whole[db_id].equals(split[db_id]), db_id
        assert whole[db_id].equals(expected.filter(pl.col("db_id") == db_id)), db_id
    assert sum(f.height for f in whole.values()) == 6000
    amb = expected.filter(pl.col("group") == "ambiguous")
    assert amb.height and amb["interpretation_index"].to_list()[:4] == [0, 1, 0, 1]


def test_truncated_file_fails_naming_file_byte_and_record_and_writes_nothing(
    tmp_path, isolated_home, capsys, small_batches
):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_records(500)))
    text = json.dumps(_records(3000), indent=2).encode()
    cut = text.index(b'"question": "Which rows have value 1000?')  # inside record 2000
    damaged = tmp_path / "damaged.json"
    damaged.write_bytes(text[:cut])

    assert main(["import", str(good), str(damaged)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert str(damaged) in err and "truncated" in err and f"byte {cut}" in err and "record 2000" in err, err
    assert "nothing imported" in err
    assert _files(isolated_home) == []  # not even the good file's records
    assert not [p for p in isolated_home.iterdir() if p.name.startswith(".import")]  # no staging left behind


@pytest.mark.parametrize(
    "text, message",
    [
        ("[" + json.dumps(GOOD) + " " + json.dumps(GOOD) + "]", f"byte {len(json.dumps(GOOD)) + 2} after record 0"),
        ("[" + json.dumps(GOOD) + ",]", "a ',' before the closing ']'"),
        (json.dumps(GOOD), "expected a JSON list of records"),
        ("[" + json.dumps(GOOD) + "] trailing", "after the list's closing ']'"),
        (b"[\xff]", "not UTF-8"),
    ],
)
def test_damaged_file_names_where_it_breaks(tmp_path, isolated_home, capsys, text, message):
    path = tmp_path / "bad.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    assert main(["import", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and message in err, err
    assert _files(isolated_home) == []


def test_stream_reader_matches_json_loads_at_every_chunk_size(tmp_path):
    """Any chunk size gives json.loads's elements; any cut of the file is refused, never shortened."""

    data = [
        {"a": [1, -2.5e-3, None, True, False], "s": 'é€😀 "q" \\ \u2028', "n": {"x": {}}},
        12345678,
        "x",
        [],
        -0.0,
        1e300,
    ]
    for ensure_ascii in (True, False):
        raw = json.dumps(data, indent=1, ensure_ascii=ensure_ascii).encode()
        path = tmp_path / "x.json"
        path.write_bytes(raw)
        for chunk in (1, 2, 3, 5, 64):
            assert list(iter_json_list(path, chunk=chunk)) == data
        for cut in range(1, len(raw) - 1):
            path.write_bytes(raw[:cut])
            with pytest.raises(JsonStreamError):
                list(iter_json_list(path, chunk=7))
