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


@pytest.fixture
def stored_corpus(corpus_build, isolated_home):
    """``name -> None``: the session's build of a corpus stored as the latest ``ambitab_records``
    version in this test's home, as `quandary ambitab build` leaves it for `ambitab train` and
    `ambitab eval` (which read only that asset). The build itself through the CLI and Dagster is
    tested in test_assets_cli; a test that needs the stored corpus does not pay it again (#44)."""
    from pipelines.ambitab.record import records_frame
    from storage.artifacts import write_version

    def store(name: str) -> None:
        write_version(records_frame(corpus_build(name).records), "ambitab_records", name)

    return store
