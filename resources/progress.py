"""Progress of long work: items done / total, LLM calls made / cached / failed, elapsed, estimate.

Plain Python (no dagster import), shared by every job. Usage::

    from resources.progress import Progress

    with Progress("s03_category_conformance", total=len(rows)) as p:
        for row in rows:
            ...
            p.advance(1, calls_made=2, cached=1, failed=0)

- On a terminal (the stream is a TTY) it draws one live bar, redrawn at most every 0.2 s; otherwise
  (CI, log files, the Dagster UI's captured stdout) it prints plain lines at most every
  ``line_every_s`` seconds and always one final line, so logs stay short.
- ``sinks`` get every rendered line (throttled like plain lines) plus the final one: the Dagster
  adapter (``assets/shared/progress.py``) writes them to the run log.
- While a ``Progress`` is open (``with``), LLM calls report themselves to it: the council layer calls
  :func:`record_call` after each call, so callers that cannot count calls (a batch API) still show
  them. A call never counts an item as done (#42 item 5: stage 9 asks ~2 comparisons an item, and
  counting an item at its first call read 16 of 17 items done after a third of the stage). Items are counted done where they are finished: by the caller (``advance``) or, from code
  that does not hold the ``Progress`` (a stage deciding a candidate), by :func:`item_done`.
- ``QUANDARY_PROGRESS=0`` silences the terminal output (sinks still get their lines).
- A part of a step that counts its own items (a corpus builder's rows) uses a ``Progress`` with
  ``terminal=False`` that it never enters: its lines go to the sinks only, and the calls it makes
  still count towards the step's open progress.
- Domain code that only reports lines takes a :data:`Sink` (``context.log.info``, ``print``).
"""

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

Sink = Callable[[str], None]
"""Where progress lines go: the one callback shape domain code takes for its progress."""

_current: "list[Progress]" = []
_current_lock = threading.Lock()
_default_stream: TextIO | None = None


def set_default_stream(stream: TextIO | None) -> None:
    """Where progress goes when a Progress is given no stream (default: ``sys.stdout``). The CLI
    passes a duplicate of the terminal's stdout, because Dagster redirects fd 1 into its
    compute-log files while a step runs."""
    global _default_stream
    _default_stream = stream


def _fmt_duration(s: float) -> str:
    s = int(round(s))
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class Progress:
    """One step's progress. Thread-safe; see the module docstring for the API."""

    def __init__(
        self,
        step: str,
        total: int,
        *,
        stream: TextIO | None = None,
        sinks: tuple[Sink, ...] = (),
        line_every_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        terminal: bool = True,
    ):
        self.step = step
        self.total = max(0, int(total))
        self.done = 0
        self.calls_made = 0
        self.cached = 0
        self.failed = 0
        self._items_done: set = set()  # ids counted by item_done (a second report is not a second item)
        self._sinks = list(sinks)
        self._clock = clock
        self._start = clock()
        self._last_line = None  # when the last plain/sink line went out
        self._last_text = None
        self._last_draw = float("-inf")
        self._line_every_s = line_every_s
        self._lock = threading.Lock()
        self._closed = False
        if stream is None and terminal and os.environ.get("QUANDARY_PROGRESS", "1") != "0":
            stream = _default_stream or sys.stdout
        self._stream = stream
        self._tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())
        # calls in flight and their latency (#24 item 7): a heartbeat line while nothing finishes,
        # and an estimate from how long calls take rather than from how fast items happened to finish
        self._in_flight: dict[int, float] = {}
        self._next_token = 0
        self._latencies: list[float] = []
        self._peak_in_flight = 0
        self._first_call: float | None = None  # when the first timed call went out
        self._stop_heartbeat = threading.Event()

    # --- counting ------------------------------------------------------------------------------
    def advance(self, n: int = 1, *, calls_made: int = 0, cached: int = 0, failed: int = 0) -> None:
        """``n`` more items done; ``calls_made`` LLM calls answered, of which ``cached`` came from the
        cache and ``failed`` failed (provider error or unparseable)."""
        with self._lock:
            self.done = min(self.total, self.done + n) if self.total else self.done + n
            self.calls_made += calls_made
            self.cached += cached
            self.failed += failed
        self._emit()

    def record_call(self, *, cached: bool, failed: bool) -> None:
        """One LLM call finished (reported by the council layer). It never counts an item as done:
        items are done at :meth:`advance` or :meth:`item_done`."""
        with self._lock:
            self.calls_made += 1
            self.cached += int(bool(cached))
            self.failed += int(bool(failed))
        self._emit()

    def item_done(self, item) -> None:
        """The item ``item`` is finished (its last call answered and its outcome decided); a second
        report of the same id is ignored."""
        with self._lock:
            if item in self._items_done:
                return
            self._items_done.add(item)
            self.done = min(self.total, self.done + 1) if self.total else self.done + 1
        self._emit()

    def call_started(self) -> int:
        """A request went out (uncached); returns the token to pass to :meth:`call_finished`."""
        with self._lock:
            self._next_token += 1
            self._in_flight[self._next_token] = self._clock()
            if self._first_call is None:
                self._first_call = self._in_flight[self._next_token]
            self._peak_in_flight = max(self._peak_in_flight, len(self._in_flight))
            return self._next_token

    def call_finished(self, token: int) -> None:
        with self._lock:
            started = self._in_flight.pop(token, None)
            if started is not None:
                self._latencies.append(self._clock() - started)

    # --- rendering -----------------------------------------------------------------------------
    def _eta_s(self, elapsed: float) -> float | None:
        """Seconds left. Once an item is done: the calls left at the rate measured since the first
        call (#42 item 5). The calls an item takes are the calls finished over the items done (the
        finished calls of the items still open included: in stage 9 the items that finish first are
        the ones that lost their first comparison, and their 1 call an item read the stage as nearly
        done with two thirds of its calls to come); the calls done count each call in flight by the
        part of a mean call it has run. Counting only finished items made s03 of the demo (4 calls
        in flight, 16-26 s each) read 2m27s left after 2 items with 69 s left: the rate ignored the
        calls about to finish. A call stuck in flight adds at most one call while the wall time
        grows, so the estimate grows with it. Replayed on the demo's s03 and s09 call traces in
        tests/cli/test_progress.py.
        Before any item is done: the call model (#31 item 3): calls per item × remaining items × call
        latency ÷ the concurrency actually reached, less the part of the calls in flight already
        spent; a call in flight longer than the mean counts with its age as a latency sample.
        Without timed calls: the item rate."""
        remaining = self.total - self.done
        if not self.total or remaining <= 0:
            return None
        now = self._clock()
        ages = [now - t for t in self._in_flight.values()]
        mean = sum(self._latencies) / len(self._latencies) if self._latencies else None
        if self.done:
            span = now - (self._first_call if self._first_call is not None else self._start)
            if span <= 0:
                return elapsed / self.done * remaining
            finished = max(self.calls_made, len(self._latencies))
            per_item = max(1.0, finished / self.done)  # no call at all: the item rate
            calls_done = max(finished, self.done) + (sum(min(1.0, a / mean) for a in ages) if mean else 0.0)
            return span / calls_done * max(0.0, self.total * per_item - calls_done)
        if self._latencies or self._in_flight:
            samples = self._latencies + [a for a in ages if mean is None or a > mean]
            if samples and self._first_call is not None:
                latency = sum(samples) / len(samples)
                span = now - self._first_call
                busy = sum(self._latencies) + sum(ages)
                concurrency = min(max(1.0, busy / span), float(self._peak_in_flight)) if span > 0 else 1.0
                left = remaining * latency - sum(min(latency, a) for a in ages)
                return max(left / concurrency, 0.0)
        return None

    def line(self) -> str:
        elapsed = self._clock() - self._start
        total = f"/{self.total}" if self.total else ""
        eta_s = self._eta_s(elapsed)
        eta = f", ~{_fmt_duration(eta_s)} left" if eta_s is not None and self.done < self.total else ""
        calls = f"  LLM calls {self.calls_made} (cached {self.cached}, failed {self.failed})" if self.calls_made else ""
        flight = ""
        if self._in_flight:
            oldest = self._clock() - min(self._in_flight.values())
            flight = f"  {len(self._in_flight)} in flight (oldest {_fmt_duration(oldest)})"
        if self._latencies:
            flight += f"  ~{_fmt_duration(sum(self._latencies) / len(self._latencies))}/call"
        return f"{self.step}: {self.done}{total} items{calls}{flight}  {_fmt_duration(elapsed)}{eta}"

    def _heartbeat(self, every_s: float) -> None:
        # a line (a redraw on a terminal) while nothing finishes: long calls are not silence
        while not self._stop_heartbeat.wait(every_s):
            self._emit(heartbeat=True)

    def _bar(self) -> str:
        width = 20
        filled = int(width * self.done / self.total) if self.total else 0
        return f"[{'#' * filled}{'.' * (width - filled)}] {self.line()}"

    def _emit(self, final: bool = False, heartbeat: bool = False) -> None:
        now = self._clock()
        with self._lock:
            if self._closed:
                return
            every = self._line_every_s * (0.9 if heartbeat else 1.0)  # the heartbeat's wait is not exact
            due_line = final or self._last_line is None or now - self._last_line >= every
            if due_line:
                self._last_line = now
            due_draw = self._tty and (final or now - self._last_draw >= 0.2)
            if due_draw:
                self._last_draw = now
            text = self.line()
            if due_line and final and text == self._last_text and not self._tty:
                due_line = False  # the final line would repeat the last one
            if due_line:
                self._last_text = text
        if due_line:
            for sink in self._sinks:
                sink(text)
        if self._stream is None:
            return
        try:
            if self._tty and due_draw:
                self._stream.write("\r\x1b[2K" + self._bar() + ("\n" if final else ""))
                self._stream.flush()
            elif not self._tty and due_line:
                self._stream.write(text + "\n")
                self._stream.flush()
        except (OSError, ValueError):  # a closed pipe must not fail the work
            self._stream = None

    def close(self) -> None:
        """Final line (items done, calls, elapsed); later updates are ignored."""
        self._emit(final=True)
        with self._lock:
            self._closed = True

    # --- the open progress, for record_call ------------------------------------------------------
    def __enter__(self) -> "Progress":
        with _current_lock:
            _current.append(self)
        if not self._tty:
            self._emit()  # a start line in logs
        if self._stream is not None or self._sinks:
            every = 1.0 if self._tty else self._line_every_s
            threading.Thread(target=self._heartbeat, args=(every,), name=f"progress-{self.step}", daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop_heartbeat.set()
        with _current_lock:
            if self in _current:
                _current.remove(self)
        self.close()


def current() -> Progress | None:
    """The innermost open Progress, if any."""
    with _current_lock:
        return _current[-1] if _current else None


def record_call(*, cached: bool, failed: bool) -> None:
    """Report one finished LLM call to the open Progress (a no-op when none is open)."""
    p = current()
    if p is not None:
        p.record_call(cached=cached, failed=failed)


def item_done(item) -> None:
    """Count the item ``item`` done in the open Progress (a no-op when none is open): for code that
    finishes items without holding the Progress (a cascade stage deciding a candidate)."""
    p = current()
    if p is not None:
        p.item_done(item)


def call_started() -> tuple["Progress", int] | None:
    """An uncached LLM request went out: the open Progress counts it as in flight until
    :func:`call_finished` (the client calls both). Returns the handle for ``call_finished``."""
    p = current()
    return (p, p.call_started()) if p is not None else None


def call_finished(handle: tuple["Progress", int] | None) -> None:
    if handle is not None:
        handle[0].call_finished(handle[1])
