"""Corrupt state is never served quietly (issue 34 item 6): a deleted latest Parquet is reported by the
audit catalog, a LATEST naming an older version than the history heals to the newest with a warning,
a deleted or emptied call log warns, a damaged catalog.json and a catalog folder that cannot be written
are one line naming the file and the fix, and an import whose Dagster record fails still says so in
one line."""

import errno
import os
import sqlite3
import warnings

import polars as pl
import pytest

from cli import main
from storage import artifacts as A
from storage.llm_log import CallLog, CallRecord
from storage.paths import artifacts_dir, quandary_home


def _versions(root, *frames):
    return [A.write_version(df, "dataset", "db", root) for df in frames]


def test_a_deleted_latest_parquet_is_reported_not_left_out(isolated_home, capsys):
    (v1,) = _versions(None, pl.DataFrame({"a": [1]}))
    v1.path.unlink()
    messages = []
    assert A.latest_paths_by_asset(on_damaged=messages.append) == {}
    assert len(messages) == 1 and v1.path.name in messages[0] and "rematerialize dataset[db]" in messages[0]
    assert main(["audit", "views"]) == 0
    err = capsys.readouterr().err
    assert v1.path.name in err and "missing" in err


def test_a_deleted_latest_parquet_falls_back_with_a_warning(isolated_home):
    v1, v2 = _versions(None, pl.DataFrame({"a": [1]}), pl.DataFrame({"a": [2]}))
    v2.path.unlink()
    messages = []
    path = A.latest_path("dataset", "db", on_recovered=messages.append)
    assert path == v1.path and v2.path.name in messages[0] and "missing" in messages[0]


def test_a_stale_latest_heals_to_the_newest_version_with_a_warning(isolated_home):
    v1, v2 = _versions(None, pl.DataFrame({"a": [1]}), pl.DataFrame({"a": [2]}))
    pointer = artifacts_dir() / "dataset" / "db" / "LATEST"
    pointer.write_text(v1.path.name)
    messages = []
    assert A.latest_path("dataset", "db", on_recovered=messages.append) == v2.path
    assert "older version" in messages[0] and v1.path.name in messages[0]
    assert pointer.read_text() == v2.path.name  # healed: the next reader is not warned
    messages.clear()
    assert A.latest_path("dataset", "db", on_recovered=messages.append) == v2.path and not messages


def test_content_written_again_is_latest_not_stale(isolated_home):
    a, _, a2 = _versions(None, pl.DataFrame({"a": [1]}), pl.DataFrame({"a": [2]}), pl.DataFrame({"a": [1]}))
    messages = []
    assert A.latest_path("dataset", "db", on_recovered=messages.append) == a.path == a2.path and not messages


def _rec(call_id):
    return CallRecord(
        call_id=call_id,
        status="ok",
        member="m",
        model="openai/x",
        request={"messages": []},
        parsed={"a": 1},
        raw_response='{"a": 1}',
        attempts=1,
        tag={"stage": "s1"},
    )


@pytest.mark.parametrize("how", ["deleted", "emptied"])
def test_a_lost_call_log_warns(tmp_path, how):
    path = tmp_path / "calls.sqlite"
    log = CallLog(path)
    log.record(_rec("k1"))
    log.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        CallLog(path).close()  # reopened intact: no warning, and the count of calls is noted
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(f"{path}{suffix}"):
            os.unlink(f"{path}{suffix}")
    if how == "emptied":
        sqlite3.connect(path).close()
    with pytest.warns(UserWarning, match=r"held 1 calls .* every cached answer is lost"):
        CallLog(path).close()


def test_a_damaged_catalog_is_one_line(isolated_home, capsys):
    (quandary_home() / "catalog.json").write_text('{"uni": {"db_id": "uni", "pa')
    assert main(["db", "list"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "catalog.json is damaged" in err and "quandary db register" in err


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EACCES])
def test_db_register_on_an_unwritable_folder_is_one_line(isolated_home, demo_db_path, monkeypatch, capsys, code):
    real_fsync = os.fsync

    def failing_fsync(fd):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(f".tmp{os.getpid()}"):
            raise OSError(code, os.strerror(code))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    assert main(["db", "register", str(demo_db_path), "--db-id", "uni"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "catalog.json" in err and "Traceback" not in err
    assert not list(quandary_home().glob("catalog.tmp*"))


def test_import_whose_instance_record_fails_says_so_in_one_line(isolated_home, tmp_path, monkeypatch, capsys):
    import json

    from pipelines.abiss.outputs import to_abiss_records

    good = tmp_path / "in.json"
    row = {
        "db_id": ["university"],
        "question": ["How many?"],
        "sql": ["SELECT 1"],
        "subcategory": ["answerable"],
        "style": ["formal"],
        "difficulty": ["simple"],
    }
    good.write_text(json.dumps(to_abiss_records(pl.DataFrame(row))))

    def full(*a, **k):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr("cli.runs.report_external_version", full)
    assert main(["import", str(good)]) == 0
    captured = capsys.readouterr()
    assert "no space left" in captured.err and "Traceback" not in captured.err
    assert "imported 1 records for university" in captured.out
