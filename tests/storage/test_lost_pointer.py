"""Issue 23 item 5: a partition whose LATEST and versions.jsonl are lost is recovered from its
content files (the newest intact one by mtime) with a warning naming it, never silently dropped."""

import os

import polars as pl
import pytest

from storage import artifacts
from storage.audit import open_audit


def test_lost_pointer_and_history_recover_newest_intact_file(tmp_path):
    root = tmp_path / "artifacts"
    old = artifacts.write_version(pl.DataFrame({"a": [1]}), "dataset", "uni", root)
    new = artifacts.write_version(pl.DataFrame({"a": [1, 2]}), "dataset", "uni", root)
    os.utime(old.path, (1_000_000, 1_000_000))
    damaged = new.path.parent / ("f" * 20 + ".parquet")  # newest by mtime but its bytes do not match its name
    damaged.write_bytes(b"garbage")
    (new.path.parent / "LATEST").unlink()
    (new.path.parent / "versions.jsonl").unlink()
    with pytest.warns(UserWarning, match=r"dataset\[uni\].*LATEST"):
        found = artifacts.latest_path("dataset", "uni", root)
    assert found == new.path
    assert (new.path.parent / "LATEST").read_text() == new.path.name  # recovered once, for good
    assert artifacts.latest_paths_by_asset(root) == {"dataset": [new.path]}


def test_audit_catalog_keeps_the_partition(tmp_path):
    root = tmp_path / "artifacts"
    for part in ("a", "b"):
        v = artifacts.write_version(pl.DataFrame({"x": [1, 2, 3]}), "dataset", part, root)
    (v.path.parent / "LATEST").unlink()
    (v.path.parent / "versions.jsonl").unlink()
    warnings = []
    con = open_audit(root=root, llm_log=tmp_path / "none.sqlite", warn=warnings.append)
    try:
        assert con.execute("SELECT count(*) FROM dataset").fetchone()[0] == 6
    finally:
        con.close()
    assert any("dataset[b]" in w for w in warnings), warnings
