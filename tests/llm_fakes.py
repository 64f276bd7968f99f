"""Test doubles for the LLM layer (no network, deterministic).

- :class:`ScriptedLLM`: a litellm ``CustomLLM`` registered as provider ``scripted`` in
  ``litellm.custom_provider_map`` (use model strings ``scripted/<name>``). A *responder* decides each
  reply: a string, an exception (see :func:`http_error`), or :class:`Reply` with a delay. It counts
  requests (``handler.requests``).
- :class:`StubOpenAIServer`: a loopback OpenAI-compatible HTTP server (``/v1/chat/completions``) with
  scripted HTTP statuses and a fixed latency, for the HTTP-error tests and the benchmark. Run it
  in-process (thread) or as a subprocess: ``python tests/llm_fakes.py --latency 0.05``.
- Fixtures ``scripted`` and ``quandary_home``: import them into a test module.
"""

import asyncio
import json
import select
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import resources.llm.client as client
from resources.llm.config import Member


@dataclass
class Reply:
    text: str = ""
    delay_s: float = 0.0
    prompt_tokens: int = 10
    completion_tokens: int = 5


@dataclass
class ScriptedRequest:
    model: str
    messages: list[dict]
    params: dict
    index: int  # 0-based over all requests to this handler
    model_index: int  # 0-based over requests to this model


def http_error(status: int, message: str = "scripted error") -> Exception:
    from litellm.llms.custom_llm import CustomLLMError  # lazy: litellm is slow to import

    return CustomLLMError(status_code=status, message=message)


def json_reply(obj: Any) -> str:
    return json.dumps(obj)


def sequence(*items) -> Callable[[ScriptedRequest], Any]:
    """Reply with ``items`` in order per model; the last one repeats."""

    def responder(req: ScriptedRequest):
        return items[min(req.model_index, len(items) - 1)]

    return responder


def _make_handler_class():
    from litellm import CustomLLM, ModelResponse  # lazy: litellm is slow to import

    class ScriptedLLM(CustomLLM):
        def __init__(self, responder: Callable[[ScriptedRequest], Any] | None = None):
            super().__init__()
            self.responder = responder or (lambda req: json_reply({"answer": "ok"}))
            self.requests: list[ScriptedRequest] = []
            self.per_model: Counter = Counter()
            self.in_flight = 0
            self.max_in_flight = 0
            self._lock = threading.Lock()

        def _next(self, model, messages, optional_params) -> ScriptedRequest:
            with self._lock:
                req = ScriptedRequest(model, messages, dict(optional_params), len(self.requests), self.per_model[model])
                self.requests.append(req)
                self.per_model[model] += 1
                return req

        @staticmethod
        def _response(model: str, reply: Reply) -> ModelResponse:
            return ModelResponse(
                model=model,
                choices=[
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": reply.text}}
                ],
                usage={
                    "prompt_tokens": reply.prompt_tokens,
                    "completion_tokens": reply.completion_tokens,
                    "total_tokens": reply.prompt_tokens + reply.completion_tokens,
                },
            )

        def _resolve(self, req: ScriptedRequest) -> Reply:
            out = self.responder(req)
            if isinstance(out, BaseException):
                raise out
            return out if isinstance(out, Reply) else Reply(text=out)

        async def acompletion(
            self,
            model,
            messages,
            api_base,
            custom_prompt_dict,
            model_response,
            print_verbose,
            encoding,
            api_key,
            logging_obj,
            optional_params,
            *args,
            **kwargs,
        ):
            req = self._next(model, messages, optional_params)
            with self._lock:
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                reply = self._resolve(req)
                if reply.delay_s:
                    await asyncio.sleep(reply.delay_s)
                return self._response(model, reply)
            finally:
                with self._lock:
                    self.in_flight -= 1

        def completion(
            self,
            model,
            messages,
            api_base,
            custom_prompt_dict,
            model_response,
            print_verbose,
            encoding,
            api_key,
            logging_obj,
            optional_params,
            *args,
            **kwargs,
        ):
            req = self._next(model, messages, optional_params)
            reply = self._resolve(req)
            time.sleep(reply.delay_s)  # the fake provider's simulated latency (sync path), not a wait in a test
            return self._response(model, reply)

        @property
        def count(self) -> int:
            return len(self.requests)

    return ScriptedLLM


_handler_cls = None


def ScriptedLLM(responder=None):  # noqa: N802 - a factory that looks like the class
    """Create a scripted handler (litellm is imported lazily, after the offline env is set)."""
    global _handler_cls
    import resources.llm  # noqa: F401 - sets LITELLM_* offline variables before litellm import

    if _handler_cls is None:
        _handler_cls = _make_handler_class()
    return _handler_cls(responder)


def install(handler) -> None:
    from resources.llm.client import litellm_module  # lazy: bound after a fixture patches it

    litellm = litellm_module()
    litellm.custom_provider_map = [item for item in litellm.custom_provider_map if item["provider"] != "scripted"] + [
        {"provider": "scripted", "custom_handler": handler}
    ]


def scripted_member(name: str, **overrides):
    base = dict(
        model=f"scripted/{name}",
        temperature=0.0,
        max_tokens=64,
        seed=0,
        max_in_flight=4,
        timeout_s=5.0,
        max_retries=3,
        backoff_base_s=0.001,
        backoff_max_s=0.01,
    )
    return Member(name=name, **{**base, **overrides})


@pytest.fixture
def quandary_home(tmp_path, monkeypatch):
    monkeypatch.setenv("QUANDARY_HOME", str(tmp_path / "qhome"))
    monkeypatch.delenv("QUANDARY_COUNCIL_CONFIG", raising=False)
    from resources.llm import reset_councils  # lazy: after the setup above it (environment, monkeypatch or sys.path)

    reset_councils()
    yield tmp_path / "qhome"
    reset_councils()


@pytest.fixture
def scripted(quandary_home):
    """A fresh ScriptedLLM installed as provider ``scripted``; set ``.responder`` in the test."""
    handler = ScriptedLLM()
    install(handler)
    yield handler


@pytest.fixture(params=["direct", "litellm"])
def transport(request, monkeypatch):
    """Run the test once per client path to an OpenAI-compatible server (issue 21 item 6): the
    direct pooled HTTP client, where litellm must not be touched, and litellm
    (``$QUANDARY_LLM_TRANSPORT=litellm``), which must be the one used. Same test, same assertions:
    both paths give the same failures, retries and answers."""

    real = client.litellm_module
    used = []

    def watched():
        used.append(1)
        return real()

    monkeypatch.setattr(client, "litellm_module", watched)
    if request.param == "litellm":
        monkeypatch.setenv("QUANDARY_LLM_TRANSPORT", "litellm")
    else:
        monkeypatch.delenv("QUANDARY_LLM_TRANSPORT", raising=False)
    yield request.param
    assert bool(used) == (request.param == "litellm"), f"{request.param} path: litellm used {len(used)} times"


# --- loopback OpenAI-compatible stub server --------------------------------------------------


@dataclass
class StubScript:
    """Per request: pop the next status from ``statuses`` (then 200 forever); sleep ``latency_s``."""

    statuses: list[int] = field(default_factory=list)
    latency_s: float = 0.0
    content: str = '{"answer": "ok"}'
    hang_s: float = 0.0  # sleep this long before answering (timeout tests)
    hang_requests: int | None = None  # only the first N requests hang (None: every one)


class LoopbackServer(ThreadingHTTPServer):
    """The HTTP server of every loopback stub in the tests."""

    request_queue_size = 128  # many clients connect at once in the benchmark
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # A client that hung up (past the answer-size cap the client closes the connection) is
        # what the test wants, not a stub error worth a traceback.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def chat_completion(content: str, n: int = 0, model: str = "stub") -> dict:
    """An OpenAI ``chat.completion`` response body answering ``content``."""
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 6, "total_tokens": 18},
    }


class StubHandler(BaseHTTPRequestHandler):
    """Base handler of the loopback OpenAI-compatible stubs: keep-alive, quiet, ``GET /v1/models``,
    JSON in and out; a client that has gone away is not an error."""

    protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
    disable_nagle_algorithm = True  # headers and body are separate writes: avoid 40 ms ACK stalls

    def log_message(self, *a):  # quiet
        pass

    def do_GET(self):
        self.send_json(200, {"object": "list", "data": [{"id": "stub", "object": "model"}]})

    def read_json(self) -> dict:
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")

    def send_json(self, status: int, obj) -> bool:
        data = json.dumps(obj).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return True
        except OSError:  # BrokenPipe / ConnectionReset: the client stopped waiting
            return False

    def client_gone(self) -> bool:
        """True when the client closed its end (a killed process's sockets are closed by the kernel):
        an EOF is waiting to be read. Data waiting (a pipelined request) means it is still there."""
        try:
            ready, _, _ = select.select([self.connection], [], [], 0)
            return bool(ready) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def send_error_status(self, status: int) -> None:
        self.send_json(status, {"error": {"message": f"stub status {status}", "type": "stub", "code": status}})


class LoopbackStub:
    """The life cycle shared by every loopback stub: ``_serve(Handler)`` binds a free loopback port,
    ``with stub:`` serves it on a daemon thread, and leaving the block first calls ``unblock()``
    (wake the requests the stub holds) so that shutdown does not wait for them."""

    def _serve(self, handler: type[BaseHTTPRequestHandler], port: int = 0) -> None:
        self.httpd = LoopbackServer(("127.0.0.1", port), handler)
        self.port = self.httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    url = base_url

    def unblock(self) -> None:
        """Wake every held request (a stub that holds none has nothing to do)."""

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.unblock()
        self.httpd.shutdown()
        self.httpd.server_close()


class StubOpenAIServer(LoopbackStub):
    def __init__(self, script: StubScript | None = None, port: int = 0):
        self.script = script or StubScript()
        self.requests = 0
        self.bodies: list[dict] = []  # every request's JSON body, in order
        self.clients: set = set()  # (host, port) of every connection: how many the client opened
        self._lock = threading.Lock()
        self._stop = threading.Event()
        outer = self

        class Handler(StubHandler):
            def do_POST(self):
                body = self.read_json()
                with outer._lock:
                    outer.requests += 1
                    outer.bodies.append(body)
                    outer.clients.add(self.client_address)
                    n = outer.requests
                    status = outer.script.statuses.pop(0) if outer.script.statuses else 200
                # the stub's simulated slowness; shutdown ends it early
                hangs = outer.script.hang_requests is None or n <= outer.script.hang_requests
                outer._stop.wait((outer.script.hang_s if hangs else 0.0) + outer.script.latency_s)
                if status != 200:
                    self.send_error_status(status)
                    return
                self.send_json(200, chat_completion(outer.script.content, n, body.get("model", "stub")))

        self._serve(Handler, port)

    def unblock(self) -> None:
        self._stop.set()


if __name__ == "__main__":  # a stub in its own process (bench/bench_council.py, bench/bench_workers.py)
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--content", default=StubScript.content, help="the answer to every request")
    args = ap.parse_args()
    server = StubOpenAIServer(StubScript(latency_s=args.latency, content=args.content))
    print(server.port, flush=True)
    with server:
        sys.stdin.read()  # serve until the parent closes our stdin
    try:
        print(json.dumps({"requests": server.requests}), flush=True)
    except BrokenPipeError:  # the parent stopped reading
        pass
