"""kill -9 at points signalled by the victim itself (never a sleep), and concurrent processes:

- artifact store: a kill between writing the temp file and renaming it, or in the middle of a
  history append, leaves the store readable and the next write heals it (item 2);
- call log: two processes wanting the same uncached call send it once (item 9, single flight);
  a claim left by a killed process is taken over.
"""

import os
import signal
import subprocess
import sys
import textwrap

import polars as pl
import pytest

from storage.artifacts import latest_path, read_latest, read_versions, write_version
from tests.llm.fault_stub import FaultStub
from tests.sql.hostile_sql import REPO_ROOT

pytestmark = pytest.mark.integration  # real processes, servers or files under stress


def _spawn(code: str, *args, env=None):
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
        cwd=REPO_ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env or dict(os.environ),
    )


def _wait_for_line(proc, marker: str) -> None:
    for line in proc.stdout:  # blocks until the child reaches its signalled point
        if line.strip() == marker:
            return
    raise AssertionError(f"child ended before {marker!r}: {proc.stderr.read()[-1500:]}")


def _kill9(proc) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL


# The victim writes v1, then starts v2 and stops (signalling the parent) at the chosen point.
ARTIFACT_VICTIM = """
import os, sys
import polars as pl
import storage.artifacts as art
point = sys.argv[1]
art.write_version(pl.DataFrame({"a": [1, 2, 3]}), "thing", "p")
real_replace, real_append = os.replace, art._append_version
def stop_here():
    print("at-point", flush=True)
    sys.stdin.read()  # wait here until killed
if point == "before-rename":
    def replace(src, dst):
        if str(dst).endswith(".parquet"):
            with open(src, "rb+") as fh:
                fh.truncate(100)  # a half-written temp file
            stop_here()
        return real_replace(src, dst)
    os.replace = replace
elif point == "mid-history":
    def append(folder, entry):
        with open(folder / "versions.jsonl", "a") as fh:
            fh.write('{"file": "' + entry["file"][:7])
            fh.flush()
        stop_here()
    art._append_version = append
art.write_version(pl.DataFrame({"a": list(range(100))}), "thing", "p")
"""


def test_kill9_before_rename_keeps_the_previous_version(isolated_home):
    victim = _spawn(ARTIFACT_VICTIM, "before-rename")
    _wait_for_line(victim, "at-point")
    _kill9(victim)
    assert read_latest("thing", "p").height == 3  # the old version is intact and still latest
    v2 = write_version(pl.DataFrame({"a": list(range(100))}), "thing", "p")  # a rerun completes
    assert read_latest("thing", "p").height == 100 and latest_path("thing", "p") == v2.path


def test_kill9_mid_history_append_is_recoverable(isolated_home):
    victim = _spawn(ARTIFACT_VICTIM, "mid-history")
    _wait_for_line(victim, "at-point")
    _kill9(victim)
    # the new file and LATEST were written before the torn history line: served, and verified
    assert read_latest("thing", "p").height == 100
    v3 = write_version(pl.DataFrame({"b": [1]}), "thing", "p")
    files = [e["file"] for e in read_versions(v3.path.parent)]
    assert files[0] != files[-1] and files[-1] == v3.path.name and len(files) == 2  # torn line skipped
    (v3.path.parent / "LATEST").write_text("")  # and a damaged pointer recovers from the history
    assert latest_path("thing", "p") == v3.path


ASKER = """
import sys
from typing import Literal
from pydantic import BaseModel
from resources.llm import Council
from resources.llm.config import Member
from resources.llm.registry import call_log
import storage.llm_log as ll

class V(BaseModel):
    verdict: Literal["yes", "no"]

real_claim = ll.CallLog.claim
def claim(self, *a, **k):
    state = real_claim(self, *a, **k)
    if state == "busy":
        print("busy", flush=True)  # the parent waits for this before letting the provider answer
    return state
ll.CallLog.claim = claim
m = Member(name="stub", model="openai/stub", api_base=sys.argv[1], structured_output="prompt", timeout_s=120,
           max_retries=0)
r = Council("validators", [m], call_log()).ask("stub", [{"role": "user", "content": "same question"}], V)
print("result", r.ok, r.cached, flush=True)
"""


def test_two_processes_send_one_request(isolated_home):
    with FaultStub(default="hang", content='{"verdict": "yes"}') as stub:
        first = _spawn(ASKER, stub.base_url)
        assert stub.wait_for_requests(1, timeout_s=120)  # the first process's request is in flight
        second = _spawn(ASKER, stub.base_url)
        _wait_for_line(second, "busy")  # the second process found the claim and waits
        stub.release()
        out1, _ = first.communicate(timeout=120)
        out2, _ = second.communicate(timeout=120)
    assert "result True False" in out1 and "result True True" in out2, (out1, out2)
    assert stub.requests == 1


def test_claim_of_a_killed_process_is_taken_over(isolated_home):
    with FaultStub(default="hang", content='{"verdict": "yes"}') as stub:
        victim = _spawn(ASKER, stub.base_url)
        assert stub.wait_for_requests(1, timeout_s=120)
        _kill9(victim)  # it dies holding the claim
        stub.default = "ok"
        survivor = _spawn(ASKER, stub.base_url)
        out, err = survivor.communicate(timeout=120)
    assert "result True False" in out, err[-1500:]
    assert stub.requests == 2
