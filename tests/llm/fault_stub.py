"""A deterministic loopback LLM stub with fault injection (OpenAI-compatible chat completions).

``FaultStub(modes=[...], default="ok")`` serves ``POST /v1/chat/completions`` from a thread; each
request takes the next mode of ``modes`` (then ``default`` forever):

- ``"ok"``: HTTP 200 with ``content`` (a JSON answer);
- ``"garbage"``: HTTP 200 whose message is prose, not JSON;
- ``"429"``, ``"500"``, ``"503"``, any ``"<status>"``: that HTTP status with an OpenAI-style error;
- ``"context"``: HTTP 400 "maximum context length exceeded", as vLLM / llama.cpp answer;
- ``"hang"``: accept, read the request, answer nothing until :meth:`release` (or shutdown);
- ``"reset"``: accept, then close the socket with RST (SO_LINGER 0), no HTTP answer;
- ``"badjson"``: HTTP 200 whose body is not JSON; ``"nochoices"``: HTTP 200 JSON without ``choices``;
- ``"truncated"``: HTTP 200 announcing more bytes than it sends, then closing the connection;
- ``"huge"``: HTTP 200 whose answer is ``huge_bytes`` long (a server ignoring ``max_tokens``);
- ``"429-after:<value>"``: HTTP 429 with ``Retry-After: <value>`` (seconds or an HTTP-date).

Deterministic: replies depend only on the mode sequence. ``requests`` counts requests;
``seen`` is an event set at every request, so tests wait on it instead of sleeping.
"""

import json
import socket
import struct
import threading
import time

from tests.llm_fakes import LoopbackStub, StubHandler, chat_completion


class FaultStub(LoopbackStub):
    def __init__(self, modes=(), default: str = "ok", content: str = '{"verdict": "yes"}', huge_bytes: int = 50 << 20):
        self.modes = list(modes)
        self.huge_bytes = huge_bytes
        self.times: list[float] = []  # time.monotonic() of each request
        self.default = default
        self.content = content
        self.requests = 0
        self.log: list[str] = []  # the mode served to each request, in order
        self.seen = threading.Event()
        self._released = threading.Event()
        self._lock = threading.Lock()
        outer = self

        class Handler(StubHandler):
            def do_POST(self):
                body = self.read_json()
                with outer._lock:
                    outer.requests += 1
                    mode = outer.modes.pop(0) if outer.modes else outer.default
                    outer.log.append(mode)
                    outer.times.append(time.monotonic())
                outer.seen.set()
                if mode == "hang":
                    outer._released.wait()
                    mode = "ok"
                if mode == "reset":
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                    self.close_connection = True
                    return
                if mode == "context":
                    self.send_json(
                        400,
                        {
                            "error": {
                                "message": "This model's maximum context length is 2048 tokens. However, you requested "
                                "9000 tokens. Please reduce the length of the messages.",
                                "type": "invalid_request_error",
                                "code": "context_length_exceeded",
                            }
                        },
                    )
                    return
                if mode.startswith("429-after:"):
                    data = json.dumps({"error": {"message": "slow down", "type": "rate_limit", "code": 429}}).encode()
                    self.send_response(429)
                    self.send_header("Retry-After", mode.split(":", 1)[1])
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                if mode in ("badjson", "nochoices", "truncated"):
                    data = {
                        "badjson": b"<html>502 bad gateway (but sent as 200)</html>",
                        "nochoices": json.dumps({"id": "x", "object": "chat.completion", "model": "stub"}).encode(),
                        "truncated": json.dumps(chat_completion(outer.content)).encode(),
                    }[mode]
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data) + (500 if mode == "truncated" else 0)))
                    self.end_headers()
                    self.wfile.write(data[: len(data) // 2] if mode == "truncated" else data)
                    if mode == "truncated":
                        self.wfile.flush()
                        self.connection.shutdown(socket.SHUT_RDWR)
                        self.close_connection = True
                    return
                if mode == "huge":
                    text = '{"verdict": "yes", "pad": "' + "x" * outer.huge_bytes + '"}'
                    self.send_json(200, chat_completion(text, outer.requests, body.get("model", "stub")))
                    return
                if mode.isdigit():
                    self.send_error_status(int(mode))
                    return
                text = outer.content if mode == "ok" else "I am sorry, I cannot answer in JSON today."
                self.send_json(200, chat_completion(text, outer.requests, body.get("model", "stub")))

        self._serve(Handler)

    def release(self) -> None:
        """Let every hanging request answer (``ok``)."""
        self._released.set()

    def wait_for_requests(self, n: int, timeout_s: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while self.requests < n:
            self.seen.clear()
            if self.requests >= n:
                break
            if not self.seen.wait(max(0.0, deadline - time.monotonic())):
                return self.requests >= n
        return True

    unblock = release


def free_port() -> int:
    """A loopback port nobody listens on (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
