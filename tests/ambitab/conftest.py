"""Fixtures shared by the AmbiTab tests: each deterministic corpus built once per session (#44)."""

import dataclasses

import pytest

from pipelines.ambitab.corpora import build_corpus


@pytest.fixture(scope="session")
def corpus_build(shared_data):
    """``name -> BuildResult`` of a corpus converted from ``../shared/data`` with its defaults, built
    once per session (a build executes every reference query: seconds on a loaded machine, and a
    dozen tests read the same Ambrosia build). Each call gets its own lists; the records are frozen.
    A test of the conversion itself (determinism, a damaged source) still builds its own."""
    cache = {}

    def get(name: str):
        if name not in cache:
            cache[name] = build_corpus(name, shared_data)
        res = cache[name]
        return dataclasses.replace(
            res, records=list(res.records), rejects=list(res.rejects), skipped=list(res.skipped), stats=dict(res.stats)
        )

    return get
