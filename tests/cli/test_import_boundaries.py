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
