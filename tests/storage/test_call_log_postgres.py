"""The call log on PostgreSQL (issue 21 item 3), against a real server started here: claims are
atomic across processes, a live owner's heartbeat keeps its key, a SIGKILLed owner's key is taken
over once its lease lapses (judged by the database's clock), parse failures are never cached, and
the same calls give the same rows and the same audit view as the SQLite log.

Child processes stop at lines they print and go on at lines the parent writes: events, not sleeps.
"""

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import duckdb
import pytest

from storage.audit import audit_query, open_audit
from storage.llm_log import CallLog, CallLogError, CallRecord, open_call_log
from storage.llm_log_pg import PostgresCallLog
from tests.distributed.servers import free_port, postgres_server, require_pg_bindir
from tests.llm.fault_stub import FaultStub
from tests.sql.hostile_sql import REPO_ROOT
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def pg():
    require_pg_bindir()  # skips with the reason when PostgreSQL's server binaries are absent
    with postgres_server() as server:
        yield server


@pytest.fixture
def url(pg, request, monkeypatch):
    name = "t_" + request.node.name.lower().replace("[", "_").replace("]", "").replace("-", "_")[:50]
    url = pg.create_database(name)
    monkeypatch.setenv("QUANDARY_STATE_URL", url)
    return url


def _spawn(code: str, env: dict, *args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _until_line(proc, prefix: str) -> str:
    for line in proc.stdout:  # blocks until the child reaches the point it announces
        if line.startswith(prefix):
            return line.strip()
    raise AssertionError(f"child ended before {prefix!r}: {proc.stderr.read()[-2000:]}")


def _go(proc) -> None:
    proc.stdin.write("go\n")
    proc.stdin.flush()


RACER = """
import json, sys
from storage.llm_log import open_call_log
log = open_call_log()
print("ready", flush=True)
sys.stdin.readline()  # every racer starts at the same moment
print("won " + json.dumps([k for k in sys.argv[1:] if log.claim(k, "m", "openai/m", 60) == "claimed"]), flush=True)
"""


def test_concurrent_claims_have_exactly_one_winner_per_key(url):
    keys = [f"k{i}" for i in range(40)]
    env = {**os.environ, "QUANDARY_STATE_URL": url}
    racers = [_spawn(RACER, env, *(keys if i % 2 else reversed(keys))) for i in range(4)]
    for r in racers:
        _until_line(r, "ready")
    for r in racers:
        _go(r)
    won = [json.loads(_until_line(r, "won ")[4:]) for r in racers]
    for r in racers:
        r.wait(60)
    assert sorted(k for w in won for k in w) == sorted(keys)  # every key once, none twice


# A council member asking one question through the deployment's call log; it reports its first
# "busy" claim and, when it takes the key, the time (the parent compares it with the lease).
ASKER = """
import sys, time
from typing import Literal
from pydantic import BaseModel
from resources.llm import Council
from resources.llm.config import Member
from resources.llm.registry import call_log
import storage.llm_log as ll

class V(BaseModel):
    verdict: Literal["yes", "no"]

real_claim = ll.CallLogRules.claim
said_busy = []
def claim(self, *a, **k):
    state = real_claim(self, *a, **k)
    if state == "busy" and not said_busy:
        said_busy.append(1)
        print("busy", flush=True)
    if state == "claimed":
        print(f"claimed {time.time():.3f}", flush=True)
    return state
ll.CallLogRules.claim = claim
m = Member(name="stub", model="openai/stub", api_base=sys.argv[1], structured_output="prompt", timeout_s=120,
           max_retries=0)
council = Council("validators", [m], call_log())
print("ready", flush=True)
sys.stdin.readline()
r = council.ask("stub", [{"role": "user", "content": "same question"}], V)
print("result", r.ok, r.cached, flush=True)
"""


def _asker(stub, url, lease_s):
    env = {**os.environ, "QUANDARY_STATE_URL": url, "QUANDARY_CALL_LEASE_S": str(lease_s)}
    proc = _spawn(ASKER, env, stub.base_url)
    _until_line(proc, "ready")
    return proc


def _lease_until(log, key_like="%") -> float | None:
    rows = log._fetch(
        "SELECT extract(epoch FROM lease_until) AS t FROM quandary_llm_calls "
        "WHERE status = 'in_flight' AND call_id LIKE :k",
        {"k": key_like},
    )
    return float(rows[0]["t"]) if rows and rows[0]["t"] is not None else None


def _db_now(log) -> float:
    return float(log._fetch("SELECT extract(epoch FROM now()) AS t", {})[0]["t"])


@contextlib.contextmanager
def _owner_sending(url, lease_s):
    """Two askers of one question; the first one's request is in flight (the stub holds it)."""
    with FaultStub(default="hang", content='{"verdict": "yes"}') as stub:
        owner, other = _asker(stub, url, lease_s), _asker(stub, url, lease_s)
        _go(owner)
        assert stub.wait_for_requests(1, timeout_s=120)
        yield stub, owner, other


def test_a_live_owners_heartbeat_keeps_its_key(url):
    """The owner's call outlives its lease many times over; its heartbeat renews the lease, so the
    other process waits for the answer and the request is sent once."""
    log = PostgresCallLog(url)
    with _owner_sending(url, lease_s=2) as (stub, owner, waiter):
        _go(waiter)
        assert _until_line(waiter, "busy") == "busy"
        first = _lease_until(log)  # without a heartbeat the key would be free from then on
        wait_until(lambda: _db_now(log) > first + 1.0, 60, "the owner's first lease to be over")
        assert _lease_until(log) > first  # renewed by the owner's heartbeat, still its claim
        stub.release()
        out_owner, err = owner.communicate(timeout=120)
        out_waiter, err2 = waiter.communicate(timeout=120)
    assert "result True False" in out_owner, err[-1500:]
    assert "result True True" in out_waiter and "claimed" not in out_waiter, err2[-1500:]
    assert stub.requests == 1


def test_a_killed_owners_key_is_taken_over_when_its_lease_lapses(url):
    """kill -9 of the owner: no os.kill from another machine can see it; the key waits for the
    lease (the database's clock), then the other process takes it and sends it once more."""
    log = PostgresCallLog(url)
    with _owner_sending(url, lease_s=4) as (stub, victim, survivor):
        victim.send_signal(signal.SIGKILL)
        victim.wait(30)
        killed_at = time.time()
        lease_end = _lease_until(log)
        assert lease_end is not None and lease_end > killed_at - 0.5  # the dead owner's lease still runs
        stub.default = "ok"
        _go(survivor)
        out, err = survivor.communicate(timeout=120)
    claimed = [line for line in out.splitlines() if line.startswith("claimed")]
    assert claimed, out + err[-1500:]
    assert float(claimed[0].split()[1]) >= lease_end - 0.05  # it waited for the lease to end, not less
    claimed_at = float(claimed[0].split()[1])
    assert claimed_at - killed_at < 60  # a dead owner's key is taken within a minute
    assert "result True False" in out
    assert stub.requests == 2  # the killed request, and the survivor's one resend


def _rec(call_id, status="ok", **kw):
    base = dict(
        member="m",
        model="openai/x",
        request={"messages": [call_id]},
        attempts=1,
        parsed={"a": 1} if status == "ok" else None,
        raw_response='{"a": 1}' if status == "ok" else "prose",
        error=None if status == "ok" else "unparseable output",
        tag={"stage": "s1", "candidate_id": call_id},
    )
    return CallRecord(call_id=call_id, status=status, **{**base, **kw})


def test_parse_failures_are_never_cached(url):
    log = open_call_log()
    assert isinstance(log, PostgresCallLog)
    log.record(_rec("bad", status="parse_failed"))
    assert log.lookup("bad") is None
    assert log.claim("bad", "m", "openai/x", 60) == "claimed"  # a later run asks again
    assert log.count() == 0  # the claim is not a call
    log.record(_rec("bad"))
    assert log.lookup("bad").parsed == {"a": 1}
    assert log.claim("bad", "m", "openai/x", 60) == "cached"
    assert log.get("bad").attempts == 2  # the failed attempt and the good one


def _same_calls(log) -> None:
    """One fixed sequence of calls: answers, a parse failure retried, a transport failure, hits,
    a released claim."""
    for i in range(3):
        assert log.claim(f"c{i}", "m", "openai/x", 60) == "claimed"
        log.record(_rec(f"c{i}", latency_ms=10.0 * i, prompt_tokens=i, cost=0.5))
    log.claim("pf", "m", "openai/x", 60)
    log.record(_rec("pf", status="parse_failed", first_raw_response="first"))
    log.record(_rec("down", status="call_failed", raw_response=None, error="HTTP 503", attempts=4))
    log.claim("pf", "m", "openai/x", 60)
    log.record(_rec("pf", repaired=True))
    log.lookup("c0")
    log.lookup("c0")
    log.lookup("pf")
    log.claim("gone", "m", "openai/x", 60)
    log.release("gone")


def _untimed(rows) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in ("created_at", "updated_at")} for r in rows]


def test_same_calls_give_the_same_rows_and_audit_view_as_sqlite(url, tmp_path, monkeypatch):
    pg_log, lite = open_call_log(), CallLog(tmp_path / "llm_calls.sqlite")
    for log in (pg_log, lite):
        _same_calls(log)
    assert _untimed(sorted(pg_log.rows(), key=lambda r: r["call_id"])) == _untimed(
        sorted(lite.rows(), key=lambda r: r["call_id"])
    )
    assert (
        pg_log.count("status = ? AND cache_hits > ?", ("ok", 0))
        == lite.count("status = ? AND cache_hits > ?", ("ok", 0))
        == 2
    )

    query = "SELECT * EXCLUDE (created_at, updated_at) FROM llm_calls ORDER BY call_id"
    from_pg = open_audit(tmp_path / "artifacts")  # distributed mode: the database's calls
    from_file = open_audit(tmp_path / "artifacts", llm_log=tmp_path / "llm_calls.sqlite")
    assert [d[0] for d in from_pg.execute(query).description] == [d[0] for d in from_file.execute(query).description]
    assert from_pg.execute(query).fetchall() == from_file.execute(query).fetchall()
    assert len(from_pg.execute(query).fetchall()) == 5
    with pytest.raises(duckdb.Error):  # still locked down: no file outside the catalog is readable
        audit_query(from_pg, f"SELECT * FROM read_csv('{tmp_path / 'llm_calls.sqlite'}')").fetchall()


def test_an_unreachable_database_is_one_line_naming_it(pg, tmp_path, monkeypatch):
    monkeypatch.setenv("QUANDARY_SPILL_DIR", str(tmp_path / "spill"))
    url = f"postgresql+psycopg2://quandary:s3cret@127.0.0.1:{free_port()}/calls?connect_timeout=5"
    with pytest.raises(CallLogError) as err:
        PostgresCallLog(url)
    msg = str(err.value)
    assert len(msg.splitlines()) == 1 and "127.0.0.1" in msg and "quandary_llm_calls" in msg
    assert "s3cret" not in msg and "QUANDARY_STATE_URL" in msg


def test_a_batch_is_one_transaction(url):
    """The council's log thread runs queued operations in one transaction: all or nothing."""
    log = open_call_log()
    with log.transaction():
        assert log.claim("a", "m", "openai/x", 60) == "claimed"
        log.record(_rec("b"))
    assert log.get("a").status == "in_flight" and log.lookup("b") is not None
    with pytest.raises(RuntimeError), log.transaction():
        log.record(_rec("c"))
        assert log.claim("d", "m", "openai/x", 60) == "claimed"
        raise RuntimeError("a later operation of the batch failed")
    assert log.get("c") is None and log.get("d") is None  # rolled back
    assert log.claim("d", "m", "openai/x", 60) == "claimed"  # and free to claim again
