"""Issue 23 items 1 and 9: `quandary import` refuses records whose db_id would become a path
outside its asset, deeply nested or empty files, with one line naming the record; nothing is written."""

import json

import pytest

from cli import main

GOOD = {"db_id": "university", "question": "How many departments?", "sql": "SELECT 1",
        "category": {"name": "Answerable", "subname": "Without Evidence"}}


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
