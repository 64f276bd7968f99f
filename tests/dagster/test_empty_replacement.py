"""#42 item 2 at the store level: a growing table's run that produced no rows does not replace the
rows stored before it (the run fails naming the table), unless the run is tagged to empty it."""

import polars as pl
from dagster import Config, asset, materialize

from assets.shared.io_manager import GROWING, REPLACE_WITH_EMPTY, VersionedParquetIOManager
from storage.stores import artifact_store

SCHEMA = {"question_id": pl.String}


class Rows(Config):
    n: int = 1


@asset(metadata={GROWING: True})
def growing_results(config: Rows) -> pl.DataFrame:
    return pl.DataFrame({"question_id": [f"q{i}" for i in range(config.n)]}, schema=SCHEMA)


@asset
def whole_table(config: Rows) -> pl.DataFrame:
    return pl.DataFrame({"question_id": [f"q{i}" for i in range(config.n)]}, schema=SCHEMA)


def _run(a, n: int, tags=None):
    return materialize(
        [a],
        resources={"io_manager": VersionedParquetIOManager()},
        run_config={"ops": {a.op.name: {"config": {"n": n}}}},
        tags=tags,
        raise_on_error=False,
    )


def test_an_empty_run_never_replaces_a_growing_tables_rows(isolated_home):
    store = artifact_store()
    assert _run(growing_results, 2).success
    kept = store.latest_location("growing_results")
    empty = _run(growing_results, 0)
    assert not empty.success
    failure = next(e for e in empty.all_events if e.is_step_failure)
    assert "would replace the 2 stored ones" in str(failure.event_specific_data.error.to_string())
    assert store.latest_location("growing_results") == kept and store.read_latest("growing_results").height == 2
    # asked for: it empties
    assert _run(growing_results, 0, tags={REPLACE_WITH_EMPTY: "true"}).success
    assert store.read_latest("growing_results").height == 0


def test_other_tables_and_a_first_empty_version_are_written(isolated_home):
    store = artifact_store()
    assert _run(growing_results, 0).success  # nothing stored before: an empty first version is a result
    assert store.read_latest("growing_results").height == 0
    assert _run(whole_table, 2).success and _run(whole_table, 0).success  # a whole-table asset replaces
    assert store.read_latest("whole_table").height == 0
