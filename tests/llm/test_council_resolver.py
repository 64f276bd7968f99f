"""#28 item 2: the council file is chosen in one place, explicit path > $QUANDARY_COUNCIL_CONFIG >
default, and handed on as an absolute path."""

import pytest

from resources.llm.config import CONFIG_ENV, CouncilFileNotFound, resolve_council_path


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    paths = {}
    for name in ("explicit", "env", "default"):
        paths[name] = tmp_path / f"{name}.yaml"
        paths[name].write_text("members: {}\n")
    return paths


def test_explicit_wins_over_env_and_env_over_default(files, monkeypatch):
    assert resolve_council_path() is None  # nothing set: the embedded default council
    assert resolve_council_path(None, default=files["default"]) == files["default"]
    monkeypatch.setenv(CONFIG_ENV, str(files["env"]))
    assert resolve_council_path(None, default=files["default"]) == files["env"]
    assert resolve_council_path(files["explicit"], default=files["default"]) == files["explicit"]


def test_a_relative_path_is_the_working_directory_and_comes_back_absolute(files, monkeypatch, tmp_path):
    got = resolve_council_path("explicit.yaml")
    assert got.is_absolute() and got == tmp_path / "explicit.yaml"
    monkeypatch.setenv(CONFIG_ENV, "env.yaml")
    assert resolve_council_path() == tmp_path / "env.yaml"


def test_a_missing_file_is_one_line_naming_the_path_and_the_variable(files, monkeypatch, tmp_path):
    monkeypatch.setenv(CONFIG_ENV, "gone.yaml")
    with pytest.raises(CouncilFileNotFound) as err:
        resolve_council_path()
    message = str(err.value)
    assert "\n" not in message
    assert str(tmp_path / "gone.yaml") in message and CONFIG_ENV in message
    with pytest.raises(FileNotFoundError, match="nope.yaml"):  # still a FileNotFoundError for old callers
        resolve_council_path("nope.yaml")
