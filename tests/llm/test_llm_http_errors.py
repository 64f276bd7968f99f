"""Real HTTP through litellm's OpenAI client to a loopback stub that answers with errors."""

import socket
from typing import Literal

import pytest
from pydantic import BaseModel

from resources.llm import Council
from resources.llm.config import Member
from resources.llm.registry import call_log
from tests.llm_fakes import StubOpenAIServer, StubScript

pytestmark = pytest.mark.integration  # real processes, servers or files under stress


class Verdict(BaseModel):
    verdict: Literal["yes", "no"]


MSGS = [{"role": "user", "content": "Is this answerable?"}]


def member(base_url, **kw):
    base = dict(
        name="stub",
        model="openai/stub",
        api_base=base_url,
        max_retries=3,
        backoff_base_s=0.01,
        backoff_max_s=0.05,
        timeout_s=5.0,
    )
    return Member(**{**base, **kw})


def ask(m, tag=None):
    return Council("validators", [m], call_log()).ask(m.name, MSGS, Verdict, tag=tag)


@pytest.mark.usefixtures("transport")
def test_429_and_500_then_ok(quandary_home):
    with StubOpenAIServer(StubScript(statuses=[429, 500], content='{"verdict": "Yes"}')) as stub:
        r = ask(member(stub.base_url))
    assert r.ok and r.parsed.verdict == "yes"
    assert stub.requests == 3 and r.attempts == 3
    assert r.prompt_tokens == 12 and r.completion_tokens == 6 and r.cost == 0.0


@pytest.mark.usefixtures("transport")
def test_permanent_500_is_a_recorded_failure(quandary_home):
    with StubOpenAIServer(StubScript(statuses=[500] * 100)) as stub:
        r = ask(member(stub.base_url, max_retries=2), tag={"stage": "s1", "candidate_id": "c1"})
    assert not r.ok and r.status == "call_failed" and stub.requests == 3
    assert "500" in r.error
    row = call_log().get(r.call_id)
    assert row.status == "call_failed" and row.attempts == 3 and row.tag["candidate_id"] == "c1"


@pytest.mark.usefixtures("transport")
def test_timeout_then_ok(quandary_home):
    # The first request hangs past the timeout; the retry is answered at once. (A timer that ended
    # the hang after 0.3 s failed on a loaded machine: the first request arrived after it.)
    script = StubScript(hang_s=1.5, hang_requests=1, content='{"verdict": "no"}')
    with StubOpenAIServer(script) as stub:
        m = member(stub.base_url, timeout_s=0.5)
        council = Council("validators", [m], call_log())
        r = council.ask("stub", MSGS, Verdict)
    assert r.ok and r.attempts >= 2 and stub.requests >= 2


@pytest.mark.usefixtures("transport")
def test_connection_refused_is_retried_then_recorded(quandary_home):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = ask(member(f"http://127.0.0.1:{port}/v1", max_retries=2))
    assert not r.ok and r.status == "call_failed" and r.attempts == 3
    assert "Connection" in r.error or "connect" in r.error.lower()


@pytest.mark.usefixtures("transport")
def test_400_is_not_retried(quandary_home):
    with StubOpenAIServer(StubScript(statuses=[400] * 10)) as stub:
        r = ask(member(stub.base_url, structured_output="prompt"))
    assert not r.ok and stub.requests == 1 and r.attempts == 1
