"""A module imported on its first attribute use, for test files whose imports are heavy.

Every pytest-xdist worker imports every test file when it collects, whether or not it runs the
file's tests. The trainer's tests import torch, transformers, peft and TRL (~9 s of CPU): imported
at collection, four workers paid it four times to run the tests on one (#44). Such a file binds
``torch = lazy("torch")`` and ``loss = lazy("pipelines.ambitab.training.loss")`` at module level and
writes ``loss.decision_loss(...)``; the import happens in the first test that uses it.
"""

from __future__ import annotations

import importlib
from types import ModuleType


class LazyModule:
    __slots__ = ("_name",)

    def __init__(self, name: str):
        object.__setattr__(self, "_name", name)

    def __getattr__(self, attr: str):
        if attr.startswith("_"):  # pytest's collection looks for markers (``_pytestfixturefunction``…)
            raise AttributeError(attr)  # on every module-level name: those must not import
        module: ModuleType = importlib.import_module(object.__getattribute__(self, "_name"))
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<lazy module {object.__getattribute__(self, '_name')}>"


def lazy(name: str) -> LazyModule:
    return LazyModule(name)
