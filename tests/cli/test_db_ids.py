"""Database ids are validated at registration with the storage's rule (issue 34 item 8): a given id
that is not usable as it is is refused in one line proposing the cleaned id (never changed silently),
and an id derived from a file name says when it was changed."""

import shutil

import pytest

from cli import main
from resources.catalog import Catalog


@pytest.mark.parametrize("bad", ["x" * 300, "../candidates", "..", "a/b", "my-db", "_x", "é"])
def test_unusable_given_ids_are_refused_in_one_line(demo_db_path, capsys, bad):
    assert main(["db", "register", str(demo_db_path), "--db-id", bad]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a usable database id" in err and "--db-id" in err
    assert Catalog().ids() == []


def test_a_usable_id_is_kept(demo_db_path, capsys):
    assert main(["db", "register", str(demo_db_path), "--db-id", "uni_2"]) == 0
    assert Catalog().ids() == ["uni_2"] and "note:" not in capsys.readouterr().out


def test_an_id_derived_from_a_file_name_says_when_it_changed(demo_db_path, tmp_path, capsys):
    odd = tmp_path / "my-uni.db.sqlite"
    shutil.copyfile(demo_db_path, odd)
    assert main(["db", "register", str(odd)]) == 0
    out = capsys.readouterr().out
    assert "note: the file name 'my-uni.db' was changed to the database id 'my_uni_db'" in out
    assert Catalog().ids() == ["my_uni_db"]
