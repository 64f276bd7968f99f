"""Council configuration: default, YAML and TOML files, env var, validation errors."""

import pytest

from resources.llm import load_council_config
from resources.llm.config import EMBEDDED, REQUIRED_ROLES

YAML = """
members:
  qwen:
    model: openai/Qwen/Qwen2.5-7B-Instruct
    api_base: http://gpu:8000/v1
    api_key_env: VLLM_API_KEY
    temperature: 0.2
    top_p: 0.9
    max_tokens: 300
    seed: 7
    frequency_penalty: 0.1
    max_in_flight: 16
  llama:
    model: ollama_chat/llama3.1
    api_base: http://localhost:11434
councils:
  generators: [qwen]
  validators: [qwen, llama]
  user_simulator: [llama]
  system_agents: [qwen]
"""

TOML = """
[members.gpt]
model = "openai/gpt-4o-mini"
api_key_env = "OPENAI_API_KEY"
seed = 3

[councils]
default = ["gpt"]
"""


@pytest.fixture(autouse=True)
def allow_listed_key_envs(monkeypatch):
    """The operator allow-lists the key variables these example files name (issue 23 item 7)."""
    monkeypatch.setenv("QUANDARY_KEY_ENVS", "VLLM_API_KEY,OPENAI_API_KEY")


def test_default_is_embedded_with_all_roles():
    cfg = load_council_config()
    assert cfg.source == "embedded default"
    assert set(REQUIRED_ROLES) <= set(cfg.councils)
    assert all(m.api_base == EMBEDDED for m in cfg.members.values())
    assert len(cfg.council_members("validators")) == 3
    assert len({m.seed for m in cfg.council_members("validators")}) == 3


def test_yaml_via_env(tmp_path, monkeypatch):
    p = tmp_path / "council.yaml"
    p.write_text(YAML)
    monkeypatch.setenv("QUANDARY_COUNCIL_CONFIG", str(p))
    cfg = load_council_config()
    qwen = cfg.members["qwen"]
    assert qwen.name == "qwen" and qwen.max_in_flight == 16 and qwen.api_key_env == "VLLM_API_KEY"
    assert qwen.sampling_params() == {
        "temperature": 0.2,
        "top_p": 0.9,
        "max_tokens": 300,
        "seed": 7,
        "frequency_penalty": 0.1,
    }
    assert [m.name for m in cfg.council_members("validators")] == ["qwen", "llama"]
    assert cfg.members["llama"].is_local and not qwen.is_local


def test_toml_default_council_fills_roles(tmp_path):
    p = tmp_path / "council.toml"
    p.write_text(TOML)
    cfg = load_council_config(p)
    for role in REQUIRED_ROLES:
        assert [m.name for m in cfg.council_members(role)] == ["gpt"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("members: {a: {model: x}}\ncouncils: {generators: [a]}", "role 'validators' missing"),
        ("members: {a: {model: x}}\ncouncils: {default: [b]}", "unknown members"),
        ("members: {a: {model: x, colour: red}}\ncouncils: {default: [a]}", "colour"),
        ("members: {a: {model: x, max_in_flight: 0}}\ncouncils: {default: [a]}", "max_in_flight"),
    ],
)
def test_invalid_configs_fail_clearly(tmp_path, text, message):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_council_config(p)


def test_missing_file_and_unknown_role(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_council_config(tmp_path / "nope.yaml")
    with pytest.raises(KeyError, match="no council for role"):
        load_council_config().council_members("jury")
