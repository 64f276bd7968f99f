"""Serve a trained checkpoint as an asker for ``ambitab eval --asker checkpoint:<id>[@update]``.

The base model + the run's LoRA adapter, sampled at the run's temperature through
:class:`LocalAsker`, the class that rolled out the training episodes. ``@0`` is the untrained
policy (a run saves its zero-initialised adapter before the first update), served the same way,
so base and trained askers differ only in the adapter. The model is loaded once per checkpoint
(the episode code asks for a fresh asker per episode).
"""

import functools

from pipelines.ambitab.training.checkpoints import resolve_checkpoint
from pipelines.ambitab.training.local_asker import DecisionBatcher, LocalAsker
from pipelines.ambitab.training.model import load_model, load_tokenizer, with_adapter
from pipelines.ambitab.training.presets import resolve_model


@functools.lru_cache(maxsize=2)
def _loaded(run_dir: str, update: int):
    ref = resolve_checkpoint(f"checkpoint:{run_dir.rsplit('/', 1)[-1]}@{update}")
    src = resolve_model(ref.run["model"])
    tok = load_tokenizer(src)
    model = with_adapter(load_model(src), str(ref.adapter_dir))
    model.eval()
    return ref, src, model, tok


def checkpoint_asker(name: str, batcher: DecisionBatcher | None = None) -> LocalAsker:
    """``batcher``: sample with other episodes of the same request (:func:`.local_asker.batched_episodes`)."""
    ref = resolve_checkpoint(name)
    ref, src, model, tok = _loaded(str(ref.run_dir), ref.update)
    p = ref.run["preset"]
    return LocalAsker(
        model,
        tok,
        name=ref.name,
        model_key=f"{src.ref}+{ref.run_id}@{ref.update}",
        temperature=p["temperature"],
        max_new_tokens=p["max_new_tokens"],
        max_prompt_tokens=p["max_prompt_tokens"],
        run_seed=p["seed"],
        constrained=p.get("constrained", False),  # runs before #40 decoded freely
        question=p.get("question", "free"),
        batcher=batcher,
    )
