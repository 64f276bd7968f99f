"""Issue 23 item 4: storage errors are classified by cause (no space, read-only, permission,
corruption), each with its remedy and the file named; a failed write leaves no temp file; answers
whose log write failed are not requested again once space is back. Faults are injected
(monkeypatched writes raising ENOSPC / EROFS / EACCES); no disk is ever filled."""

import errno
import fcntl
import os
import signal
import sqlite3
import subprocess
import sys
from typing import Literal

import polars as pl
import pytest
from pydantic import BaseModel

from cli.run_output import first_failure
from resources.llm import Council, call_log
from resources.llm.config import Member
from resources.llm.failures import FailureTally
from storage import artifacts
from storage.faults import CORRUPT, NO_SPACE, PERMISSION, READ_ONLY, storage_cause
from storage.llm_log import CallLog, CallLogDamaged, CallLogError, CallRecord
from tests.llm.fault_stub import FaultStub
from tests.waiting import wait_until


class Verdict(BaseModel):
    verdict: Literal["yes", "no"]


@pytest.mark.parametrize(
    "exc, cause",
    [
        (OSError(errno.ENOSPC, "No space left on device"), NO_SPACE),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), NO_SPACE),
        (OSError(errno.EROFS, "Read-only file system"), READ_ONLY),
        (PermissionError(errno.EACCES, "Permission denied"), PERMISSION),
        (sqlite3.OperationalError("database or disk is full"), NO_SPACE),
        (sqlite3.DatabaseError("database disk image is malformed"), CORRUPT),
        (sqlite3.DatabaseError("file is not a database"), CORRUPT),
    ],
)
def test_causes(exc, cause):
    assert storage_cause(exc) == cause


def test_locked_database_is_not_a_storage_fault():
    assert storage_cause(sqlite3.OperationalError("database is locked")) is None


class _FaultyConn:
    """A sqlite connection whose writes fail with ``exc`` while ``fault['on']`` (reads pass)."""

    def __init__(self, conn, fault):
        self._conn, self._fault = conn, fault

    def execute(self, sql, *args):
        if (
            self._fault["on"]
            and sql.lstrip().split()[0].upper() in ("INSERT", "UPDATE", "DELETE")
            and self._fault.get("match", "") in sql
        ):
            raise self._fault["exc"]
        return self._conn.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self._conn, name)


@pytest.fixture
def faulty_log(monkeypatch, tmp_path):
    fault = {"on": False, "exc": sqlite3.OperationalError("database or disk is full")}
    real = CallLog._conn
    monkeypatch.setattr(CallLog, "_conn", lambda self: _FaultyConn(real(self), fault))
    monkeypatch.setenv("QUANDARY_SPILL_DIR", str(tmp_path / "spill"))
    return fault


def _rec(call_id, status="ok"):
    return CallRecord(
        call_id=call_id,
        status=status,
        member="m",
        model="openai/m",
        request={"x": call_id},
        raw_response='{"verdict": "yes"}',
        parsed={"verdict": "yes"},
        attempts=1,
    )


@pytest.mark.parametrize(
    "exc, must",
    [
        (sqlite3.OperationalError("database or disk is full"), "ENOSPC"),
        (OSError(errno.EROFS, "Read-only file system"), "EROFS"),
        (PermissionError(errno.EACCES, "Permission denied"), "EACCES"),
    ],
)
def test_call_log_write_failure_names_the_cause_not_damage(tmp_path, faulty_log, exc, must):
    path = tmp_path / "llm_calls.sqlite"
    log = CallLog(path)
    faulty_log.update(on=True, exc=exc)
    with pytest.raises(CallLogError) as err:
        log.record(_rec("a"))
    msg = str(err.value)
    assert must in msg and str(path) in msg and len(msg.splitlines()) == 1
    assert "damaged" not in msg and "move" not in msg and "lost" not in msg
    assert not isinstance(err.value, CallLogDamaged)


def test_call_log_opened_on_a_full_disk_is_not_damaged(tmp_path, monkeypatch):
    def full(self):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(CallLog, "_init_schema", full)
    with pytest.raises(CallLogError) as err:
        CallLog(tmp_path / "llm_calls.sqlite")
    msg = str(err.value)
    assert "ENOSPC" in msg and "llm_calls.sqlite" in msg and "damaged" not in msg and "move" not in msg


def test_real_corruption_is_still_damage(tmp_path):
    path = tmp_path / "llm_calls.sqlite"
    path.write_bytes(b"this is not a database" * 200)
    with pytest.raises(CallLogDamaged) as err:
        CallLog(path)
    assert "damaged" in str(err.value) and str(path) in str(err.value)


def test_answers_not_logged_for_lack_of_space_are_kept_and_written_later(tmp_path, faulty_log):
    path = tmp_path / "llm_calls.sqlite"
    log = CallLog(path)
    faulty_log["on"] = True
    for cid in ("a", "b"):
        with pytest.raises(CallLogError):
            log.record(_rec(cid))
    # still full: the same process finds the answers it holds
    assert log.lookup("a") is not None and log.lookup("b") is not None
    faulty_log["on"] = False  # space is freed
    log.record(_rec("c"))
    ids = {r["call_id"] for r in log.rows()}
    assert ids == {"a", "b", "c"}


def test_answers_not_logged_survive_the_process(tmp_path, faulty_log):
    """A rerun (a new CallLog on the same file) after space is freed finds the answered calls."""
    path = tmp_path / "llm_calls.sqlite"
    log = CallLog(path)
    faulty_log["on"] = True
    with pytest.raises(CallLogError):
        log.record(_rec("a"))
    log.close()
    faulty_log["on"] = False
    again = CallLog(path)
    hit = again.lookup("a")
    assert hit is not None and hit.status == "ok" and hit.parsed == {"verdict": "yes"}
    assert not list((tmp_path / "spill").glob("*.jsonl"))  # merged, then removed


def test_council_does_not_rerequest_answers_after_space_is_freed(quandary_home, faulty_log):
    with FaultStub(default="ok") as stub:
        m = Member(
            name="stub",
            model="openai/stub",
            api_base=stub.base_url,
            max_retries=0,
            timeout_s=5.0,
            structured_output="prompt",
            repair=False,
        )
        council = Council("validators", [m], call_log())
        # the claim fits in the log's free pages, the answer does not (as in the probe)
        faulty_log.update(on=True, match="excluded.")
        results = [council.ask("stub", [{"role": "user", "content": f"q{i}"}], Verdict) for i in range(2)]
        assert stub.requests == 2
        for r in results:  # the answer is good; the failed log write is said, as no space, not damage
            assert r.ok, r.error
            assert "ENOSPC" in (r.error or "") and "damaged" not in r.error
        faulty_log["on"] = False
        call_log().close()
        again = [council.ask("stub", [{"role": "user", "content": f"q{i}"}], Verdict) for i in range(2)]
        assert all(r.ok and r.cached for r in again)
        assert stub.requests == 2


def test_no_request_is_sent_when_the_call_cannot_be_logged(quandary_home, faulty_log):
    with FaultStub(default="ok") as stub:
        m = Member(
            name="stub",
            model="openai/stub",
            api_base=stub.base_url,
            max_retries=0,
            timeout_s=5.0,
            structured_output="prompt",
            repair=False,
        )
        faulty_log["on"] = True
        r = Council("validators", [m], call_log()).ask("stub", [{"role": "user", "content": "q"}], Verdict)
    assert not r.ok and r.failure == "storage_full", r.error
    assert "ENOSPC" in r.error and "llm_calls.sqlite" in r.error and "damaged" not in r.error
    assert stub.requests == 0


def test_stage_failure_on_a_full_disk_says_free_space_not_move_away():
    class R:
        ok, failure, status = False, "storage_full", "call_failed"
        error = "local storage full: call log /x/llm_calls.sqlite: no space left on the device (ENOSPC)"

    tally = FailureTally()
    tally.add(R())
    msg = tally.message("validators")
    assert "free space" in msg and "keep it" in msg and "move" not in msg and "lost" not in msg


def _inject_enospc_on_tmp_write(monkeypatch, code=errno.ENOSPC):
    real_open = open

    def faulty_open(file, mode="r", *a, **kw):
        fh = real_open(file, mode, *a, **kw)
        if str(file).endswith(".tmp") and "w" in mode:

            def write(data):
                raise OSError(code, os.strerror(code))

            fh.write = write
        return fh

    monkeypatch.setattr("builtins.open", faulty_open)


@pytest.mark.parametrize("code, name", [(errno.ENOSPC, "ENOSPC"), (errno.EROFS, "EROFS")])
def test_artifact_write_failure_names_cause_and_leaves_no_temp_file(tmp_path, monkeypatch, code, name):
    _inject_enospc_on_tmp_write(monkeypatch, code)
    with pytest.raises(OSError) as err:
        artifacts.write_version(pl.DataFrame({"a": [1, 2]}), "candidates", "uni", tmp_path)
    msg = str(err.value)
    assert name in msg and str(tmp_path / "candidates" / "uni") in msg and "damaged" not in msg
    left = [p.name for p in (tmp_path / "candidates" / "uni").iterdir()]
    assert not [n for n in left if n.endswith(".tmp")], left


def test_read_only_artifact_folder_is_named_in_the_run_failure(tmp_path, monkeypatch):
    """The CLI's failure line names EROFS and the folder, not Dagster's handle-output wrapper."""
    from dagster import asset, materialize  # lazy: dagster is slow to import (~1 s); only the tests that need it pay

    # lazy: imports dagster (~1 s); only the tests that need it pay
    from assets.shared.io_manager import VersionedParquetIOManager

    @asset
    def small() -> pl.DataFrame:
        return pl.DataFrame({"a": [1]})

    _inject_enospc_on_tmp_write(monkeypatch, errno.EROFS)
    result = materialize(
        [small], resources={"io_manager": VersionedParquetIOManager(base_dir=str(tmp_path))}, raise_on_error=False
    )
    assert not result.success
    line = first_failure(result)
    assert "EROFS" in line and str(tmp_path) in line, line
    assert "DagsterExecutionHandleOutputError" not in line and "handling output" not in line, line


# --- spill files: a merge that fails, dies or races another merger drops no answer, leaves no file


def _spill_files(tmp_path):
    return sorted(p.name for p in (tmp_path / "spill").iterdir())


def _spilled_log(tmp_path, faulty_log, *call_ids):
    """A call log whose writes of ``call_ids`` failed for lack of space (their answers spilled)."""
    log = CallLog(tmp_path / "llm_calls.sqlite")
    faulty_log["on"] = True
    for cid in call_ids:
        with pytest.raises(CallLogError):
            log.record(_rec(cid))
    assert len(_spill_files(tmp_path)) == 1
    return log


def test_failed_merge_keeps_answers_spilled_while_it_ran(tmp_path, faulty_log, monkeypatch):
    """A merge that fails (still no space) must not put its file back over one spilled meanwhile."""
    first = _spilled_log(tmp_path, faulty_log, "a")
    real = CallLog._write_unless_cached
    during = []

    def write_while_another_spills(self, rec):
        if not during:  # the merge has claimed the file: another answer fails to log and spills
            during.append(rec.call_id)
            with pytest.raises(CallLogError):
                first.record(_rec("b"))
        return real(self, rec)

    monkeypatch.setattr(CallLog, "_write_unless_cached", write_while_another_spills)
    CallLog(tmp_path / "llm_calls.sqlite")  # merges on open: fails, the disk is still full
    assert during == ["a"]
    monkeypatch.setattr(CallLog, "_write_unless_cached", real)
    first.close()
    faulty_log["on"] = False  # space is freed; a new process opens the log
    again = CallLog(tmp_path / "llm_calls.sqlite")
    assert again.lookup("a") is not None and again.lookup("b") is not None
    assert _spill_files(tmp_path) == []


class _Crash(BaseException):
    """The merging process dies here (nothing below it runs, no except clause catches it)."""


def test_merge_interrupted_after_claiming_is_taken_over_by_the_next_open(tmp_path, faulty_log, monkeypatch):
    _spilled_log(tmp_path, faulty_log, "a", "b").close()
    faulty_log["on"] = False

    def crash(self, rec):
        raise _Crash

    monkeypatch.setattr(CallLog, "_write_unless_cached", crash)
    with pytest.raises(_Crash):
        CallLog(tmp_path / "llm_calls.sqlite")
    assert [n for n in _spill_files(tmp_path) if ".merging-" in n]  # claimed, then abandoned
    monkeypatch.undo()
    monkeypatch.setenv("QUANDARY_SPILL_DIR", str(tmp_path / "spill"))
    again = CallLog(tmp_path / "llm_calls.sqlite")
    assert again.lookup("a") is not None and again.lookup("b") is not None
    assert _spill_files(tmp_path) == []


def test_a_claim_held_by_a_live_merger_is_left_to_it(tmp_path, faulty_log):
    _spilled_log(tmp_path, faulty_log, "a").close()
    faulty_log["on"] = False
    spill = tmp_path / "spill"
    (name,) = _spill_files(tmp_path)
    claimed = spill / f"{name}.merging-1-x"
    os.rename(spill / name, claimed)  # another process claimed it and is merging it
    with open(claimed, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        log = CallLog(tmp_path / "llm_calls.sqlite")
        assert log.lookup("a") is None and claimed.exists()  # not merged twice at once
    log.close()  # the other merger died (its lock is gone) without finishing
    again = CallLog(tmp_path / "llm_calls.sqlite")
    assert again.lookup("a") is not None and _spill_files(tmp_path) == []


@pytest.mark.integration
def test_merger_killed_mid_merge_loses_no_answer(tmp_path, faulty_log):
    _spilled_log(tmp_path, faulty_log, "a").close()
    faulty_log["on"] = False
    marker = tmp_path / "merging"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"""
import pathlib, threading
import storage.llm_log as ll
def stall(self, rec):
    pathlib.Path({str(marker)!r}).touch()
    threading.Event().wait()
ll.CallLog._write_unless_cached = stall
ll.CallLog({str(tmp_path / "llm_calls.sqlite")!r})
""",
        ],
        env={**os.environ, "QUANDARY_SPILL_DIR": str(tmp_path / "spill")},
        cwd=os.getcwd(),
    )
    try:
        wait_until(marker.exists, 120, "the child process merging the spill file", alive=lambda: child.poll() is None)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    log = CallLog(tmp_path / "llm_calls.sqlite")
    hit = log.lookup("a")
    assert hit is not None and hit.parsed == {"verdict": "yes"}
    assert _spill_files(tmp_path) == []
