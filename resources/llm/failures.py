"""Why an LLM call failed, and what the user should do about it (issue #13 item 4, issue #8 item 4).

``classify_exception(exc)`` walks the exception chain (litellm wraps a refused connection as
``InternalServerError (HTTP 500)`` although no server answered) and returns a :class:`CallFailure`:
its class, the real HTTP status if a server answered, and a short detail. ``describe`` renders the
one-line error kept in the call log, naming the member and its ``api_base``. ``FailureTally``
aggregates a step's results into the message a failed step raises, with the right remedy.

:class:`ProviderUnavailable` is the one exception every paper raises when its LLM provider cannot
serve a step (ABISS generation and cascade stages, the interaction benchmark, AmbiTab's asker,
oracle and solver, the AI-SQL judges): the Dagster layer turns it into a retryable failure.
:meth:`FailureTally.check` raises it when too many of a step's calls failed or were unparseable.
"""

import asyncio
import json
import socket
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from storage import faults


class FailureClass(str, Enum):
    UNREACHABLE = "unreachable"  # no HTTP answer: refused, reset, unknown host
    TIMEOUT = "timeout"
    RATE_LIMITED = "rate_limited"  # HTTP 429
    SERVER_ERROR = "server_error"  # HTTP 5xx from a server that answered
    CONTEXT_TOO_LONG = "context_too_long"  # HTTP 400: prompt larger than the context window
    REJECTED = "rejected"  # other HTTP 4xx: bad model name / parameters
    AUTH = "auth"  # HTTP 401 / 403
    STORAGE = "storage"  # the local call log is damaged
    STORAGE_FULL = "storage_full"  # no space left for the call log (ENOSPC)
    STORAGE_READ_ONLY = "storage_read_only"  # the call log's folder is read-only (EROFS)
    STORAGE_PERMISSION = "storage_permission"  # no permission to write the call log (EACCES)
    STORAGE_IO = "storage_io"  # an I/O error on the call log, not known to be damage
    UNPARSEABLE = "unparseable"  # the model answered, but not in the expected format
    MALFORMED_ANSWER = "malformed_answer"  # HTTP 200 whose body is not a chat completion (not JSON, no choices)
    TRUNCATED_ANSWER = "truncated_answer"  # the body was cut off before its announced end
    OVERSIZE_ANSWER = "oversize_answer"  # more bytes than max_tokens can explain (a server ignoring it)
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
    FailureClass.STORAGE_FULL: "local storage full",
    FailureClass.STORAGE_READ_ONLY: "local storage read-only",
    FailureClass.STORAGE_PERMISSION: "local storage permission denied",
    FailureClass.STORAGE_IO: "local storage I/O error",
    FailureClass.UNPARSEABLE: "unparseable output",
    FailureClass.MALFORMED_ANSWER: "malformed answer (HTTP 200)",
    FailureClass.TRUNCATED_ANSWER: "truncated answer",
    FailureClass.OVERSIZE_ANSWER: "answer too large",
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
    FailureClass.STORAGE_FULL: "the disk of the call log is full: free space (or point QUANDARY_HOME at another "
    "disk), then rerun; the call log is intact — keep it (answers already received "
    "are kept and not requested again); waiting for the provider will not help",
    FailureClass.STORAGE_READ_ONLY: "the call log's folder is on a read-only file system: remount it writable or "
    "point QUANDARY_HOME at a writable folder, then rerun; the call log is intact "
    "— keep it",
    FailureClass.STORAGE_PERMISSION: "this user may not write the call log: fix the permissions of the file and "
    "its folder (or point QUANDARY_HOME at a folder you own), then rerun; the "
    "call log is intact — keep it",
    FailureClass.STORAGE_IO: "the disk of the call log reported an I/O error: check the disk, then rerun; the "
    "call log is not known to be damaged — keep it",
    FailureClass.UNPARSEABLE: "the model answers, but not in the expected JSON format: check the member's model, "
    "structured_output and prompt; unparseable answers are not cached, so a rerun "
    "asks again",
    FailureClass.MALFORMED_ANSWER: "the endpoint answered HTTP 200 with a body that is not an OpenAI chat "
    "completion: check that api_base points at the model server itself (not a proxy "
    "or web page) and its logs, then rerun (completed calls are cached)",
    FailureClass.TRUNCATED_ANSWER: "the server (or a proxy) closed the connection in the middle of its answer: "
    "check its logs and any proxy timeouts, then rerun (completed calls are cached)",
    FailureClass.OVERSIZE_ANSWER: "the server sent far more than max_tokens allows (it ignores max_tokens): fix "
    "the server or the member's model; such answers are not cached, raise "
    "QUANDARY_LLM_MAX_ANSWER_BYTES only if they are legitimate",
    FailureClass.INTERNAL: "an unexpected error inside Quandary: rerun with --verbose and report it",
}


# storage.faults cause -> failure class (issue 23 item 4: disk full is not a damaged call log)
STORAGE_BY_CAUSE = {
    faults.CORRUPT: FailureClass.STORAGE,
    faults.NO_SPACE: FailureClass.STORAGE_FULL,
    faults.READ_ONLY: FailureClass.STORAGE_READ_ONLY,
    faults.PERMISSION: FailureClass.STORAGE_PERMISSION,
    faults.IO: FailureClass.STORAGE_IO,
}
STORAGE_CLASSES = frozenset(STORAGE_BY_CAUSE.values())


class ProviderUnavailable(RuntimeError):
    """The LLM provider cannot serve a step: too many calls failed (provider down, prompt too long,
    damaged call log ...) or were unparseable, or a role's single call failed. The step fails and can
    be re-executed (completed calls are cached); the message says which failure it was and what to do."""


@dataclass(frozen=True)
class CallFailure:
    """Why one LLM call failed (not ``dagster.Failure``, which is a failed asset step)."""

    kind: FailureClass
    status: int | None = None
    detail: str = ""

    def label(self) -> str:
        base = LABELS[self.kind]
        return f"{base} (HTTP {self.status})" if self.status else base


def _first_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text[:limit]


def classify_exception(exc: BaseException) -> CallFailure:
    chain = list(faults.exception_chain(exc))
    names = {type(e).__name__ for e in chain}
    for e in chain:  # a body cut off mid-way is an answer that broke, not "cannot connect"
        text_e = str(e)
        if (
            type(e).__name__ in ("ContentLengthError", "ClientPayloadError", "IncompleteRead")
            or "payload is not completed" in text_e
            or "complete message body" in text_e
        ):
            return CallFailure(
                FailureClass.TRUNCATED_ANSWER, None, f"the answer was cut off before its end ({_first_line(e, 160)})"
            )
    for e in chain:  # transport failures first: they trump the status litellm invents for them
        if isinstance(e, ConnectionRefusedError):
            return CallFailure(FailureClass.UNREACHABLE, None, "connection refused")
        if isinstance(e, socket.gaierror):
            return CallFailure(FailureClass.UNREACHABLE, None, f"host not found ({e.strerror or e})")
        if isinstance(e, ConnectionResetError) or type(e).__name__ in (
            "RemoteProtocolError",
            "ServerDisconnectedError",
        ):
            return CallFailure(FailureClass.UNREACHABLE, None, "connection reset before any HTTP answer")
        if isinstance(e, ConnectionError):
            return CallFailure(FailureClass.UNREACHABLE, None, _first_line(e))
    for e in chain:  # litellm calls these "HTTP 500", but the server said 200
        if isinstance(e, json.JSONDecodeError):
            return CallFailure(FailureClass.MALFORMED_ANSWER, None, f"the body is not JSON ({_first_line(e, 120)})")
        if "no 'choices'" in str(e) or 'no "choices"' in str(e):
            return CallFailure(FailureClass.MALFORMED_ANSWER, None, "the body has no choices (not a chat completion)")
    for e in chain:
        if isinstance(e, (sqlite3.Error, faults.StorageError)):
            kind = STORAGE_BY_CAUSE.get(faults.storage_cause(e, getattr(e, "path", None)), FailureClass.STORAGE)
            return CallFailure(kind, None, f"{type(e).__name__}: {_first_line(e)}")
    if names & {
        "Timeout",
        "APITimeoutError",
        "TimeoutError",
        "TimeoutException",
        "ReadTimeout",
        "ConnectTimeout",
    } or any(isinstance(e, (asyncio.TimeoutError, TimeoutError)) for e in chain):
        stalled = next((str(e) for e in chain if isinstance(e, TimeoutError) and str(e).startswith("no token")), None)
        return CallFailure(FailureClass.TIMEOUT, None, stalled or "no answer within the timeout")
    if names & {"APIConnectionError", "ConnectError", "ClientConnectorError"}:
        return CallFailure(FailureClass.UNREACHABLE, None, "cannot connect (no HTTP answer)")
    status = next((s for s in (getattr(e, "status_code", None) for e in chain) if isinstance(s, int)), None)
    text = _first_line(exc)
    low = text.lower()
    if "ContextWindowExceededError" in names or (
        status in (400, 413, 422)
        and any(
            w in low
            for w in (
                "context length",
                "context window",
                "maximum context",
                "too many tokens",
                "exceeds the context",
                "prompt is too long",
                "context_length_exceeded",
            )
        )
    ):
        return CallFailure(FailureClass.CONTEXT_TOO_LONG, status or 400, _server_message(text))
    if status == 429:
        return CallFailure(FailureClass.RATE_LIMITED, 429, _server_message(text))
    if status in (401, 403):
        return CallFailure(FailureClass.AUTH, status, _server_message(text))
    if status == 408:
        return CallFailure(FailureClass.TIMEOUT, 408, _server_message(text))
    if isinstance(status, int) and status >= 500:
        return CallFailure(FailureClass.SERVER_ERROR, status, _server_message(text))
    if isinstance(status, int) and 400 <= status < 500:
        return CallFailure(FailureClass.REJECTED, status, _server_message(text))
    if isinstance(exc, OSError):
        kind = STORAGE_BY_CAUSE.get(faults.storage_cause(exc), FailureClass.STORAGE_IO)
        return CallFailure(kind, None, f"{type(exc).__name__}: {text}")
    return CallFailure(FailureClass.INTERNAL, status, f"{type(exc).__name__}: {text}")


def _server_message(text: str) -> str:
    # litellm prefixes "litellm.X: X: OpenAIException - <server message>": keep the server's words
    return text.split(" - ", 1)[1] if " - " in text else text


def describe(failure: CallFailure, member: str | None = None, api_base: str | None = None) -> str:
    """The one-line error of a failed call: class, real status, detail, member and endpoint."""
    where = ", ".join(
        x for x in (f"member {member}" if member else "", f"api_base {api_base}" if api_base else "") if x
    )
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
    """Counts a step's call outcomes by failure class, keeping one example line per class (the least,
    whatever order the calls finished in), and per member (so a step can name the member whose every
    answer failed or was unreadable)."""

    calls: int = 0
    counts: Counter = field(default_factory=Counter)
    examples: dict = field(default_factory=dict)
    member_calls: Counter = field(default_factory=Counter)
    member_failed: Counter = field(default_factory=Counter)  # failed calls and unreadable answers

    def add(self, result) -> None:
        self.calls += 1
        member = getattr(result, "member", None)
        if member:
            self.member_calls[member] += 1
        if result.ok:
            return
        kind = (
            FailureClass(result.failure)
            if getattr(result, "failure", None)
            else classify_text(result.error, result.status)
        )
        self.counts[kind] += 1
        if member:
            self.member_failed[member] += 1
        # the example is the least line of its class, not the first to finish: calls finish in any
        # order, and the message must read the same on every run
        line = result.error or LABELS[kind]
        if kind not in self.examples or line < self.examples[kind]:
            self.examples[kind] = line

    @property
    def transport_failures(self) -> int:
        return sum(n for k, n in self.counts.items() if k is not FailureClass.UNPARSEABLE)

    @property
    def unparseable(self) -> int:
        return self.counts.get(FailureClass.UNPARSEABLE, 0)

    def broken_members(self) -> list[str]:
        """Members none of whose calls in this step gave a readable answer, by name: calls finish in
        any order, and the message naming them must read the same on every run."""
        return sorted(m for m, n in self.member_calls.items() if n and self.member_failed[m] == n)

    def _members_note(self) -> str:
        broken = self.broken_members()
        if not broken:
            return ""
        parts = ", ".join(f"{m} ({self.member_failed[m]} of {self.member_calls[m]})" for m in broken)
        return f" Member{'s' if len(broken) > 1 else ''} with no usable answer: {parts}."

    def message(self, step: str, *, transport: bool = True, unreadable: bool = False) -> str:
        """``<step>: F of N calls failed — <class>: <example>. <remedy>`` (the main class first).
        ``unreadable``: unreadable answers count as failed calls (a council vote)."""
        # most frequent first, ties by class name: calls finish in any order, and the message must not
        # depend on it
        kinds = [
            k
            for k in sorted(self.counts, key=lambda k: (-self.counts[k], k.value))
            if unreadable or (k is not FailureClass.UNPARSEABLE) == transport
        ]
        if not kinds:
            return f"{step}: no failures"
        main = kinds[0]
        n = sum(self.counts[k] for k in kinds)
        what = (
            "calls failed or gave unreadable answers"
            if unreadable
            else "calls failed"
            if transport
            else "answers were unparseable"
        )
        others = "; ".join(f"{self.counts[k]} {LABELS[k]}" for k in kinds[1:])
        return (
            f"{step}: {n} of {self.calls} LLM {what} — {self.examples[main]}"
            + (f" (also: {others})" if others else "")
            + f".{self._members_note()} What to do: {REMEDIES[main]}."
        )

    def check(
        self, step: str, max_failed_share: float, max_unparseable_share: float, *, unreadable_fails: bool = False
    ) -> None:
        """Raise :class:`ProviderUnavailable` (classified message and remedy) when more than
        ``max_failed_share`` of the calls failed, or more than ``max_unparseable_share`` of them were
        unparseable (only from :data:`MIN_CALLS_FOR_SHARE` calls on). ``unreadable_fails`` (council
        votes): an unreadable answer is a failed call, counted against ``max_failed_share``; and a
        member none of whose answers could be used fails the step whatever the shares."""
        failed = self.transport_failures + (self.unparseable if unreadable_fails else 0)
        if self.calls and (failed / self.calls > max_failed_share or (unreadable_fails and self.broken_members())):
            raise ProviderUnavailable(
                self.message(step, unreadable=unreadable_fails)
                + _share_note(failed, self.calls, max_failed_share, "max_failed_call_share")
            )
        if self.calls >= MIN_CALLS_FOR_SHARE and self.unparseable / self.calls > max_unparseable_share:
            raise ProviderUnavailable(
                self.message(step, transport=False)
                + _share_note(self.unparseable, self.calls, max_unparseable_share, "max_unparseable_share")
            )


def _share_note(n: int, calls: int, limit: float, name: str) -> str:
    """Which tolerated share was exceeded, and by how much (#24 item 2)."""
    return f" [{n}/{calls} = {n / calls:.0%} of calls, more than {name} = {limit:g} (CascadeSettings) tolerates]"


MIN_CALLS_FOR_SHARE = 4  # below this, a few unparseable answers are ordinary abstentions
