"""Makes ``checkpoint:<run_id>[@update]`` an asker name of the evaluation (imported by
assets.ambitab.evaluation; light: torch loads only when a checkpoint is evaluated)."""

from pipelines.ambitab.protocol.askers import register_asker_prefix
from pipelines.ambitab.training.checkpoints import PREFIX, resolve_checkpoint


def _build(name: str):
    from pipelines.ambitab.training.serving import checkpoint_asker  # lazy: torch, only when one is evaluated

    return checkpoint_asker(name)


register_asker_prefix(PREFIX, resolve_checkpoint, _build)
