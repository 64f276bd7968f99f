"""AmbiTab assets through a real Dagster run, and the `quandary ambitab` commands."""

import json

import pytest

from cli import main
from pipelines.ambitab.export import export_path, load_records, load_rejects
from quality.ambitab import RuleOutcome
from storage.artifacts import latest_path


@pytest.fixture
def ambrosia_built(shared_data, capsys):
    code = main(["ambitab", "build", "--corpus", "ambrosia", "--data", str(shared_data)])
    out = capsys.readouterr().out
    assert code == 0, out
    return out


def test_build_materializes_records_rejects_checks_and_export(ambrosia_built, isolated_home):
    assert "ambrosia  303" in ambrosia_built and "6/6 passed" in ambrosia_built
    records = load_records("ambrosia")
    assert len(records) == 303
    assert load_rejects("ambrosia").height == 3
    lines = export_path("ambrosia").read_text().splitlines()
    assert len(lines) == 303 and json.loads(lines[0])["corpus"] == "ambrosia"
    assert str(export_path("ambrosia")).startswith(str(isolated_home))


def test_show_prints_each_party_its_view(ambrosia_built, capsys):
    rec = load_records("ambrosia")[0]
    assert main(["ambitab", "show", rec.record_id[:14], "--view", "asker"]) == 0
    asker = capsys.readouterr().out
    assert rec.spec.user_query in asker
    assert rec.ambiguities[0].resolution not in asker and "reference_sql" not in asker
    assert main(["ambitab", "show", rec.record_id, "--view", "oracle"]) == 0
    oracle = capsys.readouterr().out
    assert rec.ambiguities[0].resolution in oracle and '"reference_sql": null' in oracle
    assert main(["ambitab", "show", rec.record_id, "--view", "verifier"]) == 0
    verifier = capsys.readouterr().out
    assert "reference_sql" in verifier and rec.ambiguities[0].resolution not in verifier


def test_export_and_rejects_commands(ambrosia_built, capsys, tmp_path):
    out = tmp_path / "all.jsonl"
    assert main(["ambitab", "export", "--out", str(out)]) == 0
    assert len(out.read_text().splitlines()) == 303
    assert main(["ambitab", "rejects", "--corpus", "ambrosia"]) == 0
    assert "3 rejected row(s)" in capsys.readouterr().out


def test_clear_errors(tmp_path, capsys):
    assert main(["ambitab", "show", "nope", "--view", "asker"]) == 1
    assert "run `quandary ambitab build` first" in capsys.readouterr().err
    assert main(["ambitab", "build", "--corpus", "ambrosia", "--data", str(tmp_path / "absent")]) == 2
    assert "not found" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["ambitab", "build", "--corpus", "ambrosia", "--data", str(tmp_path / "empty")]) == 1
    err = capsys.readouterr().err
    assert "Ambrosia resplit test file not found" in err and "Traceback" not in err
    assert main(["ambitab", "build", "--corpus", "spider"]) == 2


def test_llm_steps_auto_skips_the_filter_with_the_embedded_default(shared_data, capsys):
    # no council config file: the EW-Bird filter is reported as skipped, not run on the toy model
    assert main(["ambitab", "build", "--corpus", "ew_bird", "--data", str(shared_data)]) == 0
    out = capsys.readouterr().out
    assert "skipped llm keep/drop filter (126 affected): LLM steps off" in out
    assert "ew_bird  1386" in out


def test_a_failed_blocking_check_stores_and_exports_nothing(shared_data, capsys, monkeypatch):
    """Issue 20 item 3: a corpus whose blocking check fails is never exported (nor stored)."""
    import assets.ambitab.corpus as corpus_assets  # lazy: imports dagster (~1 s); only the tests that need it pay

    failing = RuleOutcome("ambitab_readings_differ", False, 1, ["AVT taco-avt-x: readings a and b give equal results"])
    monkeypatch.setattr(corpus_assets, "readings_differ_rule", lambda df, results: failing)
    assert main(["ambitab", "build", "--corpus", "taco", "--data", str(shared_data)]) == 1
    err = capsys.readouterr().err
    assert "ambitab_readings_differ" in err and "give equal results" in err and "Traceback" not in err
    assert not export_path("taco").exists()
    assert latest_path("ambitab_records", "taco") is None


def test_taco_builds_green_by_default(shared_data, capsys):
    assert main(["ambitab", "build", "--corpus", "taco", "--data", str(shared_data)]) == 0
    out = capsys.readouterr().out
    assert "taco" in out and "ambitab_readings_differ" not in out
