"""Load the asker's model and tokenizer (transformers), refuse one without a chat template, wrap
it in a LoRA adapter (peft). Everything here needs the `train` extra."""

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer

from pipelines.ambitab.training.presets import ModelSource, Preset


class ModelError(ValueError):
    """A model that cannot be used as an asker (one line, names the model and what to do)."""


def load_tokenizer(src: ModelSource):
    try:
        tok = AutoTokenizer.from_pretrained(src.path, gguf_file=src.gguf_file)
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


def load_model(src: ModelSource, dtype: torch.dtype | None = None):
    try:
        return AutoModelForCausalLM.from_pretrained(src.path, gguf_file=src.gguf_file, dtype=dtype)
    except (OSError, ValueError) as exc:
        raise ModelError(f"model {src.ref}: cannot load its weights ({str(exc).splitlines()[0][:160]})") from exc


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
    (π_ref = the model with the adapter disabled)."""
    return get_peft_model(model, lora_config(preset))


def with_adapter(model, adapter_dir: str, trainable: bool = False):
    """The base model with a saved adapter (a checkpoint)."""
    return PeftModel.from_pretrained(model, adapter_dir, is_trainable=trainable)
