"""Training the AmbiTab asker with multi-turn GRPO (spec §7, paper Appendix D).

Import-light on purpose: ``presets`` and ``decisions`` are plain Python; the modules that need
torch (``model``, ``loss``, ``local_asker``, ``trainer``) are imported only by the code that trains
or serves a checkpoint, so ``make demo`` and the evaluation commands never load torch.
"""
