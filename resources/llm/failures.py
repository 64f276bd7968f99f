"""Why an LLM call failed, and what the user should do about it (issue #13 item 4, issue #8 item 4).

``classify_exception(exc)`` walks the exception chain (litellm wraps a refused connection as
``InternalServerError (HTTP 500)`` although no server answered) and returns a :class:`Failure`:
its class, the real HTTP status if a server answered, and a short detail. ``describe`` renders the
one-line error kept in the call log, naming the member and its ``api_base``. ``FailureTally``
aggregates a step's results into the message a failed step raises, with the right remedy.
"""

import asyncio
import socket
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum


class FailureClass(str, Enum):
    UNREACHABLE = "unreachable"  # no HTTP answer: refused, reset, unknown host
    TIMEOUT = "timeout"
    RATE_LIMITED = "rate_limited"  # HTTP 429
    SERVER_ERROR = "server_error"  # HTTP 5xx from a server that answered
    CONTEXT_TOO_LONG = "context_too_long"  # HTTP 400: prompt larger than the context window
    REJECTED = "rejected"  # other HTTP 4xx: bad model name / parameters
    AUTH = "auth"  # HTTP 401 / 403
    STORAGE = "storage"  # the local call log is damaged or unwritable
    UNPARSEABLE = "unparseable"  # the model answered, but not in the expected format
    INTERNAL = "internal"


LABELS = {
    FailureClass.UNREACHABLE: "provider unreachable",
    FailureClass.TIMEOUT: "provider timeout",
    FailureClass.RATE_LIMITED: "rate limited",
    FailureClass.SERVER_ERROR: "server error",
    FailureClass.CONTEXT_TOO_LONG: "context too long",
    FailureClass.REJECTED: "request rejected",
    FailureClass.AUTH: "authentication failed",
    FailureClass.STORAGE: "local storage error",
    FailureClass.UNPARSEABLE: "unparseable output",
    FailureClass.INTERNAL: "internal error",
}

REMEDIES = {
    FailureClass.UNREACHABLE: "nothing answered at the api_base: start the server or fix api_base in the council "
                              "file, then rerun (completed calls are cached)",
    FailureClass.TIMEOUT: "the provider did not answer within the member's timeout_s (or stopped streaming for "
                          "stall_timeout_s): raise them or lower max_in_flight, then rerun (completed calls are cached)",
    FailureClass.RATE_LIMITED: "the provider is rate limiting: lower max_in_flight or raise max_retries / "
                               "backoff_max_s for the member, then rerun (completed calls are cached)",
    FailureClass.SERVER_ERROR: "the server answered with an error: check its logs and rerun once it is healthy "
                               "(completed calls are cached)",
    FailureClass.CONTEXT_TOO_LONG: "the prompt does not fit the model's context window: set the member's "
                                   "context_tokens to its real window (the schema context is then fitted to it) "
                                   "or use a model with a larger window; rerunning unchanged fails again",
    FailureClass.REJECTED: "the provider refused the request as invalid: check the member's model name and "
                           "parameters in the council file; rerunning unchanged fails again",
    FailureClass.AUTH: "the provider refused the credentials: set the environment variable named by the member's "
                       "api_key_env, then rerun",
    FailureClass.STORAGE: "the local call log is damaged: move the file away (its cached answers are lost) or "
                          "restore it, then rerun; waiting for the provider will not help",
    FailureClass.UNPARSEABLE: "the model answers, but not in the expected JSON format: check the member's model, "
                              "structured_output and prompt; unparseable answers are not cached, so a rerun "
                              "asks again",
    FailureClass.INTERNAL: "an unexpected error inside Quandary: rerun with --verbose and report it",
}


@dataclass(frozen=True)
class Failure:
    kind: FailureClass
    status: int | None = None
    detail: str = ""

    def label(self) -> str:
        base = LABELS[self.kind]
        return f"{base} (HTTP {self.status})" if self.status else base


def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _first_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text[:limit]


def classify_exception(exc: BaseException) -> Failure:
    chain = list(_chain(exc))
    names = {type(e).__name__ for e in chain}
    for e in chain:  # transport failures first: they trump the status litellm invents for them
        if isinstance(e, ConnectionRefusedError):
            return Failure(FailureClass.UNREACHABLE, None, "connection refused")
        if isinstance(e, socket.gaierror):
            return Failure(FailureClass.UNREACHABLE, None, f"host not found ({e.strerror or e})")
        if isinstance(e, ConnectionResetError) or type(e).__name__ in ("RemoteProtocolError", "ServerDisconnectedError"):
            return Failure(FailureClass.UNREACHABLE, None, "connection reset before any HTTP answer")
        if isinstance(e, ConnectionError):
            return Failure(FailureClass.UNREACHABLE, None, _first_line(e))
    for e in chain:
        if isinstance(e, sqlite3.Error):
            return Failure(FailureClass.STORAGE, None, f"{type(e).__name__}: {_first_line(e)}")
    if names & {"Timeout", "APITimeoutError", "TimeoutError", "TimeoutException", "ReadTimeout", "ConnectTimeout"} or \
            any(isinstance(e, (asyncio.TimeoutError, TimeoutError)) for e in chain):
        stalled = next((str(e) for e in chain if isinstance(e, TimeoutError) and str(e).startswith("no token")), None)
        return Failure(FailureClass.TIMEOUT, None, stalled or "no answer within the timeout")
    if names & {"APIConnectionError", "ConnectError", "ClientConnectorError"}:
        return Failure(FailureClass.UNREACHABLE, None, "cannot connect (no HTTP answer)")
    status = next((s for s in (getattr(e, "status_code", None) for e in chain) if isinstance(s, int)), None)
    text = _first_line(exc)
    low = text.lower()
    if "ContextWindowExceededError" in names or (status in (400, 413, 422) and any(
            w in low for w in ("context length", "context window", "maximum context", "too many tokens",
                               "exceeds the context", "prompt is too long", "context_length_exceeded"))):
        return Failure(FailureClass.CONTEXT_TOO_LONG, status or 400, _server_message(text))
    if status == 429:
        return Failure(FailureClass.RATE_LIMITED, 429, _server_message(text))
    if status in (401, 403):
        return Failure(FailureClass.AUTH, status, _server_message(text))
    if status == 408:
        return Failure(FailureClass.TIMEOUT, 408, _server_message(text))
    if isinstance(status, int) and status >= 500:
        return Failure(FailureClass.SERVER_ERROR, status, _server_message(text))
    if isinstance(status, int) and 400 <= status < 500:
        return Failure(FailureClass.REJECTED, status, _server_message(text))
    if isinstance(exc, OSError):
        return Failure(FailureClass.STORAGE, None, f"{type(exc).__name__}: {text}")
    return Failure(FailureClass.INTERNAL, status, f"{type(exc).__name__}: {text}")


def _server_message(text: str) -> str:
    # litellm prefixes "litellm.X: X: OpenAIException - <server message>": keep the server's words
    return text.split(" - ", 1)[1] if " - " in text else text


def describe(failure: Failure, member: str | None = None, api_base: str | None = None) -> str:
    """The one-line error of a failed call: class, real status, detail, member and endpoint."""
    where = ", ".join(x for x in (f"member {member}" if member else "", f"api_base {api_base}" if api_base else "") if x)
    return f"{failure.label()}: {failure.detail}" + (f" ({where})" if where else "")


def classify_text(error: str | None, status: str | None = None) -> FailureClass:
    """The class of a logged error line (what :func:`describe` wrote); for cached records."""
    if status == "parse_failed":
        return FailureClass.UNPARSEABLE
    text = (error or "").strip().lower()
    for kind, label in LABELS.items():
        if text.startswith(label):
            return kind
    return FailureClass.INTERNAL


@dataclass
class FailureTally:
    """Counts a step's call outcomes by failure class, keeping one example line per class."""

    calls: int = 0
    counts: Counter = field(default_factory=Counter)
    examples: dict = field(default_factory=dict)

    def add(self, result) -> None:
        self.calls += 1
        if result.ok:
            return
        kind = FailureClass(result.failure) if getattr(result, "failure", None) else classify_text(
            result.error, result.status)
        self.counts[kind] += 1
        self.examples.setdefault(kind, result.error or LABELS[kind])

    @property
    def transport_failures(self) -> int:
        return sum(n for k, n in self.counts.items() if k is not FailureClass.UNPARSEABLE)

    @property
    def unparseable(self) -> int:
        return self.counts.get(FailureClass.UNPARSEABLE, 0)

    def message(self, step: str, *, transport: bool = True) -> str:
        """``<step>: F of N calls failed — <class>: <example>. <remedy>`` (the main class first)."""
        kinds = [k for k, _ in self.counts.most_common()
                 if (k is not FailureClass.UNPARSEABLE) == transport]
        if not kinds:
            return f"{step}: no failures"
        main = kinds[0]
        n = sum(self.counts[k] for k in kinds)
        what = "calls failed" if transport else "answers were unparseable"
        others = "; ".join(f"{self.counts[k]} {LABELS[k]}" for k in kinds[1:])
        return (f"{step}: {n} of {self.calls} LLM {what} — {self.examples[main]}"
                + (f" (also: {others})" if others else "") + f". What to do: {REMEDIES[main]}.")
