"""The architecture is a contract: `lint-imports` (import-linter, configured in pyproject.toml) must
keep every layer, independence, forbidden and acyclic contract. A file moved across a layer
boundary, or a new upward import, fails here."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.unit


def _lint(cwd: Path, config: Path | None = None) -> subprocess.CompletedProcess:
    args = [str(LINT_IMPORTS), "--no-cache"] + (["--config", str(config)] if config else [])
    return subprocess.run(
        args,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(cwd)},
    )


def test_every_import_contract_is_kept():
    result = _lint(REPO)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert re.search(r"Contracts: (\d+) kept, 0 broken", result.stdout)


def _write(root: Path, module: str, body: str = "") -> None:
    path = root.joinpath(*module.split(".")).with_suffix(".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    for parent in [path.parent, *path.parent.parents]:
        if parent == root:
            break
        (parent / "__init__.py").touch()
    path.write_text(body)


def test_the_layer_contract_catches_an_upward_import(tmp_path):
    """The same configuration over a tiny tree with one domain module importing the Dagster layer."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["type"] == "layers")
    for top in config["root_packages"]:
        _write(tmp_path, f"{top}.base")
    _write(tmp_path, "pipelines.report", "import assets.base\n")
    (tmp_path / "setup.cfg").write_text(
        "[importlinter]\nroot_packages =\n"
        + "".join(f"    {p}\n" for p in config["root_packages"])
        + "\n[importlinter:contract:layers]\nname = layers\ntype = layers\nlayers =\n"
        + "".join(f"    {layer}\n" for layer in layers["layers"])
    )
    result = _lint(tmp_path, tmp_path / "setup.cfg")
    assert result.returncode != 0
    assert "pipelines.report -> assets.base" in result.stdout
