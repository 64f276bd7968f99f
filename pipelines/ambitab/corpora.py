"""The registry of AmbiTab conversions: one ``build`` per corpus, called the same way.

``build_corpus(name, data_root, seed=..., council=..., progress=..., **options)`` returns a
:class:`~pipelines.ambitab.build.BuildResult`. Corpora whose paper build needs an LLM (EW-Bird's
keep/drop filter, Bird's authoring stages) take a council; without one, that step is reported as
skipped, never silently dropped.
"""

from __future__ import annotations

import importlib
import inspect
import os
from pathlib import Path

from pipelines.ambitab.build import BuildResult
from pipelines.ambitab.record import CORPORA
from storage.paths import shared_data_root, user_path

DATA_ENV = "QUANDARY_AMBITAB_DATA"
# module per corpus (the corpus names are the record's `corpus` values)
MODULES = {
    "ambrosia": "ambrosia",
    "ambiqt": "ambiqt",
    "taco": "taco",
    "ew_bird": "ewbird",
    "bird_interact": "bird_interact",
    "bird": "bird",
}


def default_data_root() -> Path:
    """``$QUANDARY_AMBITAB_DATA``, else the shared data folder (``storage.paths.shared_data_root``:
    ``$QUANDARY_DATA`` or ``../shared/data`` next to the repo), absolute."""
    env = os.environ.get(DATA_ENV)
    return user_path(env) if env else shared_data_root()


def available() -> list[str]:
    out = []
    for name in CORPORA:
        try:
            importlib.import_module(f"pipelines.ambitab.{MODULES[name]}")
        except ModuleNotFoundError:
            continue
        out.append(name)
    return out


def converter(name: str):
    if name not in CORPORA:
        raise ValueError(f"unknown corpus {name!r}; expected one of {', '.join(CORPORA)}")
    try:
        return importlib.import_module(f"pipelines.ambitab.{MODULES[name]}")
    except ModuleNotFoundError as exc:
        raise ValueError(f"corpus {name!r} has no conversion in this build") from exc


def build_corpus(name: str, data_root: Path | None = None, seed: int = 0, progress=None, **options) -> BuildResult:
    module = converter(name)
    fn = module.build
    params = inspect.signature(fn).parameters
    kwargs = {k: v for k, v in options.items() if k in params}
    if "progress" in params:
        kwargs["progress"] = progress
    return fn(Path(data_root or default_data_root()), seed=seed, **kwargs)
