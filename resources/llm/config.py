"""Council configuration: members (litellm model strings + sampling params) and per-role councils.

The file is YAML (``.yaml``/``.yml``) or TOML (``.toml``), pointed to by ``$QUANDARY_COUNCIL_CONFIG``
(or passed explicitly). Without a file, :data:`DEFAULT_CONFIG` is used: the embedded SmolLM2 server,
with three differently-seeded members for the validators so votes are real votes. Example::

    members:
      qwen:                                   # member name (used in logs and votes)
        model: openai/Qwen/Qwen2.5-7B-Instruct # any litellm model string
        api_base: http://gpu-box:8000/v1       # "embedded" = the built-in local server
        api_key_env: VLLM_API_KEY              # name of the env var holding the key (optional)
        temperature: 0.0
        top_p: 1.0
        max_tokens: 512
        seed: 7
        frequency_penalty: 0.0
        max_in_flight: 16                      # concurrent requests to this member
    councils:
      generators: [qwen]
      validators: [qwen, llama, gpt]
      user_simulator: [qwen]
      system_agents: [qwen]

Roles are free-form names; :data:`REQUIRED_ROLES` must be present (an omitted role falls back to the
``default`` council when one is given).
"""

import os
import tomllib
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

CONFIG_ENV = "QUANDARY_COUNCIL_CONFIG"
EMBEDDED = "embedded"  # api_base sentinel: resolved to the in-process server's URL at call time
EMBEDDED_MODEL = "openai/smollm2"
EMBEDDED_CONTEXT_TOKENS = 4096  # the embedded server's context per slot (resources/llm/embedded.py)
EMBEDDED_STALL_S = 120.0  # no token for this long from the local server: it is stuck, not busy
DEFAULT_CONTEXT_TOKENS = 32768  # a conservative window for hosted / served models that do not say
PROMPT_OVERHEAD_TOKENS = 1200  # instructions, question, candidate and output schema around the schema


KEY_ENV_PREFIX = "QUANDARY_KEY_"
KEY_ENVS_ENV = "QUANDARY_KEY_ENVS"


def check_key_env(name: str | None) -> None:
    """``api_key_env`` may only name ``QUANDARY_KEY_*`` variables or ones the operator listed in
    ``$QUANDARY_KEY_ENVS`` (comma-separated): a council file (or run config) must not be able to
    send any environment variable (HOME, a cloud token) to the URL it names (issue 23 item 7)."""
    if name is None:
        return
    allowed = {n.strip() for n in os.environ.get(KEY_ENVS_ENV, "").split(",") if n.strip()}
    if not (name.startswith(KEY_ENV_PREFIX) and len(name) > len(KEY_ENV_PREFIX)) and name not in allowed:
        raise ValueError(
            f"api_key_env {name!r} is not allowed: name the key {KEY_ENV_PREFIX}<NAME>, or allow-list "
            f"it in ${KEY_ENVS_ENV} (comma-separated)"
        )


# The variable a provider library reads when a hosted member names no ``api_key_env`` (the client
# then passes no key and litellm falls back to it). Only well-known providers: an unknown one is
# not guessed at.
PROVIDER_KEY_ENVS = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "groq": "GROQ_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "cohere": "COHERE_API_KEY",
    "fireworks_ai": "FIREWORKS_API_KEY",
}


def missing_key(member: "Member") -> str | None:
    """Why ``member`` would be sent without its API key, in one line naming the variable Quandary
    reads (``api_key_env``, a ``QUANDARY_KEY_*`` name) — or None when its key is set or it needs
    none (the embedded server, a local server). No network call: this only reads the environment,
    so a missing key is found before a run exists instead of after a provider's refusal (#31 item 2)."""
    if member.api_key_env:
        if os.environ.get(member.api_key_env):
            return None
        return f"member {member.name!r} ({member.model}): ${member.api_key_env} is not set (its api_key_env)"
    if member.is_local or member.api_base:
        return None  # a local or self-hosted server: no key unless the council file names one
    provider = member.model.partition("/")[0] if "/" in member.model else "openai"
    fallback = PROVIDER_KEY_ENVS.get(provider)
    if fallback is None or os.environ.get(fallback):
        return None
    return (
        f"member {member.name!r} ({member.model}) names no api_key_env: add `api_key_env: "
        f"{KEY_ENV_PREFIX}{provider.upper()}` to it in the council file and set that variable"
    )


def missing_keys(config: "CouncilConfig", roles=None) -> list[str]:
    """:func:`missing_key` for every member the council's roles (or ``roles``) name, once each."""
    names = [n for role, ns in config.councils.items() if roles is None or role in roles for n in ns]
    return [msg for n in dict.fromkeys(names) if (msg := missing_key(config.members[n])) is not None]


def schema_token_budget(members) -> int:
    """Tokens the schema context may take so every prompt fits every member's window."""
    return max(256, min(m.context_window - max(m.max_tokens or 0, 512) - PROMPT_OVERHEAD_TOKENS for m in members))


REQUIRED_ROLES = ("generators", "validators", "user_simulator", "system_agents")
# Roles filled from the `default` council when a config leaves them out (not required otherwise).
DEFAULTED_ROLES = ("askers", "solvers", "oracles")

# Parameters that change the answer, hence part of the cache key.
SAMPLING_PARAMS = ("temperature", "top_p", "max_tokens", "seed", "frequency_penalty")


class Member(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    model: str = Field(description="litellm model string, e.g. openai/..., ollama_chat/..., anthropic/...")
    api_base: str | None = None
    api_key_env: str | None = None
    temperature: float | None = 0.0
    top_p: float | None = None
    max_tokens: int | None = 256
    seed: int | None = 0
    frequency_penalty: float | None = None
    max_in_flight: int = Field(4, ge=1)
    # Per attempt: until the first token when the reply is streamed (see stall_timeout_s), else the
    # whole answer.
    timeout_s: float = Field(120.0, gt=0)
    # Stream the reply and fail an attempt only when no token arrived for this long: a deadline that
    # tracks progress, so a slow but working server (a busy machine) is waited for. Unset: 120 s for
    # the embedded server, not streamed (one wall-time timeout_s) otherwise (#24 item 1).
    stall_timeout_s: float | None = Field(None, gt=0)
    max_retries: int = Field(4, ge=0)
    backoff_base_s: float = Field(0.5, ge=0)
    backoff_max_s: float = Field(20.0, ge=0)
    # How to ask for JSON: "json_schema" (OpenAI structured outputs; vLLM, llama.cpp, Ollama and most
    # hosted APIs accept it), "json_object", or "prompt" (schema only in the prompt).
    structured_output: Literal["json_schema", "json_object", "prompt"] = "json_schema"
    repair: bool = True  # one repair call on unparseable output
    # "auto": an OpenAI-compatible server (openai/ or hosted_vllm/ model with an api_base: vLLM,
    # llama.cpp, the embedded server) is called directly over a pooled HTTP session, any other
    # provider through litellm; "litellm": always through litellm (issue 21 item 6).
    transport: Literal["auto", "litellm"] = "auto"
    # The model's context window in tokens; prompts' schema context is fitted to it (#13 item 6).
    # Unset: 4096 for the embedded server, DEFAULT_CONTEXT_TOKENS otherwise.
    context_tokens: int | None = Field(None, ge=512)

    @field_validator("api_key_env")
    @classmethod
    def _allowed_key_env(cls, v: str | None) -> str | None:
        check_key_env(v)
        return v

    @property
    def context_window(self) -> int:
        if self.context_tokens:
            return self.context_tokens
        return EMBEDDED_CONTEXT_TOKENS if self.is_embedded else DEFAULT_CONTEXT_TOKENS

    @property
    def stall_deadline_s(self) -> float | None:
        """Seconds without a token after which a streamed attempt fails; ``None``: not streamed."""
        if self.stall_timeout_s is not None:
            return self.stall_timeout_s
        return EMBEDDED_STALL_S if self.is_embedded else None

    @property
    def is_embedded(self) -> bool:
        return self.api_base == EMBEDDED

    @property
    def is_local(self) -> bool:
        """Local models cost nothing: the embedded server, loopback servers, Ollama."""
        base = self.api_base or ""
        return (
            self.is_embedded
            or any(h in base for h in ("127.0.0.1", "localhost", "[::1]"))
            or self.model.startswith(("ollama/", "ollama_chat/", "hosted_vllm/", "scripted/"))
        )

    def sampling_params(self) -> dict:
        return {k: getattr(self, k) for k in SAMPLING_PARAMS if getattr(self, k) is not None}


class CouncilConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    members: dict[str, Member]
    councils: dict[str, list[str]]
    source: str = "embedded default"

    @model_validator(mode="before")
    @classmethod
    def _names_from_keys(cls, data):
        if isinstance(data, dict) and isinstance(data.get("members"), dict):
            data = dict(data)
            data["members"] = {
                name: ({**m, "name": m.get("name", name)} if isinstance(m, dict) else m)
                for name, m in data["members"].items()
            }
        return data

    @model_validator(mode="after")
    def _check(self):
        default = self.councils.get("default")
        for role in REQUIRED_ROLES:
            if role not in self.councils:
                if default is None:
                    raise ValueError(f"council config: role {role!r} missing (and no 'default' council)")
                self.councils[role] = list(default)
        for role in DEFAULTED_ROLES:
            if role not in self.councils and default is not None:
                self.councils[role] = list(default)
        for role, names in self.councils.items():
            if not names:
                raise ValueError(f"council config: role {role!r} has no members")
            unknown = [n for n in names if n not in self.members]
            if unknown:
                raise ValueError(f"council config: role {role!r} names unknown members {unknown}")
        return self

    def council_members(self, role: str) -> list[Member]:
        if role not in self.councils:
            raise KeyError(f"no council for role {role!r}; configured roles: {sorted(self.councils)}")
        return [self.members[n] for n in self.councils[role]]

    def uses_embedded(self) -> bool:
        return any(m.is_embedded for m in self.members.values())


def _embedded_member(name: str, **overrides) -> dict:
    # Constrained decoding ends at the closing brace, so a generous budget costs nothing and keeps
    # the SQL-grounding schema (links, sub-questions, SQL) from being cut off.
    base = dict(model=EMBEDDED_MODEL, api_base=EMBEDDED, temperature=0.0, max_tokens=512, seed=0, max_in_flight=2)
    return {**base, **overrides, "name": name}


DEFAULT_CONFIG: dict = {
    "members": {
        "smollm2": _embedded_member("smollm2"),
        # Three seeds/temperatures of the same tiny model: cheap, but makes council votes real votes.
        "smollm2-s1": _embedded_member("smollm2-s1", seed=1, temperature=0.7),
        "smollm2-s2": _embedded_member("smollm2-s2", seed=2, temperature=0.7),
    },
    "councils": {
        "generators": ["smollm2"],
        "validators": ["smollm2", "smollm2-s1", "smollm2-s2"],
        "user_simulator": ["smollm2"],
        "system_agents": ["smollm2"],
        "askers": ["smollm2"],
        "solvers": ["smollm2"],
        "oracles": ["smollm2"],
        "ai_operator": ["smollm2"],  # the LLM inside AI.IF / NLfilter (aisql)
        "judges": ["smollm2"],  # autorater and LLM-SQL-Solver baselines (aisql)
        "feedback_judges": ["smollm2"],  # ABISS FB: does the system's feedback match the expected one
    },
}


class CouncilFileNotFound(FileNotFoundError):
    """The council file a path, ``$QUANDARY_COUNCIL_CONFIG`` or a default names does not exist."""


def resolve_council_path(
    explicit: str | os.PathLike | None = None, default: str | os.PathLike | None = None
) -> Path | None:
    """The one place the council file is chosen (#28 item 2): ``explicit`` (an option, a resource's
    ``config_path``), else ``$QUANDARY_COUNCIL_CONFIG``, else ``default`` (None: the embedded default
    council, no file). Returns an absolute path (a relative one is the caller's working directory),
    checked to exist; a missing file raises :class:`CouncilFileNotFound` in one line naming the path
    and where it came from. Callers resolve once at their edge and pass the path down as a value."""
    env = os.environ.get(CONFIG_ENV) or None
    chosen, origin = (
        (explicit, "given path")
        if explicit
        else (env, f"${CONFIG_ENV}")
        if env
        else (default, "default")
        if default
        else (None, "")
    )
    if chosen is None:
        return None
    path = Path(os.path.abspath(os.path.expanduser(os.fspath(chosen))))
    if not path.is_file():
        raise CouncilFileNotFound(
            f"council config {path} not found ({origin}); fix the path or unset {CONFIG_ENV} for the embedded model"
        )
    return path


def load_council_config(path: str | os.PathLike | None = None) -> CouncilConfig:
    """Load the council config from ``path``, else ``$QUANDARY_COUNCIL_CONFIG``, else the default
    (:func:`resolve_council_path`)."""
    p = resolve_council_path(path)
    if p is None:
        return CouncilConfig.model_validate(DEFAULT_CONFIG)
    text = p.read_text()
    data = tomllib.loads(text) if p.suffix == ".toml" else yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError(f"council config {p}: expected a mapping with 'members' and 'councils'")
    data = {**data, "source": str(p.resolve())}
    return CouncilConfig.model_validate(data)
