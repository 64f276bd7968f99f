"""Issue 19 items 5 and 7: budgets per call, a timeout that cancels in-flight operator calls,
nonsense values refused at the command line, one-line errors naming the argument."""

import asyncio
import threading
import time

import pytest

from cli import main
from pipelines.aisql.execute import run_query
from pipelines.aisql.operators import AIRuntime
from pipelines.aisql.rewrite import SqlRewriteError, to_duckdb


class CountingBackend:
    name = "counting"

    def __init__(self):
        self.answered = 0

    def answer_now(self, reqs):
        self.answered += len(reqs)
        return [(True, False, False) for _ in reqs]


class HangingBackend:
    """Never answers until cancelled; records that the cancellation reached the in-flight calls."""

    name = "hanging"

    def __init__(self):
        self.started = threading.Event()
        self.cancelled = threading.Event()

    async def answer_many(self, reqs):
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


def test_budget_is_enforced_per_call(movie_db):
    backend = CountingBackend()
    rt = AIRuntime(backend, budget=1000)
    try:
        rec = run_query(
            movie_db.path, "SELECT count(*) FROM Reviews WHERE NLfilter(reviewText, 'positive')", "thalamusdb", rt
        )
    finally:
        rt.close()
    assert rec.status == "budget_exceeded" and "budget of 1000" in rec.error
    assert backend.answered == 1000 and rec.calls == 1000  # exactly the budget, not 0 or a vector's worth


def test_timeout_cancels_in_flight_operator_calls(movie_db):
    backend = HangingBackend()
    rt = AIRuntime(backend, budget=5000)
    start = time.perf_counter()
    try:
        rec = run_query(
            movie_db.path,
            "SELECT count(*) FROM Reviews WHERE NLfilter(reviewText, 'positive')",
            "thalamusdb",
            rt,
            timeout_s=1.0,
        )
    finally:
        rt.close()
    assert backend.started.is_set() and backend.cancelled.is_set()
    assert rec.status == "timeout" and time.perf_counter() - start < 30
    assert not rec.error.startswith("timeout:") and "cancelled" in rec.error


@pytest.mark.parametrize(
    "flag,value",
    [
        ("--budget", "-5"),
        ("--budget", "0"),
        ("--flip-rate", "1.5"),
        ("--flip-rate", "-0.1"),
        ("--timeout", "0"),
        ("--sample", "-1"),
    ],
)
def test_cli_refuses_nonsense_values(flag, value, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["aisql", "run", "movie", "SELECT 1", flag, value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert flag in err and value in err


BAD_CALLS = [
    ("SELECT AI.IF(('Is it positive? ', r.reviewText), colour => 'red') FROM movie.reviews AS r", "colour"),
    ("SELECT AI.IF(('Is it positive? ', r.reviewText), r.id) FROM movie.reviews AS r", "argument"),
    ("SELECT AI.IF(42) FROM movie.reviews AS r", "42"),
    ("SELECT AI.CLASSIFY(('Sentiment: ', r.reviewText)) FROM movie.reviews AS r", "categories"),
    ("SELECT AI.IF(r.reviewText) FROM movie.reviews AS r", "instruction"),
]


@pytest.mark.parametrize("sql,named", BAD_CALLS)
def test_bad_ai_calls_are_one_line_errors_naming_the_argument(sql, named):
    with pytest.raises(SqlRewriteError) as exc:
        to_duckdb(sql, "bigquery")
    msg = str(exc.value)
    assert "\n" not in msg and named in msg and "Binder" not in msg


@pytest.mark.parametrize(
    "sql,named",
    [
        ("SELECT * FROM Reviews WHERE NLfilter(reviewText)", "NLfilter"),
        ("SELECT * FROM Reviews WHERE NLfilter(reviewText, 3)", "3"),
        ("SELECT * FROM Reviews WHERE NLjoin(reviewText, 'same')", "NLjoin"),
    ],
)
def test_bad_thalamus_calls_are_one_line_errors(sql, named):
    with pytest.raises(SqlRewriteError) as exc:
        to_duckdb(sql, "thalamusdb")
    assert named in str(exc.value) and "\n" not in str(exc.value)


def test_parse_errors_carry_no_terminal_codes():
    with pytest.raises(SqlRewriteError) as exc:
        to_duckdb("SELECT FROM FROM WHERE", "bigquery")
    assert "\x1b" not in str(exc.value) and "[4m" not in str(exc.value)


def test_cli_errors_are_one_line(sembench_root, capsys):
    sql, _ = BAD_CALLS[0]
    assert main(["aisql", "run", "movie", sql, "--data", str(sembench_root)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "colour" in err and "Traceback" not in err
