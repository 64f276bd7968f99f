"""CLI commands refuse bad input with a one-line reason and a non-zero exit, never a traceback."""

from assets.shared.preflight import check_grid, load_grid
from cli import main
from resources.catalog import Catalog


def test_bad_grid_files(tmp_path, demo_db_path, capsys):
    Catalog().register(demo_db_path, "university")
    cases = {
        "missing.yaml": None,
        "empty.yaml": "",
        "list.yaml": "- formal\n",
        "typo.yaml": "stlyes: [formal]\n",
        "broken.yaml": "styles: [formal\n",
    }
    for name, text in cases.items():
        path = tmp_path / name
        if text is not None:
            path.write_text(text)
        assert main(["run", "--db", "university", "--grid", str(path)]) == 2, name
        err = capsys.readouterr().err
        expected = f"grid file {path} not found" if text is None else f"bad grid file {path}"
        assert err.startswith(expected) and err.count("\n") == 1, err
    assert "unknown field(s) ['stlyes']" in _reason(tmp_path / "typo.yaml")


def _reason(path):
    try:
        check_grid(load_grid(str(path)))
    except ValueError as exc:
        return str(exc)
    return ""


def test_import_refuses_binary_and_pipeline_artifacts(tmp_path, capsys):
    binary = tmp_path / "x.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    assert main(["import", str(binary)]) == 1
    assert "not valid JSON" in capsys.readouterr().err
    good = tmp_path / "ok.json"
    good.write_text("[]")
    assert main(["import", str(good), "--asset", "candidates"]) == 2
    assert "refusing to import into 'candidates'" in capsys.readouterr().err


def test_rerun_without_failed_run_is_a_clear_error(tmp_path, monkeypatch, capsys):
    home = tmp_path / "dh"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    assert main(["rerun", "--db", "university"]) == 1
    assert "no failed run of abiss_dataset_job for partition 'university'" in capsys.readouterr().err
