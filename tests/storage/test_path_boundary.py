"""Issue 23 item 1: every asset name and partition key that becomes a path is checked at the
storage boundary (one function, storage.paths.path_segment) before any folder is made."""

from types import SimpleNamespace

import polars as pl
import pytest

from storage import artifacts
from storage.paths import UnsafePathError, path_segment

HOSTILE = ["../candidates/x", "..", ".", "", "/tmp/abs", "a/b", "a\\b", "x\x00y", ".hidden", "a\nb", "x" * 300]


@pytest.mark.parametrize("value", HOSTILE)
def test_path_segment_refuses(value):
    with pytest.raises(UnsafePathError) as exc:
        path_segment(value, "partition")
    assert "partition" in str(exc.value)


@pytest.mark.parametrize("value", ["university", "uni_2", "concert-singer", "s01_wellformed", "__all__", "a.b"])
def test_path_segment_accepts_plain_names(value):
    assert path_segment(value, "asset") == value


@pytest.mark.parametrize("value", HOSTILE)
def test_writers_and_readers_refuse_before_touching_disk(tmp_path, value):
    root = tmp_path / "store" / "artifacts"
    root.mkdir(parents=True)
    df = pl.DataFrame({"a": [1]})
    artifacts.write_version(df, "candidates", "good", root)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(UnsafePathError):
        artifacts.write_version(df, "imported_dataset", value, root)
    with pytest.raises(UnsafePathError):
        artifacts.write_version(df, value, "good", root)
    with pytest.raises(UnsafePathError):
        artifacts.latest_path("imported_dataset", value, root)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    assert artifacts.read_latest("candidates", "good", root).height == 1


def test_io_manager_uses_the_same_check(tmp_path):
    # lazy: imports dagster (~1 s); only the tests that need it pay
    from assets.shared.io_manager import VersionedParquetIOManager

    ctx = SimpleNamespace(
        asset_key=SimpleNamespace(path=["dataset"], to_user_string=lambda: "dataset"),
        has_partition_key=True,
        partition_key="../../escape",
        add_output_metadata=lambda m: None,
    )
    with pytest.raises(UnsafePathError):
        VersionedParquetIOManager(base_dir=str(tmp_path / "a")).handle_output(ctx, pl.DataFrame({"a": [1]}))
    assert not (tmp_path / "escape").exists()
