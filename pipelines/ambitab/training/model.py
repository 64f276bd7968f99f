"""Load the asker's model and tokenizer (transformers), refuse one without a chat template, wrap
it in a LoRA adapter (peft). Everything here needs the `train` extra."""

import os

from resources.startup import heavy_imports

with heavy_imports():  # torch, transformers, peft: seconds of import (resources/startup.py)
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

from pipelines.ambitab.training.presets import ModelSource, Preset
from pipelines.ambitab.training.tokenizer_cache import load_gguf_tokenizer


class ModelError(ValueError):
    """A model that cannot be used as an asker (one line, names the model and what to do)."""


def check_hub_model(src: ModelSource, timeout_s: float = 3.0) -> None:
    """A hub id is used from the local cache, or downloaded when the hub answers within
    ``timeout_s``; offline it is refused at once (transformers retried for ~86 s first)."""
    if src.gguf_file or os.path.isdir(src.path):
        return
    from huggingface_hub import constants, try_to_load_from_cache

    if isinstance(try_to_load_from_cache(src.path, "config.json"), str):
        return  # cached: transformers loads it without the network
    if constants.HF_HUB_OFFLINE:
        raise ModelError(
            f"model {src.path}: not in the local model cache and HF_HUB_OFFLINE is set; "
            "download it first or give a local model folder (--model PATH)"
        )
    import socket
    from urllib.parse import urlparse

    url = urlparse(constants.ENDPOINT)
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=timeout_s).close()
    except OSError:
        raise ModelError(
            f"model {src.path}: not in the local model cache and the model hub is unreachable; "
            "give a local model folder (--model PATH)"
        ) from None


def load_tokenizer(src: ModelSource):
    try:
        if src.gguf_file:
            tok = load_gguf_tokenizer(src.path, src.gguf_file)
        else:
            tok = AutoTokenizer.from_pretrained(src.path)
    except (OSError, ValueError) as exc:
        raise ModelError(f"model {src.ref}: cannot load its tokenizer ({str(exc).splitlines()[0][:160]})") from exc
    check_chat_template(tok, src.ref)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def check_chat_template(tok, ref: str) -> None:
    if not getattr(tok, "chat_template", None):
        raise ModelError(
            f"model {ref}: its tokenizer has no chat template; the asker reads chat messages — "
            "use an instruction-tuned (chat) model"
        )


def free_cores() -> int:
    """CPU cores not busy with other work (load average of the last minute), at least one. On a
    shared machine more threads than free cores slow torch down (at load 8 on 2 cores, one thread
    prefilled 4x and decoded 6x faster than two)."""
    n = os.cpu_count() or 1
    return max(1, min(n, n - round(os.getloadavg()[0])))


def set_threads(n: int | None = None) -> int:
    n = n or free_cores()
    torch.set_num_threads(n)
    return n


def resolve_device(device: str | None) -> str:
    """``auto`` (None): cuda when present, else cpu; an explicit device must exist here."""
    if device in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError(
            f"device {device!r}: this torch build sees no CUDA GPU (torch {torch.__version__}); "
            "install a CUDA build of torch (docs/training.md) or use --device cpu"
        )
    if device != "cpu" and not device.startswith("cuda"):
        raise ModelError(f"device {device!r}: use cpu, cuda or cuda:N")
    return device


def load_model(src: ModelSource, dtype: torch.dtype | None = None, device: str = "cpu"):
    """The base model on ``device``: bf16 on a GPU (the paper's setting), float32 on the CPU
    (unless ``dtype`` says otherwise)."""
    if dtype is None:
        dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    try:
        model = AutoModelForCausalLM.from_pretrained(src.path, gguf_file=src.gguf_file, dtype=dtype)
    except (OSError, ValueError) as exc:
        raise ModelError(f"model {src.ref}: cannot load its weights ({str(exc).splitlines()[0][:160]})") from exc
    return model.to(device)


def tiny_random_model(tokenizer, initializer_range: float = 0.02):
    """A tiny randomly initialised Llama with ``tokenizer``'s vocabulary (tests and the benches'
    smoke runs: the real code paths in seconds). A larger ``initializer_range`` gives weights a
    LoRA can move the choices of (at 0.02 the logits barely leave uniform)."""
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
        initializer_range=initializer_range,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return LlamaForCausalLM(cfg)


def lora_config(preset: Preset) -> LoraConfig:
    return LoraConfig(
        r=preset.lora_r,
        lora_alpha=preset.lora_alpha,
        lora_dropout=preset.lora_dropout,
        target_modules=list(preset.lora_targets),
        bias="none",
        task_type="CAUSAL_LM",
    )


def with_lora(model, preset: Preset):
    """A fresh LoRA adapter on q/k/v/o and gate/up/down; the frozen base is the reference policy
    (π_ref = the model with the adapter disabled). With ``gradient_checkpointing`` activations
    are recomputed in the backward pass (the paper preset's long prompts on one GPU)."""
    if preset.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()  # the frozen embeddings feed a checkpointed LoRA stack
    return get_peft_model(model, lora_config(preset))


def with_adapter(model, adapter_dir: str, trainable: bool = False):
    """The base model with a saved adapter (a checkpoint)."""
    return PeftModel.from_pretrained(model, adapter_dir, is_trainable=trainable)
