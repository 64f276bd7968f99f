"""Bad configuration is refused before a run exists, in one or two lines naming file and key; the
small commands a new user reaches for behave (db remove, folder hint, export/import, sql on a
corrupt file, council calls --db)."""

import json
import re
import shutil

import polars as pl
import pytest

from cli import main
from cli.runs import get_instance, run_job_for_partition
from pipelines.abiss.outputs import to_abiss_records
from resources.catalog import Catalog
from storage.artifacts import write_version
from storage.audit import open_audit
from tests.cli.conftest import quandary, runs_in

GOOD_MEMBER = "model: openai/x\n    api_base: http://127.0.0.1:9/v1\n"


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize(
    "grid, needle",
    [
        ("n: -1\n", "n: must be at least 1 (got -1)"),
        ("n: lots\n", "n: expected a whole number (got 'lots')"),
        ("styles: [formal, shouty]\n", "styles: unknown value 'shouty'; allowed: formal, "),
        ("subcategories: [answerable, nonsense]\n", "subcategories: unknown value 'nonsense'; allowed: answerable, "),
        ("generators: [programmatic, gpt9]\n", "generators: unknown generator(s) ['gpt9']"),
    ],
)
def test_bad_grid_values_refused_before_a_run(grid, needle, tmp_path, demo_db_path, capsys):
    Catalog().register(demo_db_path, "university")
    path = tmp_path / "grid.yaml"
    path.write_text(grid)
    assert main(["run", "--db", "university", "--grid", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"bad grid file {path}: ") and needle in err and len(_lines(err)) == 1, err
    assert runs_in(tmp_path / "dagster_home") == []


COUNCILS = {
    "syntax.yaml": ("members: {a: {model: x}\ncouncils: [\n", "YAML syntax error at line"),
    "typo.yaml": (
        f"members:\n  a:\n    {GOOD_MEMBER}    temprature: 0.1\ncouncils:\n  default: [a]\n",
        "members.a.temprature: unknown key",
    ),
    "unknown_member.yaml": (
        f"members:\n  a:\n    {GOOD_MEMBER}councils:\n  default: [a, b]\n",
        "names unknown members ['b']",
    ),
    "missing_role.yaml": (
        f"members:\n  a:\n    {GOOD_MEMBER}councils:\n  generators: [a]\n",
        "role 'validators' missing",
    ),
    "top_typo.yaml": (f"members:\n  a:\n    {GOOD_MEMBER}council:\n  default: [a]\n", "council: unknown key"),
}


@pytest.mark.parametrize("name", sorted(COUNCILS))
def test_bad_council_files_refused_before_a_run(name, tmp_path, demo_db_path, monkeypatch, capsys):
    Catalog().register(demo_db_path, "university")
    text, needle = COUNCILS[name]
    path = tmp_path / name
    path.write_text(text)
    monkeypatch.setenv("QUANDARY_COUNCIL_CONFIG", str(path))
    assert main(["run", "--db", "university"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"council file {path}") and needle in err and len(_lines(err)) <= 2, err
    assert runs_in(tmp_path / "dagster_home") == []


def test_vanished_database_and_bad_council_through_the_command(cli_env, tmp_path, demo_db_path):
    db = shutil.copy(demo_db_path, tmp_path / "gone.sqlite")
    Catalog().register(db, "gone")
    (tmp_path / "gone.sqlite").unlink()
    r = quandary("run", "--db", "gone", env=cli_env)
    assert r.returncode == 2 and "registered at" in r.stderr and "file is gone" in r.stderr
    assert len(_lines(r.stderr)) == 1 and "Traceback" not in r.stderr
    bad = tmp_path / "c.yaml"
    bad.write_text("members: [\n")
    r = quandary("run", "--db", "university", env={**cli_env, "QUANDARY_COUNCIL_CONFIG": str(bad)})
    assert r.returncode == 2 and r.stderr.startswith(f"council file {bad}") and len(_lines(r.stderr)) == 1, r.stderr
    assert runs_in(tmp_path / "dagster_home") == []
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"\x00garbage" * 512)
    r = quandary("sql", str(corrupt), "SELECT 1", env=cli_env)
    assert r.returncode == 1 and "not a readable SQLite/DuckDB database" in r.stderr
    r = quandary("equiv", str(corrupt), "SELECT 1", "SELECT 1", env=cli_env)
    assert r.returncode == 2 and "not a readable SQLite/DuckDB database" in r.stderr


def test_db_remove_and_folder_hint(tmp_path, demo_db_path, capsys):
    assert main(["db", "register", str(demo_db_path), "--db-id", "uni"]) == 0
    assert main(["db", "remove", "uni"]) == 0
    assert "uni" not in Catalog().ids() and demo_db_path.exists()
    assert main(["db", "remove", "uni"]) == 1
    capsys.readouterr()
    assert main(["db", "register", str(tmp_path)]) == 1
    assert f"quandary db register {tmp_path} --folder" in capsys.readouterr().err


def test_export_refuses_unknown_db_and_creates_folders(tmp_path, demo_db_path, capsys):
    Catalog().register(demo_db_path, "university")
    assert main(["export", str(tmp_path / "x.json"), "--db", "nope"]) == 2
    assert "'nope' is not registered" in capsys.readouterr().err and not (tmp_path / "x.json").exists()
    good = tmp_path / "in.json"

    row = {
        "db_id": ["university"],
        "question": ["How many departments?"],
        "sql": ["SELECT COUNT(*) FROM departments"],
        "subcategory": ["answerable"],
        "style": ["formal"],
        "difficulty": ["simple"],
    }
    good.write_text(json.dumps(to_abiss_records(pl.DataFrame(row))))
    write_version(pl.DataFrame({**row, "question": ["pipeline's own"]}), "dataset", "university")
    assert main(["import", str(good), "--asset", "dataset"]) == 2
    assert "--replace" in capsys.readouterr().err
    assert main(["import", str(good)]) == 0
    assert "→ imported_dataset" in capsys.readouterr().out

    con = open_audit()
    assert con.execute("SELECT question FROM dataset").fetchall() == [("pipeline's own",)]
    assert con.execute("SELECT count(*) FROM imported_dataset").fetchall() == [(1,)]
    con.close()
    assert main(["export", str(tmp_path / "new" / "deeper" / "out.json")]) == 0
    assert (tmp_path / "new" / "deeper" / "out.json").is_file()


def test_council_calls_takes_a_database_id(tmp_path, demo_db_path, capsys):
    Catalog().register(demo_db_path, "university")
    assert main(["council", "calls", "--db", "nope"]) == 2
    assert "--log PATH" in capsys.readouterr().err
    assert main(["council", "calls", "--db", "university", "--log", str(tmp_path / "none.sqlite")]) == 0
    assert "no call log at" in capsys.readouterr().out


@pytest.mark.parametrize(
    "job, op, config, needle",
    [
        ("abiss_dataset_job", "generation_requests", {"n": 0}, "n: must be at least 1 (got 0)"),
        ("abiss_dataset_job", "generation_requests", {"generators": ["gpt9"]}, "unknown generator(s) ['gpt9']"),
        ("abiss_interaction_job", "interaction_conversations", {"modes": ["shouting"]}, "unknown mode 'shouting'"),
        (
            "abiss_interaction_job",
            "interaction_conversations",
            {"agents": ["nobody"]},
            "agents: 'nobody' is neither a system_agents council member",
        ),
        (
            "abiss_interaction_job",
            "interaction_conversations",
            {"agents": ["nopkg.mod:Agent"]},
            "cannot import 'Agent'",
        ),
    ],
)
def test_launch_refuses_values_the_schema_cannot_express(job, op, config, needle, tmp_path, demo_db_path):
    """What the UI's launch does (the execution plan, built before the run is created) refuses
    these values with the CLI's message, and no run is created."""
    # lazy: dagster is slow to import (~1 s); only the tests that need it pay
    from dagster import DagsterInvalidConfigError

    Catalog().register(demo_db_path, "university")
    with pytest.raises(DagsterInvalidConfigError, match=re.escape(needle)):
        run_job_for_partition(job, "university", run_config={"ops": {op: {"config": config}}})
    assert list(get_instance().get_runs()) == []


def test_launch_refuses_a_bad_council_file(tmp_path, demo_db_path, monkeypatch):
    # lazy: dagster is slow to import (~1 s); only the tests that need it pay
    from dagster import DagsterInvalidConfigError

    Catalog().register(demo_db_path, "university")
    path = tmp_path / "typo.yaml"
    path.write_text(COUNCILS["typo.yaml"][0])
    monkeypatch.setenv("QUANDARY_COUNCIL_CONFIG", str(path))
    for job in ("abiss_dataset_job", "abiss_interaction_job"):
        with pytest.raises(DagsterInvalidConfigError, match=re.escape(f"council file {path}")):
            run_job_for_partition(job, "university")
    assert list(get_instance().get_runs()) == []
