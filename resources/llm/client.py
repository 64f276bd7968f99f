"""The one place that calls litellm: a structured, cached, logged, retried LLM call.

``await call_structured(member, messages, OutputModel, log=..., tag=...) -> CallResult`` never raises:

1. key = :func:`storage.llm_log.call_key` of (model, messages, sampling params, output schema); a
   cached ``ok``/``parse_failed`` row is returned with ``cached=True`` and no request;
2. otherwise the request asks for JSON-schema output (``response_format``) where the member supports
   it, with retries + exponential backoff + jitter on 429 / 5xx / timeouts / refused connections, and
   a per-attempt timeout; the inner retries of litellm and the OpenAI SDK are disabled so attempts
   are counted here. Members served by an OpenAI-compatible server (``openai/`` or ``hosted_vllm/``
   with an ``api_base``: vLLM, llama.cpp, the embedded server) are sent straight over one pooled
   HTTP session (:mod:`resources.llm.openai_http`); every other provider goes through litellm;
3. the reply is parsed robustly (:mod:`resources.llm.parsing`); if that fails, one repair call shows
   the model its output, the error and the schema;
4. the outcome is written to the call log (one row per ``call_id``) and returned.
"""

import asyncio
import contextlib
import copy
import dataclasses
import json
import os
import random
import time
import weakref
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from resources import progress
from resources.llm import openai_http
from resources.llm.config import Member, check_key_env
from resources.llm.failures import (
    STORAGE_CLASSES,
    CallFailure,
    FailureClass,
    classify_exception,
    classify_text,
    describe,
)
from resources.llm.log_thread import run_in_log_thread
from resources.llm.parsing import output_schema, parse_structured
from resources.startup import heavy_imports
from storage.llm_log import CallLogRules, CallRecord, call_key

# Before litellm is ever imported: no remote cost map fetch, no network at import.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["LITELLM_OFFLINE_MODE"] = "true"

T = TypeVar("T", bound=BaseModel)

_litellm = None
_no_schema_support: set[tuple[str, str | None]] = set()  # (model, api_base) that rejected json_schema


def litellm_module():
    """Import and configure litellm once (lazily: the import is slow and must follow the env setup)."""
    global _litellm
    if _litellm is None:
        with heavy_imports():
            import litellm  # lazy: litellm reads env vars at import (set first) and is slow

        litellm.suppress_debug_info = True  # no "Provider List: ..." banners on stdout
        litellm.telemetry = False
        litellm.drop_params = True  # a provider that lacks e.g. seed drops it instead of failing
        _register_local_models(litellm)
        _litellm = litellm
    return _litellm


_ZERO_COST = {
    "input_cost_per_token": 0.0,
    "output_cost_per_token": 0.0,
    "cache_creation_input_token_cost": 0.0,
    "cache_read_input_token_cost": 0.0,
    "mode": "chat",
    "max_tokens": 8192,
}
_registered: set[str] = set()


def _register_local_models(litellm) -> None:
    register_zero_cost(litellm, "openai/smollm2")


def register_zero_cost(litellm, model: str) -> None:
    """Local models are free; a price entry also spares litellm's slow "model not mapped" path."""
    if model in _registered:
        return
    _registered.add(model)
    provider = model.split("/", 1)[0] if "/" in model else "openai"
    try:
        litellm.register_model({model: {**_ZERO_COST, "litellm_provider": provider}})
    except Exception:  # cost bookkeeping must never break calls
        pass


@dataclass(frozen=True)
class CallResult(Generic[T]):
    """Outcome of one structured call. ``ok`` ⇔ ``parsed`` is a valid ``T``; ``raw_text`` always kept."""

    call_id: str
    member: str
    ok: bool
    parsed: T | None
    raw_text: str | None
    error: str | None = None
    status: str = "ok"  # ok | parse_failed | call_failed
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    cost: float = 0.0
    attempts: int = 0
    repaired: bool = False
    tag: dict = field(default_factory=dict)
    failure: str | None = None  # resources.llm.failures.FailureClass value when not ok

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class _Completion:
    text: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    attempts: int = 0
    error: str | None = None
    failure: CallFailure | None = None


# --- request building ----------------------------------------------------------------------


def schema_prompt(schema: dict) -> str:
    return "Reply with only a JSON object (no prose, no code fence) that matches this JSON schema:\n" + json.dumps(
        schema, separators=(",", ":")
    )


def build_messages(member: Member, messages: list[dict], schema: dict) -> list[dict]:
    if member.structured_output == "json_schema" and (member.model, member.api_base) not in _no_schema_support:
        return list(messages)
    return with_schema_prompt(messages, schema)


def with_schema_prompt(messages: list[dict], schema: dict) -> list[dict]:
    # Without server-side constraints the schema must be in the prompt; append it at the end so the
    # long shared prefix stays identical across prompts (prefix caching).
    msgs = [dict(m) for m in messages]
    if msgs and msgs[-1].get("role") == "user" and isinstance(msgs[-1].get("content"), str):
        msgs[-1]["content"] = msgs[-1]["content"] + "\n\n" + schema_prompt(schema)
    else:
        msgs.append({"role": "user", "content": schema_prompt(schema)})
    return msgs


def schema_name(output_model: type[BaseModel]) -> str:
    """The name a schema is sent and logged under: its JSON title (the class name unless the model
    sets ``title``, as a renamed class does to keep its cache keys)."""
    return output_model.model_config.get("title") or output_model.__name__


# The embedded model rambles (a 512-token "SQL" of INSERT rows): every free-text field gets a bound
# sized for a small model in the schema the server's grammar enforces, so no answer runs to
# max_tokens. The parse still uses the output model, so other members are not affected.
EMBEDDED_MAX_TEXT_CHARS = 400  # a question, a reason, one SQL query of the size a 135M model gets right
EMBEDDED_MAX_ITEM_CHARS = 80  # strings inside lists: names, table.column links
EMBEDDED_MAX_ITEMS = 6


def bounded_schema(schema: dict) -> dict:
    """``schema`` with every string at most :data:`EMBEDDED_MAX_TEXT_CHARS` (list items:
    :data:`EMBEDDED_MAX_ITEM_CHARS`) and every array at most :data:`EMBEDDED_MAX_ITEMS` long."""

    def walk(node, in_array=False):
        if isinstance(node, list):
            return [walk(x, in_array) for x in node]
        if not isinstance(node, dict):
            return node
        out = {
            k: walk(v, in_array=(k == "items")) if k in ("items",) else (walk(v) if isinstance(v, (dict, list)) else v)
            for k, v in node.items()
        }
        if out.get("type") == "string" and "enum" not in out and "const" not in out:
            cap = EMBEDDED_MAX_ITEM_CHARS if in_array else EMBEDDED_MAX_TEXT_CHARS
            out["maxLength"] = min(out.get("maxLength", cap), cap)
            if out.get("minLength", 0) > out["maxLength"]:
                out["minLength"] = out["maxLength"]
        if out.get("type") == "array":
            out["maxItems"] = min(out.get("maxItems", EMBEDDED_MAX_ITEMS), EMBEDDED_MAX_ITEMS)
            if out.get("minItems", 0) > out["maxItems"]:
                out["minItems"] = out["maxItems"]
        return out

    return walk(schema)


def schema_token_bound(schema: dict) -> int | None:
    """An upper estimate of the tokens a JSON answer to ``schema`` needs (about two characters per
    token for bounded strings, a few for keys, punctuation, numbers and enums); ``None`` when some
    part is unbounded."""
    defs = schema.get("$defs", {})

    def size(node, depth=0) -> int | None:
        if depth > 20 or not isinstance(node, dict):
            return None
        if "$ref" in node:
            return size(defs.get(node["$ref"].rsplit("/", 1)[-1]), depth + 1)
        for key in ("anyOf", "oneOf"):
            if key in node:
                sizes = [size(x, depth + 1) for x in node[key]]
                return None if None in sizes else max(sizes)
        if "enum" in node or "const" in node:
            values = node.get("enum", [node.get("const")])
            return 2 + max(len(json.dumps(v)) for v in values) // 2
        kind = node.get("type")
        if kind == "string":
            return 2 + node["maxLength"] // 2 if "maxLength" in node else None
        if kind in ("integer", "number", "boolean", "null"):
            return 6
        if kind == "array":
            item = size(node.get("items", {}), depth + 1)
            return None if item is None or "maxItems" not in node else 2 + node["maxItems"] * (item + 1)
        if kind == "object" or "properties" in node:
            total = 2
            for name, prop in node.get("properties", {}).items():
                n = size(prop, depth + 1)
                if n is None:
                    return None
                total += n + 3 + len(name) // 3
            return total
        return None

    return size(schema)


def embedded_max_tokens(member: Member, schema: dict) -> int | None:
    """The member's max_tokens, lowered to what the (bounded) schema can need plus a margin."""
    bound = schema_token_bound(bounded_schema(schema))
    if bound is None:
        return member.max_tokens
    sized = bound + 16
    return sized if member.max_tokens is None else min(member.max_tokens, sized)


def response_format(member: Member, output_model: type[BaseModel], schema: dict) -> dict | None:
    if (member.model, member.api_base) in _no_schema_support:
        return None
    if member.is_embedded and member.structured_output == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": schema_name(output_model), "schema": bounded_schema(schema), "strict": False},
        }
    if member.structured_output == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": schema_name(output_model), "schema": schema, "strict": False},
        }
    if member.structured_output == "json_object":
        return {"type": "json_object"}
    return None


def resolve_api_base(member: Member) -> str | None:
    if member.is_embedded:
        # lazy: the embedded server's native library, only for the embedded model
        from resources.llm.embedded import embedded_base_url

        return embedded_base_url()
    return member.api_base


OPENAI_COMPATIBLE_PREFIXES = ("openai/", "hosted_vllm/")
TRANSPORT_ENV = "QUANDARY_LLM_TRANSPORT"  # "litellm": every member through litellm (a way back)


def uses_direct_http(member: Member) -> bool:
    """Whether the member's requests skip litellm: an OpenAI-compatible server at a known
    ``api_base`` (vLLM, llama.cpp, the embedded server), unless the member sets
    ``transport: litellm`` or ``$QUANDARY_LLM_TRANSPORT`` is ``litellm``. ``openai/<model>`` without
    ``api_base`` (the OpenAI API itself) and every other provider keep litellm's translation."""
    return (
        member.transport == "auto"
        and member.api_base is not None
        and member.model.startswith(OPENAI_COMPATIBLE_PREFIXES)
        and os.environ.get(TRANSPORT_ENV, "auto") != "litellm"
    )


def _api_key(member: Member, api_base: str | None) -> str | None:
    if member.api_key_env:
        check_key_env(member.api_key_env)  # also for a Member built in code (issue 23 item 7)
        return os.environ.get(member.api_key_env)
    if api_base and member.is_local:
        return "sk-no-key"  # OpenAI-compatible local servers want some key; avoid env lookups
    return None


# --- errors and retries --------------------------------------------------------------------


def is_retryable(exc: BaseException) -> bool:
    """429, 5xx, timeouts, refused/reset connections: transient. 4xx (bad request, auth): not."""
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError, ConnectionError, *openai_http.RETRYABLE)):
        return True
    if isinstance(exc, openai_http.HTTPStatusError):
        return exc.status_code in (408, 429) or exc.status_code >= 500
    litellm = litellm_module()
    retryable_types = (
        litellm.RateLimitError,
        litellm.Timeout,
        litellm.APIConnectionError,
        litellm.InternalServerError,
        litellm.ServiceUnavailableError,
        litellm.BadGatewayError,
    )
    if isinstance(exc, retryable_types):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status == 429 or status == 408 or status >= 500)


def _rejects_response_format(exc: BaseException) -> bool:
    status = getattr(exc, "status_code", None)
    text = str(exc).lower()
    return status in (400, 422) and any(w in text for w in ("response_format", "json_schema", "structured"))


RETRY_AFTER_MAX_S = 120.0  # a Retry-After beyond this is taken as this (the run still ends)


def retry_after_s(exc: BaseException) -> float | None:
    """The seconds a ``Retry-After`` header of the failed response asks for (delta-seconds or an
    HTTP-date), or ``None``."""

    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        headers = (
            getattr(exc, "litellm_response_headers", None)
            or getattr(exc, "headers", None)
            or getattr(getattr(exc, "response", None), "headers", None)
        )
        value = headers.get("retry-after") if headers is not None and hasattr(headers, "get") else None
        if value:
            value = str(value).strip()
            try:
                seconds = float(value)
            except ValueError:
                try:
                    seconds = parsedate_to_datetime(value).timestamp() - time.time()
                except (TypeError, ValueError, OverflowError):
                    return None
            return max(0.0, seconds) if seconds == seconds else None
        exc = exc.__cause__ or exc.__context__
    return None


def answer_byte_cap(member: Member) -> int:
    """Most bytes an answer may have: ``$QUANDARY_LLM_MAX_ANSWER_BYTES``, else 32 bytes per allowed
    token (at least 64 KiB), else 4 MiB when max_tokens is not set."""
    env = os.environ.get("QUANDARY_LLM_MAX_ANSWER_BYTES")
    if env and env.isdigit():
        return int(env)
    return max(64 << 10, 32 * member.max_tokens) if member.max_tokens else 4 << 20


def describe_error(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    msg = str(exc).strip().splitlines()[0][:500] if str(exc).strip() else ""
    return f"{name}{f' (HTTP {status})' if status else ''}: {msg}" if msg else name


def backoff_delay(member: Member, attempt: int) -> float:
    """Exponential backoff with full jitter in [0.5, 1.5) × base × 2^attempt, capped."""
    return min(member.backoff_max_s, member.backoff_base_s * (2**attempt)) * (0.5 + random.random())


_slot_gates: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore]" = weakref.WeakKeyDictionary()


def _slot_gate(member: Member):
    """Requests to the embedded server, all members together, are limited to its slots: a request
    beyond them would wait in the server's queue with its deadline running (#24 item 1)."""
    if not member.is_embedded:
        return contextlib.nullcontext()
    # lazy: the embedded server's native library, only for the embedded model
    from resources.llm.embedded import server_slots

    loop = asyncio.get_running_loop()
    gate = _slot_gates.get(loop)
    if gate is None:
        gate = _slot_gates[loop] = asyncio.Semaphore(server_slots())
    return gate


class StalledStream(TimeoutError):
    """A streamed reply stopped making progress: no token for the member's stall deadline."""


@dataclass
class _Reply:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    response: Any = None  # litellm's full response when not streamed (for its cost)


async def _request(member: Member, kwargs: dict) -> _Reply:
    """One attempt. Not streamed: one wall-time ``timeout_s``. Streamed (``member.stall_deadline_s``):
    ``timeout_s`` until the first token, then fail only when no token arrives for the stall deadline,
    so a slow but progressing server (a busy machine) is waited for however long the answer takes."""
    if uses_direct_http(member):
        url = kwargs["api_base"].rstrip("/") + "/chat/completions"
        body = {k: v for k, v in kwargs.items() if k not in _NOT_IN_BODY}
        body["model"] = member.model.split("/", 1)[1]  # the served model's name, as litellm sends it
        if member.stall_deadline_s is None:
            text, prompt_tokens, completion_tokens = await openai_http.complete(
                url, kwargs["api_key"], body, timeout_s=member.timeout_s, answer_cap=answer_byte_cap(member)
            )
            return _Reply(text, prompt_tokens, completion_tokens)
        return await _read_stream(openai_http.stream(url, kwargs["api_key"], body), member)
    litellm = litellm_module()
    if "response_format" in kwargs:  # its schema is the shared output_schema(): litellm must not edit it
        kwargs = {**kwargs, "response_format": copy.deepcopy(kwargs["response_format"])}
    if member.stall_deadline_s is None:
        # asyncio's own timeout guards against a client that ignores ``timeout``.
        async with asyncio.timeout(member.timeout_s + 0.5):
            resp = await litellm.acompletion(**kwargs)
        choice = resp.choices[0] if getattr(resp, "choices", None) else None
        usage = getattr(resp, "usage", None)
        return _Reply(
            getattr(getattr(choice, "message", None), "content", None) or "",
            int(getattr(usage, "prompt_tokens", 0) or 0),
            int(getattr(usage, "completion_tokens", 0) or 0),
            resp,
        )
    async with asyncio.timeout(member.timeout_s + 0.5):
        stream = await litellm.acompletion(**kwargs, stream=True, stream_options={"include_usage": True})
    try:
        return await _read_stream(_litellm_deltas(stream), member)
    except openai_http.AnswerTooLarge:
        if hasattr(stream, "aclose"):  # hang up on a server ignoring max_tokens
            with contextlib.suppress(Exception):
                async with asyncio.timeout(1.0):
                    await stream.aclose()
        raise


_NOT_IN_BODY = ("api_base", "api_key", "timeout", "num_retries", "max_retries")  # litellm's own arguments


async def _litellm_deltas(stream):
    """litellm's stream chunks as ``(content, (prompt_tokens, completion_tokens) | None)``."""
    async for chunk in stream:
        choices = getattr(chunk, "choices", None) or []
        delta = getattr(choices[0], "delta", None) if choices else None
        usage = getattr(chunk, "usage", None)
        yield (
            getattr(delta, "content", None),
            None
            if usage is None
            else (int(getattr(usage, "prompt_tokens", 0) or 0), int(getattr(usage, "completion_tokens", 0) or 0)),
        )


async def _read_stream(deltas, member: Member) -> _Reply:
    """Read a streamed answer: the first event within ``timeout_s``, every next one within the stall
    deadline; past the answer-size cap stop reading (:class:`openai_http.AnswerTooLarge`)."""
    parts: list[str] = []
    prompt_tokens = completion_tokens = n = size = 0
    cap = answer_byte_cap(member)
    try:
        while True:
            limit = member.timeout_s if n == 0 else member.stall_deadline_s
            try:
                async with asyncio.timeout(limit + 0.5):
                    content, usage = await anext(deltas)
            except StopAsyncIteration:
                break
            except TimeoutError:
                raise StalledStream(f"no token for {limit:g} s (after {n} streamed chunks)") from None
            n += 1
            if content:
                parts.append(content)
                size += len(content.encode("utf-8", "replace"))
                if size > cap:
                    raise openai_http.AnswerTooLarge(size, partial=True)
            if usage is not None:
                prompt_tokens = usage[0] or prompt_tokens
                completion_tokens = usage[1] or completion_tokens
    finally:
        with contextlib.suppress(Exception):  # the direct stream hangs up when closed early
            async with asyncio.timeout(1.0):
                await deltas.aclose()
    return _Reply("".join(parts), prompt_tokens, completion_tokens or len(parts))


def _refuse_oversize(
    out: _Completion, member: Member, size: int, api_base: str | None, partial: bool = False
) -> _Completion:
    """A server ignoring max_tokens: refuse the answer, never cache or log it whole."""
    cap = answer_byte_cap(member)
    out.failure = CallFailure(
        FailureClass.OVERSIZE_ANSWER,
        None,
        f"{'over ' if partial else ''}{size} bytes for max_tokens {member.max_tokens} (cap {cap} bytes)",
    )
    out.error = describe(out.failure, member.name, api_base)
    out.text = None
    return out


async def _complete(member: Member, kwargs: dict) -> _Completion:
    out = _Completion()
    for attempt in range(member.max_retries + 1):
        out.attempts += 1
        try:
            async with _slot_gate(member):
                reply = await _request(member, kwargs)
        except openai_http.AnswerTooLarge as exc:
            return _refuse_oversize(out, member, exc.size, kwargs.get("api_base"), exc.partial)
        except Exception as exc:  # noqa: BLE001 - classify everything, raise nothing
            # Say what really happened (no "HTTP 500" when no server answered), who and where.
            out.failure = classify_exception(exc)
            out.error = describe(out.failure, member.name, kwargs.get("api_base"))
            if kwargs.get("response_format") and _rejects_response_format(exc):
                # The server cannot do JSON-schema output: ask via the prompt from now on.
                _no_schema_support.add((member.model, member.api_base))
                fmt = kwargs.pop("response_format")
                schema = (fmt.get("json_schema") or {}).get("schema")
                if schema:
                    kwargs["messages"] = with_schema_prompt(kwargs["messages"], schema)
                continue
            if attempt < member.max_retries and is_retryable(exc):
                delay = backoff_delay(member, attempt)
                wait = retry_after_s(exc)
                if wait is not None:  # the server said how long (issue 23 item 9)
                    delay = max(delay, min(wait, RETRY_AFTER_MAX_S))
                await asyncio.sleep(delay)
                continue
            return out
        out.error = None
        out.failure = None
        size = len(reply.text.encode("utf-8", "replace"))
        if size > answer_byte_cap(member):
            return _refuse_oversize(out, member, size, kwargs.get("api_base"))
        out.text = reply.text
        out.prompt_tokens += reply.prompt_tokens
        out.completion_tokens += reply.completion_tokens
        out.cost += 0.0 if member.is_local else _cost(member, reply)
        return out
    return out


_token_prices: dict[str, tuple[float, float]] = {}


def _cost(member: Member, reply: _Reply) -> float:
    """litellm's price of the answer: of its full response when it has one, else from the tokens
    and the model's price per token (looked up once per model); 0 for an unknown model."""
    litellm = litellm_module()
    try:
        if reply.response is not None:
            return float(litellm.completion_cost(completion_response=reply.response) or 0.0)
        price = _token_prices.get(member.model)
        if price is None:
            try:
                info = litellm.get_model_info(member.model)
                price = (
                    float(info.get("input_cost_per_token") or 0.0),
                    float(info.get("output_cost_per_token") or 0.0),
                )
            except Exception:  # noqa: BLE001 - not in litellm's price list (a self-hosted model)
                price = (0.0, 0.0)
            _token_prices[member.model] = price
        return reply.prompt_tokens * price[0] + reply.completion_tokens * price[1]
    except Exception:  # unknown model price: record 0 rather than fail the call
        return 0.0


# --- the structured call -------------------------------------------------------------------


def request_key(member: Member, messages: list[dict], output_model: type[BaseModel]) -> str:
    """The cache key of a structured call: model, messages, sampling params, output schema."""
    params = {**member.sampling_params(), "structured_output": member.structured_output}
    return call_key(member.model, messages, params, output_schema(output_model))


async def call_structured(
    member: Member,
    messages: list[dict],
    output_model: type[T],
    *,
    log: CallLogRules | None,
    tag: dict | None = None,
    use_cache: bool = True,
    key: str | None = None,
    slot: asyncio.Semaphore | None = None,
) -> CallResult[T]:
    """One structured call through cache, retries, parsing and repair. Never raises. ``key``: the
    caller's :func:`request_key` of this call, if it has one (saves computing it again). ``slot``:
    the member's in-flight limit, held from the cache lookup to the end of each HTTP exchange (not
    while the answer is parsed and logged, so the next request goes out meanwhile)."""
    tag = dict(tag or {})
    try:
        schema = output_schema(output_model)
        key = key or request_key(member, messages, output_model)
        async with _Slot(slot) as held:
            if log is not None and use_cache:
                # one hop to the log's thread for the lookup and the claim (each hop costs the loop)
                hit = await run_in_log_thread(log, _lookup_or_claim, log, key, member)
                if hit != "claimed":
                    hit = hit or await _single_flight(log, key, member)
                    if hit is not None:
                        return _from_record(hit, output_model, member.name, tag)
                try:
                    return await _call_uncached(member, messages, output_model, schema, key, log, tag, held)
                except BaseException:
                    try:  # cancelled: let another process take the call (sync: no await while cancelling)
                        log.release(key)
                    except Exception:  # noqa: BLE001 - a stale claim is taken over anyway
                        pass
                    raise
            return await _call_uncached(member, messages, output_model, schema, key, log, tag, held)
    except Exception as exc:  # noqa: BLE001 - a stage must get a result, not a traceback
        failure = classify_exception(exc)
        if failure.kind in STORAGE_CLASSES and log is not None:
            if str(log.path) not in failure.detail:
                failure = CallFailure(failure.kind, None, f"call log {log.path}: {failure.detail}")
        elif failure.kind not in STORAGE_CLASSES:
            failure = CallFailure(FailureClass.INTERNAL, None, describe_error(exc))
        return CallResult(
            key or "?",
            member.name,
            False,
            None,
            None,
            describe(failure, member.name),
            "call_failed",
            tag=tag,
            failure=failure.kind.value,
        )


class _Slot:
    """A member's in-flight slot that the call can give back early and take again (a repair call)."""

    def __init__(self, sem: asyncio.Semaphore | None):
        self.sem, self.held = sem, False

    async def acquire(self) -> "_Slot":
        if self.sem is not None and not self.held:
            await self.sem.acquire()
            self.held = True
        return self

    def release(self) -> None:
        if self.held:
            self.held = False
            self.sem.release()

    async def __aenter__(self) -> "_Slot":
        return await self.acquire()

    async def __aexit__(self, *exc) -> None:
        self.release()


def _lookup_or_claim(log, key: str, member: Member):
    """The cached record of ``key``, else ``"claimed"`` when this process may send it, else ``None``
    (another owner is on it: :func:`_single_flight` waits)."""
    hit = log.lookup(key)
    if hit is not None:
        return hit
    state = log.claim(key, member.name, member.model, _stale_after(member))
    return "claimed" if state == "claimed" else None


def _stale_after(member: Member) -> float:
    return member.timeout_s * (member.max_retries + 2) + 30.0


async def _single_flight(log: CallLogRules, key: str, member: Member):
    """Claim ``key`` across processes and machines; while another owner's lease lives, poll for its
    answer. Returns that answer's record, or ``None`` once this process owns the call (the key was
    free, or the owner's lease lapsed: it died or stopped renewing)."""
    stale_after = _stale_after(member)
    delay = 0.02
    while True:
        state = await run_in_log_thread(log, log.claim, key, member.name, member.model, stale_after)
        if state == "claimed":
            return None
        if state == "cached":
            hit = await run_in_log_thread(log, log.lookup, key)
            if hit is not None:
                return hit
        await asyncio.sleep(delay)  # another process is sending this very request
        delay = min(1.0, delay * 1.5)


async def _call_uncached(member, messages, output_model, schema, key, log, tag, slot: _Slot) -> CallResult:
    api_base = resolve_api_base(member)  # may start the embedded server: not part of the latency
    if member.is_local and not uses_direct_http(member):
        register_zero_cost(litellm_module(), member.model)
    t0 = time.perf_counter()
    kwargs: dict[str, Any] = dict(
        model=member.model,
        messages=build_messages(member, messages, schema),
        api_base=api_base,
        api_key=_api_key(member, api_base),
        timeout=member.timeout_s,
        num_retries=0,  # retries are ours (counted, logged, with jitter)
        max_retries=0,  # ... and not the OpenAI SDK's
        **member.sampling_params(),
    )
    fmt = response_format(member, output_model, schema)
    if fmt is not None:
        kwargs["response_format"] = fmt
    if member.is_embedded and fmt is not None and kwargs.get("max_tokens") is not None:
        kwargs["max_tokens"] = embedded_max_tokens(member, schema)  # sized to the schema (#24 item 1)
    handle = progress.call_started()  # the open step's heartbeat shows calls in flight (#24 item 7)
    try:
        first = await _complete(member, kwargs)
    finally:
        progress.call_finished(handle)
        slot.release()
    total = _Completion(
        prompt_tokens=first.prompt_tokens,
        completion_tokens=first.completion_tokens,
        cost=first.cost,
        attempts=first.attempts,
    )
    raw, first_raw, repaired, parsed, error = first.text, None, False, None, first.error
    status = "call_failed" if first.error is not None else "parse_failed"
    failure = first.failure.kind.value if first.failure is not None else FailureClass.UNPARSEABLE.value
    if first.error is None:
        result = parse_structured(first.text, output_model)
        if result.ok:
            status, parsed, error, failure = "ok", result.value, None, None
        else:
            error = f"unparseable output: {result.error}"
            if member.repair:
                repair_kwargs = dict(
                    kwargs, messages=kwargs["messages"] + _repair_messages(first.text, result.error, schema)
                )
                async with await slot.acquire():
                    second = await _complete(member, repair_kwargs)
                total.prompt_tokens += second.prompt_tokens
                total.completion_tokens += second.completion_tokens
                total.cost += second.cost
                total.attempts += second.attempts
                if second.error is None:
                    first_raw, raw, repaired = first.text, second.text, True
                    failure = FailureClass.UNPARSEABLE.value
                    result2 = parse_structured(second.text, output_model)
                    if result2.ok:
                        status, parsed, error, failure = "ok", result2.value, None, None
                    else:
                        error = f"unparseable output after repair: {result2.error} (first: {result.error})"
                else:
                    error = f"unparseable output: {result.error}; repair call failed: {second.error}"
    # what the caller's result and the log record both carry
    shared = dict(
        call_id=key,
        status=status,
        error=error,
        prompt_tokens=total.prompt_tokens,
        completion_tokens=total.completion_tokens,
        latency_ms=(time.perf_counter() - t0) * 1000,
        cost=total.cost,
        attempts=total.attempts,
        repaired=repaired,
        tag=tag,
    )
    res = CallResult(
        member=member.name, ok=status == "ok", parsed=parsed, raw_text=raw, cached=False, failure=failure, **shared
    )
    if log is not None:
        rec = CallRecord(
            member=member.name,
            model=member.model,
            api_base=api_base,
            schema_name=schema_name(output_model),
            request={k: v for k, v in kwargs.items() if k not in ("api_key", "api_base")},
            raw_response=raw,
            first_raw_response=first_raw,
            parsed=parsed.model_dump(mode="json") if parsed is not None else None,
            **shared,
        )
        try:
            await run_in_log_thread(log, log.record, rec)
        except Exception as exc:  # noqa: BLE001 - the answer is still good; say the log failed
            res = dataclasses.replace(res, error=(res.error or "") + f" [log write failed: {describe_error(exc)}]")
            if not res.ok:
                kind = classify_exception(exc).kind
                kind = kind if kind in STORAGE_CLASSES else FailureClass.STORAGE_IO
                res = dataclasses.replace(
                    res,
                    failure=kind.value,
                    error=describe(CallFailure(kind, None, f"call log {log.path}: {describe_error(exc)}"), member.name),
                )
    return res


def _repair_messages(raw: str | None, error: str | None, schema: dict) -> list[dict]:
    return [
        {"role": "assistant", "content": raw if raw and raw.strip() else "(empty reply)"},
        {"role": "user", "content": f"That reply could not be used ({error}). " + schema_prompt(schema)},
    ]


def _from_record(rec: CallRecord, output_model: type[T], member_name: str, tag: dict) -> CallResult[T]:
    parsed = None
    ok = rec.status == "ok"
    error = rec.error
    if ok:
        try:
            parsed = output_model.model_validate(rec.parsed)
        except Exception as exc:  # noqa: BLE001 - e.g. a validator changed without a schema change
            ok, error = False, f"cached output no longer validates: {describe_error(exc)}"
    return CallResult(
        call_id=rec.call_id,
        member=member_name,
        ok=ok,
        parsed=parsed,
        raw_text=rec.raw_response,
        error=error,
        status=rec.status if ok or rec.status != "ok" else "parse_failed",
        cached=True,
        prompt_tokens=0,
        completion_tokens=0,
        latency_ms=0.0,
        cost=0.0,  # a hit spends nothing
        attempts=0,
        repaired=rec.repaired,
        tag=tag,
        failure=None if ok else classify_text(error, "parse_failed" if rec.status == "ok" else rec.status).value,
    )
