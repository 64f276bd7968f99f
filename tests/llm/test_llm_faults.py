"""Items 4 and 5 over real HTTP to the fault-injection stub: every failure is named for what it is
(with member, api_base and the real status), a step fails with the right remedy, and garbage
answers neither poison the cache nor pass as an empty result."""

import sqlite3
from typing import Literal

import pytest
from pydantic import BaseModel

from pipelines.abiss.stages import StageContext, run_stage
from pipelines.sqltools.schema_context import render_schema_context
from resources.catalog import inspect_database
from resources.llm import Council, call_log
from resources.llm.config import Member
from resources.llm.failures import ProviderUnavailable
from storage.llm_log import CallLog, CallLogDamaged
from tests.abiss.cascade_helpers import ans_row
from tests.llm.fault_stub import FaultStub, free_port

pytestmark = pytest.mark.integration  # real processes, servers or files under stress


class Verdict(BaseModel):
    verdict: Literal["yes", "no"]


MSGS = [{"role": "user", "content": "Is this answerable?"}]


def member(base_url, name="stub", **kw):
    base = dict(
        name=name,
        model=f"openai/{name}",
        api_base=base_url,
        max_retries=1,
        backoff_base_s=0.001,
        backoff_max_s=0.01,
        timeout_s=5.0,
        structured_output="prompt",
        repair=False,
    )
    return Member(**{**base, **kw})


def ask(m):
    return Council("validators", [m], call_log()).ask(m.name, MSGS, Verdict)


@pytest.mark.usefixtures("transport")
@pytest.mark.parametrize(
    "mode, failure, must, must_not",
    [
        ("429", "rate_limited", ["rate limited (HTTP 429)"], []),
        ("500", "server_error", ["server error (HTTP 500)"], []),
        ("503", "server_error", ["server error (HTTP 503)"], []),
        ("context", "context_too_long", ["context too long (HTTP 400)", "maximum context length"], []),
        ("reset", "unreachable", ["provider unreachable", "reset"], ["HTTP 500", "InternalServerError"]),
        ("garbage", "unparseable", ["unparseable output"], []),
    ],
)
def test_each_fault_is_named_for_what_it_is(quandary_home, mode, failure, must, must_not):
    with FaultStub(default=mode) as stub:
        r = ask(member(stub.base_url))
    assert not r.ok and r.failure == failure, r.error
    for text in must:
        assert text in r.error, r.error
    for text in must_not:
        assert text not in r.error, r.error
    if failure != "unparseable":
        assert "member stub" in r.error and stub.base_url in r.error


@pytest.mark.usefixtures("transport")
def test_refused_connection_is_not_reported_as_http_500(quandary_home):
    base = f"http://127.0.0.1:{free_port()}/v1"
    r = ask(member(base))
    assert r.failure == "unreachable" and "connection refused" in r.error
    assert "500" not in r.error and "InternalServerError" not in r.error
    assert f"member stub, api_base {base}" in r.error


@pytest.mark.usefixtures("transport")
def test_hang_is_a_timeout_then_released(quandary_home):
    with FaultStub(modes=["hang"], default="ok") as stub:
        r = ask(member(stub.base_url, timeout_s=0.5, max_retries=0))
        assert r.failure == "timeout" and "timeout" in r.error
        stub.release()
        assert ask(member(stub.base_url, timeout_s=5.0)).ok  # a new call: the cache held no failure


@pytest.mark.usefixtures("transport")
def test_retries_ride_out_transient_faults(quandary_home):
    with FaultStub(modes=["429", "503", "reset"], default="ok") as stub:
        r = ask(member(stub.base_url, max_retries=3))
    assert r.ok and r.attempts == 4 and stub.log == ["429", "503", "reset", "ok"]


@pytest.fixture
def stage_ctx(demo_db_path):
    ctx_schema = render_schema_context(inspect_database(demo_db_path))

    def make(members, **kw):
        return StageContext(str(demo_db_path), ctx_schema, Council("validators", members, call_log()), **kw)

    return make


def _rows(n):
    rows = [ans_row(f"c{i}") for i in range(n)]
    for i, r in enumerate(rows):
        r["question"] = f"List the titles of the courses worth {3 * (i + 1)} credits."
    return rows


@pytest.mark.usefixtures("transport")
@pytest.mark.parametrize(
    "mode, remedy",
    [
        ("refused", "start the server or fix api_base"),
        ("context", "context window"),
        ("429", "lower max_in_flight"),
        ("500", "check its logs"),
    ],
)
def test_stage_failure_gives_the_right_remedy(quandary_home, stage_ctx, mode, remedy):
    if mode == "refused":
        base, stub = f"http://127.0.0.1:{free_port()}/v1", None
    else:
        stub = FaultStub(default=mode).__enter__()
        base = stub.base_url
    try:
        with pytest.raises(ProviderUnavailable) as err:
            run_stage(3, _rows(2), stage_ctx([member(base, "m1", max_retries=0), member(base, "m2", max_retries=0)]))
    finally:
        if stub:
            stub.__exit__(None, None, None)
    msg = str(err.value)
    assert remedy in msg and "once the endpoint is back" not in msg
    assert f"api_base {base}" in msg
    if mode != "refused":
        assert "re-execute" not in msg


def test_damaged_call_log_is_a_local_storage_error(quandary_home):
    quandary_home.mkdir(parents=True, exist_ok=True)
    path = quandary_home / "llm_calls.sqlite"
    path.write_bytes(b"this is not a database" * 200)
    with pytest.raises(CallLogDamaged) as err:
        CallLog(path)
    msg = str(err.value)
    assert "local storage error" in msg and str(path) in msg and "move it away" in msg


def test_call_log_damaged_mid_run_is_a_storage_error(quandary_home, stage_ctx, monkeypatch):
    def malformed(self, call_id):  # what SQLite raises when pages of the log are damaged under a run
        raise sqlite3.DatabaseError("database disk image is malformed")

    with FaultStub(default="ok") as stub:
        ctx = stage_ctx([member(stub.base_url, "m1"), member(stub.base_url, "m2")])
        monkeypatch.setattr(CallLog, "lookup", malformed)
        with pytest.raises(ProviderUnavailable) as err:
            run_stage(3, _rows(2), ctx)
    msg = str(err.value)
    assert "local storage error" in msg and "llm_calls.sqlite" in msg and "malformed" in msg
    assert "waiting for the provider will not help" in msg
    assert stub.requests == 0


@pytest.mark.usefixtures("transport")
def test_garbage_200_fails_loudly_and_is_retried_after_recovery(quandary_home, stage_ctx):
    rows = _rows(4)
    with FaultStub(default="garbage") as stub:
        members = [member(stub.base_url, "m1"), member(stub.base_url, "m2"), member(stub.base_url, "m3")]
        with pytest.raises(ProviderUnavailable, match="unparseable") as err:
            run_stage(3, rows, stage_ctx(members))
        assert "not cached" in str(err.value)
        garbage_requests = stub.requests
        assert garbage_requests >= 8
        stub.default = "ok"  # the provider recovers
        stub.content = '{"verdict": "yes"}'
        decisions = run_stage(3, rows, stage_ctx(members))
    assert stub.requests > garbage_requests  # asked again: the garbage was not served from the cache
    assert all(d["passed"] for d in decisions)
