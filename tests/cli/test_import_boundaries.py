"""`quandary import` writes only to assets meant for imports and only bounded, read-only records
(issue 34 items 3 and 7): another job's artifact is refused in one line before anything is read,
an unencodable ``\\ud800`` escape and gold SQL that is not one read-only query are refused naming
the record, and nothing is stored."""

import json

import polars as pl
import pytest

from cli import main
from pipelines.abiss.outputs import to_abiss_records
from storage.stores import artifact_store

ROW = {
    "db_id": ["university"],
    "question": ["How many departments?"],
    "sql": ["SELECT COUNT(*) FROM departments"],
    "subcategory": ["answerable"],
    "style": ["formal"],
    "difficulty": ["simple"],
}


def _file(tmp_path, name="in.json", **changes):
    path = tmp_path / name
    path.write_text(json.dumps(to_abiss_records(pl.DataFrame({**ROW, **changes}))))
    return path


@pytest.mark.parametrize(
    "asset",
    [
        "interaction_conversations",
        "interaction_metrics",
        "aisql_verdicts",
        "ambitab_records",
        "ambitab_episodes",
        "candidates",
        "s03_validated",
        "my_table",
        "imported_",
    ],
)
def test_import_refuses_every_asset_not_meant_for_imports(tmp_path, capsys, asset):
    good = _file(tmp_path)
    assert main(["import", str(good), "--asset", asset]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"refusing to import into {asset!r}" in err and "imported_" in err
    assert artifact_store().latest_location(asset, "university") is None


def test_import_says_which_kind_of_asset_it_wrote(tmp_path, capsys):
    good = _file(tmp_path)
    assert main(["import", str(good), "--asset", "imported_mine"]) == 0
    assert "→ imported_mine (an import-only asset" in capsys.readouterr().out
    assert main(["import", str(good), "--asset", "dataset", "--replace"]) == 0
    assert "→ dataset (replacing the pipeline dataset" in capsys.readouterr().out


def test_an_unencodable_escape_is_refused_naming_the_record(tmp_path, capsys):
    path = _file(tmp_path)
    text = path.read_text().replace("How many departments?", "How many \\\\ud800 departments?")
    path.write_text(text.replace("\\\\ud800", "\\ud800"))
    assert main(["import", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "record 0" in err and "'question'" in err and "surrogate" in err
    assert "Traceback" not in err and artifact_store().latest_location("imported_dataset", "university") is None


@pytest.mark.parametrize(
    "sql,needle",
    [
        ("DROP TABLE departments", "got DROP"),
        ("ATTACH 'x.db' AS x", "got ATTACH"),
        ("INSERT INTO departments VALUES (1)", "got INSERT"),
        ("PRAGMA writable_schema = 1", "got PRAGMA"),
        ("SELECT 1; DROP TABLE departments", "2 statements"),
        ("SELECT 1; SELECT 2", "2 statements"),
        # a first statement naming an unknown table used to hide the rest from the check (#45 item 5)
        ("SELECT * FROM t; DROP TABLE t", "2 statements"),
        ("SELECT * FROM t -- x\n; DELETE FROM departments", "2 statements"),
    ],
)
def test_gold_that_is_not_one_read_only_query_is_refused(tmp_path, capsys, sql, needle):
    path = _file(tmp_path, sql=[sql])
    assert main(["import", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "record 0" in err and needle in err, err
    assert artifact_store().latest_location("imported_dataset", "university") is None


def test_read_only_gold_still_imports(tmp_path):
    path = _file(tmp_path, sql=["WITH d AS (SELECT * FROM departments) SELECT COUNT(*) FROM d"])
    assert main(["import", str(path)]) == 0
