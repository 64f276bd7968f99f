"""#31 item 4: one rule for every data path a user types — relative to the current directory — and
every message about a missing one prints the absolute path it looked at and says so."""

import os

import pytest

from assets.shared.preflight import PreflightError, check_run_request
from pipelines.ambitab.corpora import default_data_root
from storage.paths import (
    PROJECT_ROOT,
    READ_ROOTS_ENV,
    allow_data_root,
    data_roots,
    relative_note,
    shared_data_root,
    user_path,
)
from tests.cli.conftest import quandary


def test_a_relative_path_is_read_from_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert user_path("configs/grid.yaml") == tmp_path / "configs" / "grid.yaml"
    assert relative_note("configs/grid.yaml") == f" (relative to the current directory, {tmp_path})"
    assert relative_note(str(tmp_path / "x")) == ""


def test_the_default_data_folder_is_beside_the_checkout_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("QUANDARY_DATA", raising=False)
    monkeypatch.delenv("QUANDARY_AMBITAB_DATA", raising=False)
    monkeypatch.chdir(tmp_path)
    assert shared_data_root() == PROJECT_ROOT.parent / "shared" / "data"
    assert default_data_root() == shared_data_root()  # ambitab build and aisql share it
    monkeypatch.setenv("QUANDARY_DATA", "data")
    assert default_data_root() == tmp_path / "data"


def test_a_folder_the_cli_allows_does_not_move_the_default_data_folder(tmp_path, monkeypatch):
    # allow_data_root (a user's --data) once appended to QUANDARY_DATA, so every later command of
    # the same process looked for its corpora in "<that folder>:<the next one>"
    for env in ("QUANDARY_DATA", "QUANDARY_AMBITAB_DATA", READ_ROOTS_ENV):
        monkeypatch.delenv(env, raising=False)
    before = shared_data_root()
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        assert allow_data_root(tmp_path / name) == tmp_path / name
    assert shared_data_root() == before and default_data_root() == before
    assert {tmp_path / "one", tmp_path / "two"} <= set(data_roots())  # both still readable by runs
    monkeypatch.setenv("QUANDARY_DATA", os.pathsep.join([str(tmp_path / "one"), str(tmp_path / "two")]))
    assert shared_data_root() == tmp_path / "one"  # a list names its first folder


def test_a_grid_from_another_directory_names_the_absolute_path(tmp_path, monkeypatch, demo_db_path):
    from resources.catalog import Catalog

    Catalog().register(demo_db_path, "university")
    monkeypatch.delenv("QUANDARY_COUNCIL_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PreflightError) as exc:
        check_run_request(["university"], "configs/grid-small.yaml")
    assert str(exc.value) == (
        f"grid file {tmp_path}/configs/grid-small.yaml not found (relative to the current directory, {tmp_path})"
    )
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "grid-small.yaml").write_text((PROJECT_ROOT / "configs" / "grid-small.yaml").read_text())
    assert check_run_request(["university"], "configs/grid-small.yaml")["n"] == 1


@pytest.mark.integration
def test_ambitab_build_and_aisql_compare_say_where_they_looked(cli_env, tmp_path):
    env = {**cli_env}
    build = quandary("ambitab", "build", "--corpus", "ambrosia", "--data", "nowhere", env=env, cwd=tmp_path)
    assert build.returncode == 2
    assert build.stderr.strip() == (
        f"data folder {tmp_path}/nowhere not found (relative to the current directory, {tmp_path})"
    )
    compare = quandary("aisql", "compare", "movie", "SELECT 1", "SELECT 1", "--data", "nowhere", env=env, cwd=tmp_path)
    assert compare.returncode == 2 and f"{tmp_path}/nowhere/sembench/files/movie not found" in compare.stderr
    assert len(compare.stderr.strip().splitlines()) == 1
    # no --data: the shared folder beside the checkout, found from any directory
    default = quandary("aisql", "compare", "movie", "SELECT 1", "SELECT 1", env=env, cwd=tmp_path)
    assert f"{shared_data_root()}/sembench" in default.stderr or default.returncode == 0, default.stderr
