"""Issue 23 item 7: run config given at launch (the UI's launchpad) cannot turn the host against
itself — resource paths outside the project's home are refused at launch, a council file given at
launch is checked at launch, and api_key_env only accepts allow-listed names."""

import polars as pl
import pytest
from dagster import DagsterInvalidConfigError, asset, materialize

from assets.shared.io_manager import VersionedParquetIOManager
from assets.shared.resources import CouncilResource, SeedCatalogResource
from resources.llm.config import load_council_config

pytestmark = pytest.mark.integration

RESOURCES = {
    "io_manager": VersionedParquetIOManager(),
    "council": CouncilResource(),
    "seed_catalog": SeedCatalogResource(),
}
ran = []


@asset
def probe(council: CouncilResource, seed_catalog: SeedCatalogResource):
    ran.append(1)
    return pl.DataFrame({"a": [1]})


def _launch(resource, field, value):
    return materialize([probe], resources=RESOURCES, run_config={"resources": {resource: {"config": {field: value}}}})


@pytest.mark.parametrize(
    "resource,field",
    [("io_manager", "base_dir"), ("council", "config_path"), ("council", "log_path"), ("seed_catalog", "catalog_path")],
)
def test_resource_paths_outside_home_are_refused_at_launch(tmp_path, resource, field):
    ran.clear()
    outside = tmp_path / "outside" / "x"
    with pytest.raises(DagsterInvalidConfigError) as exc:
        _launch(resource, field, str(outside))
    assert field in str(exc.value) and "outside" in str(exc.value)
    assert not ran and not (tmp_path / "outside").exists()


def test_council_file_given_at_launch_is_checked_at_launch(isolated_home):
    ran.clear()
    bad = isolated_home / "council.yaml"
    isolated_home.mkdir(parents=True, exist_ok=True)
    bad.write_text("members: [unclosed\n")
    with pytest.raises(DagsterInvalidConfigError) as exc:
        _launch("council", "config_path", str(bad))
    assert "YAML syntax error" in str(exc.value) and not ran
    with pytest.raises(DagsterInvalidConfigError):
        _launch("council", "config_path", "/etc/passwd")
    assert not ran


def test_paths_inside_home_are_accepted(isolated_home):
    ran.clear()
    result = _launch("io_manager", "base_dir", str(isolated_home / "elsewhere_artifacts"))
    assert result.success and ran and (isolated_home / "elsewhere_artifacts" / "probe").is_dir()


def test_api_key_env_must_be_allow_listed(isolated_home, monkeypatch):
    isolated_home.mkdir(parents=True, exist_ok=True)
    cfg = isolated_home / "council.yaml"

    def write(env):
        cfg.write_text(
            "members:\n  m:\n    model: openai/x\n    api_base: http://127.0.0.1:9/v1\n"
            f"    api_key_env: {env}\ncouncils:\n  default: [m]\n"
        )

    write("HOME")
    with pytest.raises(ValueError) as exc:
        load_council_config(cfg)
    assert "HOME" in str(exc.value) and "QUANDARY_KEY_" in str(exc.value)
    ran.clear()
    with pytest.raises(DagsterInvalidConfigError):
        _launch("council", "config_path", str(cfg))
    assert not ran
    write("QUANDARY_KEY_GPU_BOX")
    assert load_council_config(cfg).members["m"].api_key_env == "QUANDARY_KEY_GPU_BOX"
    write("VLLM_API_KEY")
    monkeypatch.setenv("QUANDARY_KEY_ENVS", "OPENAI_API_KEY, VLLM_API_KEY")
    assert load_council_config(cfg).members["m"].api_key_env == "VLLM_API_KEY"
