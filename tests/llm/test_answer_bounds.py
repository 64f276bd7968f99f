"""Issue 23 item 9 (provider side), over real HTTP to the fault stub: an oversized answer is refused
and not cached as ok; Retry-After is honoured (seconds and HTTP-date); a garbage or choice-less 200
body is not "HTTP 500" and a truncated body is not "cannot connect"; `council calls` on a call log
with corrupt pages prints one line."""

import sqlite3
import subprocess
import sys
import time
from email.utils import formatdate
from typing import Literal

import pytest
from pydantic import BaseModel

from resources.llm import Council, call_log
from resources.llm.config import Member
from tests.llm.fault_stub import FaultStub

pytestmark = pytest.mark.integration


class Verdict(BaseModel):
    verdict: Literal["yes", "no"]


def member(base_url, **kw):
    base = dict(
        name="stub",
        model="openai/stub",
        api_base=base_url,
        max_retries=0,
        backoff_base_s=0.001,
        backoff_max_s=0.01,
        timeout_s=20.0,
        structured_output="prompt",
        repair=False,
        max_tokens=256,
    )
    return Member(**{**base, **kw})


def ask(m, text="Is this answerable?"):
    return Council("validators", [m], call_log()).ask(m.name, [{"role": "user", "content": text}], Verdict)


@pytest.mark.usefixtures("transport")
def test_oversized_answer_is_refused_and_not_cached(quandary_home):
    with FaultStub(default="huge", huge_bytes=5 << 20) as stub:
        r = ask(member(stub.base_url))
        assert not r.ok and r.failure == "oversize_answer", r.error
        assert "max_tokens 256" in r.error and "api_base" in r.error
        again = ask(member(stub.base_url))
        assert not again.cached and stub.requests == 2  # never served from the cache
    rows = call_log().rows()
    assert rows and all(row["status"] != "ok" for row in rows)
    assert all(len(row["raw_response"] or "") < 100_000 for row in rows)  # the log does not swell


@pytest.mark.usefixtures("transport")
@pytest.mark.parametrize(
    "mode, failure, must",
    [
        ("badjson", "malformed_answer", "not JSON"),
        ("nochoices", "malformed_answer", "choices"),
        ("truncated", "truncated_answer", "cut off"),
    ],
)
def test_broken_200_bodies_are_named_for_what_they_are(quandary_home, mode, failure, must):
    with FaultStub(default=mode) as stub:
        r = ask(member(stub.base_url))
    assert not r.ok and r.failure == failure, r.error
    assert must in r.error and "HTTP 500" not in r.error and "cannot connect" not in r.error, r.error
    assert stub.base_url in r.error


@pytest.mark.usefixtures("transport")
@pytest.mark.parametrize("value", ["2", "http-date"])
def test_retry_after_is_honoured(quandary_home, value):
    not_before = None  # time.monotonic() before which the retry must not come
    if value == "http-date":
        at = int(time.time()) + 3  # an HTTP date has second resolution
        not_before = time.monotonic() + (at - time.time())
        value = formatdate(at, usegmt=True)
    with FaultStub(modes=[f"429-after:{value}"], default="ok") as stub:
        r = ask(member(stub.base_url, max_retries=2))
    assert r.ok, r.error
    assert stub.requests == 2
    if not_before is None:  # "2": two seconds after the answer
        assert stub.times[1] - stub.times[0] >= 1.9, stub.times
    else:  # the date itself, however late the first request came (1.86 s after it at load 4)
        assert stub.times[1] >= not_before - 0.1, (stub.times, not_before)


def test_council_calls_on_a_corrupt_log_is_one_line(quandary_home):
    path = quandary_home / "llm_calls.sqlite"
    log = call_log()
    with FaultStub(default="ok") as stub:
        for i in range(30):
            ask(member(stub.base_url), f"question {i} " + "pad " * 400)
    log.close()
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    data = bytearray(path.read_bytes())
    page = 4096
    for offset in range(2 * page, len(data) - page, 3 * page):  # scribble over every third page
        data[offset : offset + page] = b"\xa5" * page
    path.write_bytes(bytes(data))
    r = subprocess.run(
        [sys.executable, "-c", "import sys; from cli import main; sys.exit(main(sys.argv[1:]))", "council", "calls"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode != 0
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert str(path) in lines[0] and "damaged" in lines[0]
