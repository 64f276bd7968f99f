"""Issue 21 item 6: members served by an OpenAI-compatible server are called directly over one
pooled HTTP session instead of through litellm. The failure classes, retries, Retry-After, answer
cap and stall deadline of both paths are pinned by the fault tests, parametrised over both paths
(``transport`` fixture: test_llm_faults, test_llm_http_errors, test_answer_bounds,
test_llm_streaming). Here: what only the direct path has."""

import asyncio
import gc
import warnings
from typing import Literal

import pytest
from pydantic import BaseModel

from resources.llm import Council, call_log
from resources.llm.client import _cost, _Reply, uses_direct_http
from resources.llm.config import Member
from resources.llm.openai_http import _proxy
from tests.llm_fakes import StubOpenAIServer, StubScript

pytestmark = pytest.mark.integration  # loopback servers


class Verdict(BaseModel):
    verdict: Literal["yes", "no"]


YES = '{"verdict": "yes"}'


def _ask(member: Member, text: str = "Is this answerable?", **kw):
    return Council("validators", [member], call_log()).ask(
        member.name, [{"role": "system", "content": "You judge."}, {"role": "user", "content": text}], Verdict, **kw
    )


@pytest.mark.parametrize(
    "model, structured", [("openai/Qwen/Qwen2.5-7B-Instruct", "json_schema"), ("hosted_vllm/llama", "json_object")]
)
def test_the_direct_path_sends_what_litellm_sends(quandary_home, monkeypatch, model, structured):
    """Same JSON body (served model name, sampling parameters, response_format) on both paths."""
    bodies = {}
    for transport in ("auto", "litellm"):
        with StubOpenAIServer(StubScript(content=YES)) as stub:
            m = Member(
                name=f"m-{transport}",
                model=model,
                api_base=stub.base_url,
                seed=3,
                top_p=0.9,
                frequency_penalty=0.1,
                structured_output=structured,
                transport=transport,
            )
            assert _ask(m, use_cache=False).ok
            bodies[transport] = stub.bodies[0]
    assert uses_direct_http(Member(name="x", model=model, api_base="http://h/v1"))
    assert bodies["auto"] == bodies["litellm"]
    assert bodies["auto"]["model"] == model.split("/", 1)[1] and bodies["auto"]["seed"] == 3


def test_only_openai_compatible_servers_skip_litellm(monkeypatch):
    direct = Member(name="v", model="openai/qwen", api_base="http://gpu:8000/v1")
    assert uses_direct_http(direct)
    assert uses_direct_http(Member(name="e", model="openai/smollm2", api_base="embedded"))
    assert not uses_direct_http(Member(name="o", model="openai/gpt-4o-mini"))  # the OpenAI API: litellm
    assert not uses_direct_http(Member(name="l", model="ollama_chat/llama3.1", api_base="http://localhost:11434"))
    assert not uses_direct_http(direct.model_copy(update={"transport": "litellm"}))
    monkeypatch.setenv("QUANDARY_LLM_TRANSPORT", "litellm")
    assert not uses_direct_http(direct)


def test_calls_share_pooled_connections(quandary_home):
    """Twenty calls one after the other reuse one keep-alive connection (a client per call, or a
    pool that drops connections, opens twenty)."""
    with StubOpenAIServer(StubScript(content=YES)) as stub:
        m = Member(name="p", model="openai/stub", api_base=stub.base_url, max_in_flight=1)
        results = [_ask(m, f"question {i}") for i in range(20)]
    assert all(r.ok for r in results) and stub.requests == 20
    assert len(stub.clients) == 1, stub.clients


def test_a_call_on_another_event_loop_closes_its_session(quandary_home):
    """Outside the council's background loop (``asyncio.run`` in a script) each call has its own
    session, closed with the call: nothing is left open when that loop ends."""
    with StubOpenAIServer(StubScript(content=YES)) as stub:
        m = Member(name="a", model="openai/stub", api_base=stub.base_url)
        council = Council("validators", [m], call_log())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            r = asyncio.run(council.aask("a", [{"role": "user", "content": "q"}], Verdict))
            gc.collect()
    assert r.ok, r.error
    assert not [w for w in caught if "Unclosed" in str(w.message)], [str(w.message) for w in caught]


def test_proxies_come_from_the_environment_once_per_endpoint(monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "gpu-box,127.0.0.1")
    _proxy.cache_clear()
    try:
        assert _proxy("http://other-host:8000/v1/chat/completions") == "http://proxy.example:3128"
        assert _proxy("http://gpu-box:8000/v1/chat/completions") is None
        assert _proxy("http://127.0.0.1:9/v1/chat/completions") is None
    finally:
        _proxy.cache_clear()


def test_a_priced_model_on_the_direct_path_is_costed_from_its_tokens():
    """No litellm response on the direct path: the cost is tokens x the model's price per token
    (litellm's price list); a self-hosted model not in it costs 0."""
    priced = Member(name="g", model="openai/gpt-4o-mini", api_base="https://api.openai.com/v1")
    cost = _cost(priced, _Reply("{}", prompt_tokens=1000, completion_tokens=100))
    assert 0 < cost < 0.01
    assert (
        _cost(Member(name="q", model="openai/my-own-finetune", api_base="http://gpu:8000/v1"), _Reply("{}", 1000, 100))
        == 0.0
    )
