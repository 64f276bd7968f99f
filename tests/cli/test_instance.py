"""One instance: without DAGSTER_HOME / QUANDARY_HOME, from any working directory, the CLI uses the
checkout's .quandary and .dagster_home (the folder `make ui` serves), telemetry off, and names it."""

import pytest

from cli import main
from storage import paths
from tests.cli.conftest import runs_in

pytestmark = pytest.mark.integration


def test_cli_defaults_to_the_project_instance_from_any_folder(tmp_path, monkeypatch, demo_db_path, capsys):
    project = tmp_path / "checkout"
    monkeypatch.setattr(paths, "PROJECT_ROOT", project)
    monkeypatch.delenv("QUANDARY_HOME")
    monkeypatch.delenv("DAGSTER_HOME")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    assert main(["db", "register", str(demo_db_path), "--db-id", "uni"]) == 0
    assert (project / ".quandary" / "catalog.json").is_file()
    assert "enabled: false" in (project / ".dagster_home" / "dagster.yaml").read_text()
    assert main(["run", "--db", "uni", "--job", "seed_databases_job"]) == 0
    out = capsys.readouterr().out
    assert f"Dagster instance: {project / '.dagster_home'} (project default)" in out
    [run] = runs_in(project / ".dagster_home")
    assert run.status.name == "SUCCESS" and run.tags["dagster/partition"] == "uni"
    assert not any(elsewhere.iterdir()), "nothing may land in the working directory"
