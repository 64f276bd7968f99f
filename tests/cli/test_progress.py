"""resources/progress.py: plain lines off a terminal, a live bar on one, counts from the council hook."""

import io

from pipelines.ambitab.build import item_progress
from resources.progress import Progress, call_finished, call_started, current, record_call
from tests.waiting import wait_until


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_plain_lines_are_throttled_and_end_with_the_totals():
    clock, out, sink = Clock(), io.StringIO(), []
    with Progress("s03", total=4, stream=out, sinks=(sink.append,), line_every_s=10, clock=clock) as p:
        p.advance(1, calls_made=2, cached=1)
        clock.t = 5
        p.advance(1, calls_made=1, failed=1)  # within 10 s of the last line: no new line
        clock.t = 12
        p.advance(1)
        clock.t = 20
        p.advance(1)
    lines = out.getvalue().splitlines()
    assert lines == [
        "s03: 0/4 items  0s",  # the start line; updates within 10 s of it are not printed
        "s03: 3/4 items  LLM calls 3 (cached 1, failed 1)  12s, ~4s left",
        "s03: 4/4 items  LLM calls 3 (cached 1, failed 1)  20s",
    ]
    assert sink == lines


def test_terminal_gets_one_redrawn_bar():
    clock, out = Clock(), Tty()
    with Progress("gen", total=2, stream=out, clock=clock) as p:
        p.advance(1)
        clock.t = 1
        p.advance(1)
    text = out.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n")  # redrawn in place, one final newline
    assert "\r\x1b[2K[##########..........] gen: 1/2 items" in text
    assert "[####################] gen: 2/2 items  1s" in text


def test_calls_report_to_the_open_progress_and_count_items_once():
    out = io.StringIO()
    record_call(cached=False, failed=False, item="x")  # nothing open: ignored
    with Progress("s09", total=2, stream=out) as p:
        assert current() is p
        record_call(cached=False, failed=False, item="a")
        record_call(cached=True, failed=False, item="a")
        record_call(cached=False, failed=True, item="b")
    assert current() is None
    assert (p.done, p.calls_made, p.cached, p.failed) == (2, 3, 1, 1)


def test_a_builders_item_progress_writes_only_to_its_sink(capsys):
    """AmbiTab's corpus builders count their rows in the one Progress, as log lines only; the calls
    they make still count towards the step's open progress."""

    sink, out = [], io.StringIO()
    with Progress("step", total=1, stream=out) as step:
        rows = item_progress("rows", 2, sink.append)
        rows.advance()
        record_call(cached=False, failed=False, item="a")
        rows.advance()
        rows.close()
    assert capsys.readouterr().out == ""
    assert sink[0].startswith("rows: 1/2 items") and sink[-1].startswith("rows: 2/2 items")
    assert (step.calls_made, rows.calls_made) == (1, 0)
    item_progress("quiet", 1, None).close()  # no sink: nothing at all
    assert capsys.readouterr().out == ""


def test_a_heartbeat_shows_calls_in_flight_while_nothing_finishes():
    """#24 item 7: one long call is not 31 minutes of silence: lines keep coming with the calls in
    flight and how long the oldest has run."""

    out = io.StringIO()
    with Progress("candidates", total=3, stream=out, line_every_s=0.05):
        handle = call_started()
        wait_until(lambda: "1 in flight (oldest" in out.getvalue(), 60, "a heartbeat line with the call in flight")
        call_finished(handle)


def test_the_estimate_follows_call_latency_not_the_item_rate():
    """Before any item has finished, the first timed call (30 s) already gives an estimate (the
    item rate has none); calls in flight count as partly done."""
    clock, out = Clock(), io.StringIO()
    with Progress("s03", total=3, stream=out, line_every_s=1000, clock=clock) as p:
        token = p.call_started()
        clock.t = 30
        p.call_finished(token)
        assert "~1m30s left" in p.line() and "~30s/call" in p.line(), p.line()
        p.call_started()
        clock.t = 40  # a third of the next call's latency has passed
        assert "~1m20s left" in p.line() and "1 in flight (oldest 10s)" in p.line(), p.line()


def test_the_estimate_grows_while_a_call_is_stuck_and_uses_the_concurrency_reached():
    """#31 item 3: once running, the remaining time follows completed work with the time spent in
    flight included: a call in flight far longer than the others raises the estimate as it ages
    (it never freezes), and calls that ran one at a time are not divided by an idle peak."""
    clock, out = Clock(), io.StringIO()
    with Progress("s03", total=3, stream=out, line_every_s=1000, clock=clock) as p:
        token = p.call_started()
        clock.t = 30
        p.call_finished(token)
        p.call_started()
        estimates = []
        for t in (40, 100, 130, 200):
            clock.t = t
            estimates.append(p._eta_s(t))
        assert estimates[0] == 80  # 3 × 30 s, less the 10 s the call in flight has run
        assert estimates[1] < estimates[2] < estimates[3], estimates  # the stuck call raises it
    clock2 = Clock()
    p2 = Progress("s04", total=10, stream=io.StringIO(), line_every_s=1000, clock=clock2)
    tokens = [p2.call_started() for _ in range(4)]  # a peak of 4 at once ...
    clock2.t = 10
    for tok in tokens:
        p2.call_finished(tok)
    p2.advance(4)
    for _ in range(2):  # ... then calls one at a time
        tok = p2.call_started()
        clock2.t += 10
        p2.call_finished(tok)
        p2.advance(1)
    # 6 calls × 10 s in 30 s of wall time: 2 at once on average, not the peak of 4
    assert p2._eta_s(30) == 4 * 1 * 10 / 2


def test_the_remaining_time_follows_the_measured_item_rate_once_items_finish():
    """#42 item 5: mid-stage the estimate is the rate measured so far (10 items in 100 s: 10 s
    each), however slow the calls in flight look on a loaded machine or however many calls early
    items took (later ones short-circuit)."""
    clock = Clock()
    p = Progress("s05", total=40, stream=io.StringIO(), line_every_s=1000, clock=clock)
    slow = [p.call_started() for _ in range(8)]  # eight 90 s calls at once, from the start
    clock.t = 90
    for tok in slow:
        p.call_finished(tok)
    p.advance(9)
    [p.call_started() for _ in range(8)]  # eight more in flight ...
    clock.t = 100
    p.advance(1)  # ... while the tenth item finishes
    assert p._eta_s(100) == 100 / 10 * 30
    clock.t = 160  # nothing finished for a minute: the estimate grows with the wall time
    assert p._eta_s(160) == 160 / 10 * 30


def test_calls_in_flight_are_not_counted_as_calls_of_the_items_done():
    """#42 item 5, measured in the demo: 4 conversations, one call each, all 4 in flight; one
    finished after 11 s and the other 3 were still in flight at 70 s. The line said ~2m38s left
    (the 3 calls in flight read as 4 calls for the one item done); they finished 7 s later."""
    clock = Clock()
    p = Progress("interaction_conversations", total=4, stream=io.StringIO(), line_every_s=1000, clock=clock)
    tokens = [p.call_started() for _ in range(4)]
    clock.t = 11
    p.call_finished(tokens[0])
    p.advance(1)
    clock.t = 70
    left = p._eta_s(70)
    assert left is not None and left < 60, left  # at most one more call's time, not 4 calls an item
    # two calls an item, one at a time: the items done still say so
    clock2 = Clock()
    p2 = Progress("s09", total=4, stream=io.StringIO(), line_every_s=1000, clock=clock2)
    for _ in range(2):
        tok = p2.call_started()
        clock2.t += 10
        p2.call_finished(tok)
    p2.advance(1)
    assert p2._eta_s(clock2.t) == 3 * 2 * 10
