"""Issue 34 item 5: every path-valued setting a run accepts is confined before launch — writes to the
state root, reads to the state, checkout and data roots — and a value that came from an environment
variable (``{env: X}`` in run config) is never echoed in a message or used as a file name."""

import polars as pl
import pytest
from dagster import DagsterInvalidConfigError, asset, materialize

from assets.aisql.assets import AisqlResource, EvaluateConfig, check_evaluate_on_launch
from assets.shared.checked_config import checked_config, op_config
from assets.shared.io_manager import VersionedParquetIOManager
from assets.shared.resources import CouncilResource, SeedCatalogResource
from storage.paths import PROJECT_ROOT, UnsafePathError, confined_path, stage_input

pytestmark = pytest.mark.integration

SECRET = "s3cr3t-Value-XYZ-123"
ran = []


@asset
def probe(council: CouncilResource, seed_catalog: SeedCatalogResource):
    ran.append(1)
    return pl.DataFrame({"a": [1]})


@asset(config_schema=checked_config(EvaluateConfig, check_evaluate_on_launch))
def predictions_probe(context, aisql: AisqlResource):
    ran.append(EvaluateConfig(**op_config(context)).predictions_path)
    return pl.DataFrame({"a": [1]})


RESOURCES = {
    "io_manager": VersionedParquetIOManager(),
    "council": CouncilResource(),
    "seed_catalog": SeedCatalogResource(),
    "aisql": AisqlResource(),
}


def _refused(assets, run_config) -> str:
    ran.clear()
    with pytest.raises(DagsterInvalidConfigError) as exc:
        materialize(assets, resources=RESOURCES, run_config=run_config)
    assert not ran
    return str(exc.value)


@pytest.mark.parametrize("field", ["config_path", "log_path"])
def test_env_sourced_council_paths_are_never_echoed_or_created(isolated_home, monkeypatch, field):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.chdir(PROJECT_ROOT)  # the launchpad's code server runs in the checkout
    message = _refused([probe], {"resources": {"council": {"config": {field: {"env": "AWS_SECRET_ACCESS_KEY"}}}}})
    assert SECRET not in message and field in message
    assert not (PROJECT_ROOT / SECRET).exists() and not list(isolated_home.rglob(f"*{SECRET}*"))


def test_env_sourced_predictions_path_is_never_echoed(isolated_home, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.chdir(PROJECT_ROOT)
    cfg = {"ops": {"predictions_probe": {"config": {"predictions_path": {"env": "AWS_SECRET_ACCESS_KEY"}}}}}
    message = _refused([predictions_probe], cfg)
    assert SECRET not in message and "predictions_path" in message


@pytest.mark.parametrize("path", ["/etc/shadow", "/etc/passwd"])
def test_predictions_outside_the_roots_are_refused_before_launch(path):
    cfg = {"ops": {"predictions_probe": {"config": {"predictions_path": path}}}}
    message = _refused([predictions_probe], cfg)
    assert "predictions_path" in message and "outside the project's" in message


def test_data_root_outside_the_roots_is_refused_before_launch(tmp_path):
    message = _refused(
        [predictions_probe],
        {
            "resources": {"aisql": {"config": {"data_root": "/etc"}}},
            "ops": {"predictions_probe": {"config": {"predictions_path": str(PROJECT_ROOT / "README.md")}}},
        },
    )
    assert "data_root" in message


def test_writes_are_confined_to_the_state_root(isolated_home):
    with pytest.raises(UnsafePathError, match="state roots"):
        confined_path(str(PROJECT_ROOT / "calls.sqlite"), "log_path", write=True)
    assert confined_path(str(isolated_home / "calls.sqlite"), "log_path", write=True).parent == isolated_home


def test_the_cli_stages_a_file_from_elsewhere_under_the_state_root(isolated_home, tmp_path):
    outside = tmp_path / "preds.jsonl"
    outside.write_text('{"id": 1}\n')
    staged = stage_input(outside, "predictions")
    assert staged.is_relative_to(isolated_home / "inputs" / "predictions") and staged.read_text() == outside.read_text()
    assert confined_path(str(staged), "predictions_path") == staged
    inside = PROJECT_ROOT / "README.md"
    assert stage_input(inside, "predictions") == inside  # already readable: used as it is
