"""Issue 23 item 6: a seed database that changed after registration (or after a run read it) is
refused before any step reads it, naming both hashes and what to do; `db register` of an existing
id with a different file needs --replace."""

import shutil
import sqlite3

import polars as pl
import pytest

from cli import main
from resources.catalog import AlreadyRegisteredError, Catalog, SeedChangedError, check_seed_unchanged


def _copy(demo_db_path, tmp_path, name="uni.sqlite"):
    dst = tmp_path / name
    shutil.copy(demo_db_path, dst)
    dst.chmod(0o644)
    return dst


def _edit(path):
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE extra(x INTEGER)")
    con.commit()
    con.close()


def test_edited_seed_is_refused_with_both_hashes(demo_db_path, tmp_path):
    path = _copy(demo_db_path, tmp_path)
    info = Catalog().register(path, "uni")
    check_seed_unchanged(str(path), info.sha256, "uni")  # unchanged: fine
    _edit(path)
    with pytest.raises(SeedChangedError) as exc:
        check_seed_unchanged(str(path), info.sha256, "uni")
    msg = str(exc.value)
    assert info.sha256[:12] in msg and "db register" in msg and "--replace" in msg and str(path) in msg


def test_steps_check_the_seed_before_reading_it(demo_db_path, tmp_path):
    from assets.abiss.assets import _db  # lazy: imports dagster (~1 s); only the tests that need it pay

    path = _copy(demo_db_path, tmp_path)
    info = Catalog().register(path, "uni")
    row = pl.DataFrame([{"db_id": "uni", "path": str(path), "sha256": info.sha256}])
    assert _db(row)["path"] == str(path)
    _edit(path)
    with pytest.raises(SeedChangedError):
        _db(row)


def test_register_existing_id_with_other_file_needs_replace(demo_db_path, tmp_path, capsys):
    a = _copy(demo_db_path, tmp_path, "a.sqlite")
    b = _copy(demo_db_path, tmp_path, "b.sqlite")
    _edit(b)
    assert main(["db", "register", str(a), "--db-id", "uni"]) == 0
    assert main(["db", "register", str(a), "--db-id", "uni"]) == 0  # same file again: fine
    capsys.readouterr()
    assert main(["db", "register", str(b), "--db-id", "uni"]) == 1
    err = capsys.readouterr().err
    assert "uni" in err and "--replace" in err and err.count("\n") <= 2, err
    assert Catalog().get("uni").path == str(a.resolve())
    assert main(["db", "register", str(b), "--db-id", "uni", "--replace"]) == 0
    assert Catalog().get("uni").path == str(b.resolve())


def _folder(root, demo_db_path, names):
    """A Spider-style folder <root>/<db_id>/<db_id>.sqlite with a copy of the demo per name."""
    for name in names:
        (root / name).mkdir(parents=True, exist_ok=True)
        _copy(demo_db_path, root / name, f"{name}.sqlite")
    return root


def test_register_folder_refuses_rebinding_changed_ids_without_replace(demo_db_path, tmp_path, capsys):
    root = _folder(tmp_path / "dbs", demo_db_path, ["alpha", "beta", "gamma"])
    assert main(["db", "register", str(root), "--folder"]) == 0
    assert main(["db", "register", str(root), "--folder"]) == 0  # same files again: fine
    before = {e.db_id: e for e in Catalog().entries()}
    _edit(root / "beta" / "beta.sqlite")
    _edit(root / "gamma" / "gamma.sqlite")
    _folder(root, demo_db_path, ["delta"])  # a new id alongside must not be registered either
    capsys.readouterr()

    assert main(["db", "register", str(root), "--folder"]) == 1
    err = capsys.readouterr().err
    assert "nothing registered" in err and "--replace" in err, err
    for db_id in ("beta", "gamma"):
        line = next(ln for ln in err.splitlines() if ln.strip().startswith(f"{db_id}:"))
        new_sha = Catalog(tmp_path / "scratch.json").register(root / db_id / f"{db_id}.sqlite", db_id).sha256
        assert before[db_id].sha256[:16] in line and new_sha[:16] in line, line
    assert not any(ln.strip().startswith("alpha:") for ln in err.splitlines())
    assert {e.db_id: e for e in Catalog().entries()} == before  # nothing rebound, nothing added

    assert main(["db", "register", str(root), "--folder", "--replace"]) == 0
    after = {e.db_id: e for e in Catalog().entries()}
    assert sorted(after) == ["alpha", "beta", "delta", "gamma"]
    assert after["alpha"] == before["alpha"] and after["beta"].sha256 != before["beta"].sha256


def test_register_folder_refuses_an_id_bound_to_another_path(demo_db_path, tmp_path):
    elsewhere = _copy(demo_db_path, tmp_path, "elsewhere.sqlite")  # same bytes, another file
    Catalog().register(elsewhere, "alpha")
    root = _folder(tmp_path / "dbs", demo_db_path, ["alpha"])
    with pytest.raises(AlreadyRegisteredError) as exc:
        Catalog().register_folder(root, replace=False)
    assert [db_id for db_id, _, _ in exc.value.changed] == ["alpha"] and str(elsewhere) in str(exc.value)
    assert Catalog().get("alpha").path == str(elsewhere.resolve())
