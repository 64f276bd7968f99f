"""Chat completions sent straight to an OpenAI-compatible server (vLLM, llama.cpp, the embedded
server, a loopback stub) over one pooled aiohttp session, without litellm (issue 21 item 6).

Why: profiled at 64 requests in flight, a call spent ~8 ms of client CPU, half of it in litellm's
per-call work (parameter mapping, logging, cost bookkeeping, the OpenAI SDK): a node could not keep
one vLLM server busy. httpx's connection pool costs 1.4-3 ms per request at 4-64 connections (it
scans every connection per request); aiohttp ~0.2 ms (``bench/README.md``). ``client.py`` keeps
everything else (retries, backoff, Retry-After, the answer-byte cap, failure classes) for both
paths; this module only moves bytes and says what went wrong in the same exception shapes the
failure classifier (``failures.classify_exception``) already reads:

- a non-200 answer: :class:`HTTPStatusError` (``status_code``, ``headers``, the server's message);
- a 200 body that is not JSON or has no choices: :class:`MalformedAnswer`;
- more bytes than the cap allows: :class:`AnswerTooLarge`;
- transport faults stay aiohttp's (``ClientConnectorError`` from a refused connection,
  ``ServerDisconnectedError``, ``ClientPayloadError`` for a body cut off mid-way).

One session per event loop: the background loop of ``runtime.run_sync`` (where every sync council
call runs) keeps its session for the life of the process; any other loop (``asyncio.run`` in a
test or script) gets a session per call, closed with it, so no connection outlives its loop.
"""

import asyncio
import atexit
import contextlib
import functools
import json
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator

import aiohttp

from resources.llm import runtime


class HTTPStatusError(Exception):
    """The server answered with a status other than 200. ``str()`` ends in ``" - <server message>"``,
    the shape ``failures._server_message`` keeps."""

    def __init__(self, status: int, message: str, headers=None):
        super().__init__(f"OpenAI-compatible server answered HTTP {status} - {message}")
        self.status_code = status
        self.headers = headers or {}


class MalformedAnswer(ValueError):
    """HTTP 200 whose body is not a chat completion (not JSON, no choices)."""


class AnswerTooLarge(Exception):
    """The answer is larger than the byte cap; ``size`` bytes were read (``partial``: at least)."""

    def __init__(self, size: int, partial: bool = False):
        super().__init__(f"{size} bytes")
        self.size, self.partial = size, partial


RETRYABLE = (aiohttp.ClientError, MalformedAnswer)  # transport faults, cut-off or garbled bodies

ERROR_BODY_BYTES = 64 << 10  # enough of an error body for its message


def body_limit(answer_cap: int) -> int:
    """Most body bytes read for an answer of at most ``answer_cap`` bytes: JSON escaping can make
    the answer up to 6x longer (``\\uXXXX``), plus the envelope."""
    return 8 * answer_cap + (64 << 10)


_pooled: dict = {}  # "session" -> the background loop's session, "loop" -> that loop


def _new_session() -> aiohttp.ClientSession:
    # No connection limit here: the member's max_in_flight (and the embedded slot gate) bound it.
    # Not trust_env: it reads ~/.netrc and the proxy variables on every request (a fifth of the
    # client's CPU per call); :func:`_proxy` reads the variables once per endpoint instead.
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300), timeout=aiohttp.ClientTimeout(total=None)
    )


@functools.lru_cache(maxsize=256)
def _proxy(url: str) -> str | None:
    """The proxy for ``url`` from HTTP(S)_PROXY / NO_PROXY (as litellm's client honours them)."""
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


@contextlib.asynccontextmanager
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    """The pooled session on the background loop, else a session for this call."""
    loop = asyncio.get_running_loop()
    if not runtime.is_background_loop(loop):
        async with _new_session() as s:
            yield s
        return
    s = _pooled.get("session")
    if s is None or s.closed or _pooled.get("loop") is not loop:
        s = _pooled["session"] = _new_session()
        _pooled["loop"] = loop
    yield s


@atexit.register
def close_pool() -> None:
    """Close the pooled connections (interpreter exit; tests)."""
    s, loop = _pooled.pop("session", None), _pooled.pop("loop", None)
    if s is not None and loop is not None and loop.is_running() and not s.closed:
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(s.close(), loop).result(2.0)


def _headers(api_key: str | None) -> dict:
    return {"Content-Type": "application/json", **({"Authorization": f"Bearer {api_key}"} if api_key else {})}


async def _status_error(resp: aiohttp.ClientResponse) -> HTTPStatusError:
    raw = await resp.content.read(ERROR_BODY_BYTES)
    text = raw.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
        err = data.get("error", data) if isinstance(data, dict) else data
        message = (err.get("message") or err.get("detail")) if isinstance(err, dict) else None
        text = str(message or err)
    except ValueError:
        pass
    return HTTPStatusError(resp.status, " ".join(text.split())[:500] or resp.reason or "", resp.headers)


async def complete(
    url: str, api_key: str | None, body: dict, *, timeout_s: float, answer_cap: int
) -> tuple[str, int, int]:
    """One non-streamed chat completion within ``timeout_s`` (connect to last byte):
    ``(text, prompt_tokens, completion_tokens)``."""
    limit = body_limit(answer_cap)
    async with (
        asyncio.timeout(timeout_s),
        session() as s,
        s.post(url, data=json.dumps(body).encode(), headers=_headers(api_key), proxy=_proxy(url)) as resp,
    ):
        if resp.status != 200:
            raise await _status_error(resp)
        if resp.content_length is not None and resp.content_length <= limit:
            raw = await resp.read()
        else:  # unknown or too long: read no more than the limit, then hang up
            raw = await resp.content.read(limit + 1)
            while len(raw) <= limit and not resp.content.at_eof():
                raw += await resp.content.read(limit + 1 - len(raw))
            if len(raw) > limit:
                resp.close()
                raise AnswerTooLarge(len(raw), partial=True)
    try:
        data = json.loads(raw)
    except ValueError as exc:  # also UnicodeDecodeError
        raise MalformedAnswer("the body is not JSON") from exc
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedAnswer("the body has no 'choices' (not a chat completion)")
    message = choices[0].get("message") or {}
    usage = data.get("usage") or {}
    return (
        (message.get("content") if isinstance(message, dict) else None) or "",
        int(usage.get("prompt_tokens") or 0),
        int(usage.get("completion_tokens") or 0),
    )


async def stream(url: str, api_key: str | None, body: dict) -> AsyncIterator[tuple[str | None, tuple | None]]:
    """A streamed chat completion as ``(content, (prompt_tokens, completion_tokens) | None)`` per
    server-sent event. No deadline of its own: the reader (``client._read_stream``) puts one on
    every event, the first including the connection. Closing the iterator hangs up."""
    body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    async with (
        session() as s,
        s.post(url, data=json.dumps(body).encode(), headers=_headers(api_key), proxy=_proxy(url)) as resp,
    ):
        if resp.status != 200:
            raise await _status_error(resp)
        while True:
            try:
                line = await resp.content.readline()
            except ValueError as exc:  # one event larger than aiohttp's line buffer
                raise MalformedAnswer(f"a streamed event is too long ({exc})") from exc
            if not line:
                return
            line = line.strip()
            if not line.startswith(b"data:"):
                continue  # blank separators, comments, "event:" lines
            payload = line[5:].strip()
            if payload == b"[DONE]":
                return
            try:
                event = json.loads(payload)
            except ValueError as exc:
                raise MalformedAnswer("a streamed event is not JSON") from exc
            if not isinstance(event, dict):
                raise MalformedAnswer("a streamed event is not a chat completion chunk")
            if event.get("error"):
                err = event["error"]
                status = err.get("code") if isinstance(err, dict) and isinstance(err.get("code"), int) else 500
                raise HTTPStatusError(status, str(err.get("message") if isinstance(err, dict) else err)[:500])
            choices = event.get("choices") or []
            delta = choices[0].get("delta") if choices and isinstance(choices[0], dict) else None
            usage = event.get("usage")
            yield (
                (delta or {}).get("content") if isinstance(delta, dict) else None,
                (int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))
                if isinstance(usage, dict)
                else None,
            )
