"""Item 2: a damaged artifact heals on the next write; damaged LATEST / history lines recover."""

import json

import polars as pl
import pytest

from storage.artifacts import DamagedArtifactError, latest_path, read_latest, read_versions, write_version

pytestmark = pytest.mark.integration  # real processes, servers or files under stress


def _df(n=50):
    return pl.DataFrame({"a": list(range(n)), "s": [f"row {i}" for i in range(n)]})


def test_truncated_file_is_rewritten_on_rewrite(isolated_home):
    v = write_version(_df(), "thing", "p")
    good = v.path.read_bytes()
    v.path.write_bytes(good[: len(good) // 2])  # a crash or a full disk left half a file
    with pytest.raises(DamagedArtifactError, match="damaged.*rematerialize thing"):
        read_latest("thing", "p")
    again = write_version(_df(), "thing", "p")  # recomputing the same content heals it
    assert again.path == v.path and v.path.read_bytes() == good
    assert read_latest("thing", "p").equals(_df())


def test_same_size_corruption_is_detected(isolated_home):
    v = write_version(_df(), "thing", "p")
    data = bytearray(v.path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    v.path.write_bytes(bytes(data))
    with pytest.raises(DamagedArtifactError):
        latest_path("thing", "p")
    write_version(_df(), "thing", "p")
    assert read_latest("thing", "p").height == 50


@pytest.mark.parametrize("garbage", [b"", b"\x00\x00\x00", b"../../etc/passwd", b"missing.parquet"])
def test_damaged_latest_pointer_recovers_from_history(isolated_home, garbage):
    write_version(_df(10), "thing", "p")
    v2 = write_version(_df(20), "thing", "p")
    (v2.path.parent / "LATEST").write_bytes(garbage)
    assert latest_path("thing", "p") == v2.path
    assert (v2.path.parent / "LATEST").read_text() == v2.path.name  # pointer rewritten


def test_torn_history_line_is_skipped_and_not_glued(isolated_home):
    v1 = write_version(_df(10), "thing", "p")
    history = v1.path.parent / "versions.jsonl"
    with open(history, "a") as fh:
        fh.write('{"file": "abc", "ha')  # torn append (kill -9 mid-write)
    v2 = write_version(_df(20), "thing", "p")
    entries = read_versions(v1.path.parent)
    assert [e["file"] for e in entries] == [v1.path.name, v2.path.name]
    last = history.read_text().splitlines()[-1]
    assert json.loads(last)["hash"] == v2.content_hash
    (v2.path.parent / "LATEST").unlink()
    assert latest_path("thing", "p") == v2.path
