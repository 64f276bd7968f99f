"""One prompt plumbing for every paper: chat messages and prompt code versions (a shared core).

ABISS generation and validation, the interaction benchmark, AmbiTab and the AI-SQL evaluation
build their requests and version their prompts with these three functions:

* :func:`messages` — the chat messages of one request: an optional system message, then the user
  message. Long shared parts (schema context, rubric, examples) belong in the system message so
  servers with prefix caching reuse them across requests.
* :func:`prompt_version` — a prompt's code version, derived from its template text: the first 12
  hex digits of SHA-256 over the parts joined by NUL. Assets use it as their Dagster
  ``code_version``, so editing a prompt marks the asset and everything downstream stale in the UI
  (nobody has to remember to bump a number).
* :func:`source_version` — the same for prompts written inline in code (f-strings in builder
  functions): :func:`prompt_version` of the source files' text.

What enters a version is the caller's choice of parts (ABISS adds its system message and the
taxonomy, which every ABISS prompt embeds). Plain Python; imports no paper package.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

VERSION_LENGTH = 12  # hex digits of a prompt version


def messages(system: str | None, user: str) -> list[dict]:
    """``[system, user]`` chat messages; only the user message when ``system`` is None."""
    out = [{"role": "system", "content": system}] if system is not None else []
    out.append({"role": "user", "content": user})
    return out


def prompt_version(*parts: str) -> str:
    """The code version of a prompt made of ``parts`` (templates, fixed instructions, examples)."""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:VERSION_LENGTH]


def source_version(*paths: str | Path) -> str:
    """The code version of prompts (or rules) written inline in the source files ``paths``."""
    return prompt_version(*(Path(p).read_text(encoding="utf-8") for p in paths))
