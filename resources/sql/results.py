"""What an untrusted query returns (rows or a typed failure) and the limits every query runs under."""

import argparse
import math
import os
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

DEFAULT_TIMEOUT_S = 3.0  # as in the ABISS reference code


DEFAULT_MAX_ROWS = 100_000


# Memory bounds for untrusted SQL; env overrides for large legitimate seed databases.
DEFAULT_MAX_RESULT_BYTES = int(os.environ.get("QUANDARY_SQL_MAX_RESULT_MB", "64")) << 20


SQLITE_MAX_VALUE_BYTES = int(os.environ.get("QUANDARY_SQL_MAX_VALUE_MB", "16")) << 20


SQLITE_HEAP_LIMIT_BYTES = int(os.environ.get("QUANDARY_SQL_SQLITE_HEAP_MB", "384")) << 20


DUCKDB_MEMORY_LIMIT = os.environ.get("QUANDARY_SQL_DUCKDB_MEMORY", "256MB")


DUCKDB_MAX_TEMP = os.environ.get("QUANDARY_SQL_DUCKDB_MAX_TEMP", "1GB")


_DUCKDB_THREADS = int(os.environ.get("QUANDARY_SQL_DUCKDB_THREADS", "2"))


SQLITE_SUFFIXES = {".sqlite", ".sqlite3", ".db", ".db3"}


DUCKDB_SUFFIXES = {".duckdb", ".ddb"}


class FailureKind(str, Enum):
    SYNTAX = "syntax"
    RUNTIME = "runtime"
    TIMEOUT = "timeout"
    FORBIDDEN = "forbidden"
    TOO_MANY_ROWS = "too_many_rows"
    TOO_LARGE = "too_large"  # a value, the result or the engine's memory exceeded its bound


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple]
    elapsed_ms: float
    ok: bool = field(default=True, init=False)

    @property
    def row_count(self) -> int:
        return len(self.rows)


@dataclass(frozen=True)
class QueryFailure:
    kind: FailureKind
    message: str
    elapsed_ms: float = 0.0
    ok: bool = field(default=False, init=False)
    # Set only for a result past the row/byte cap read with ``digest_beyond_cap``: the whole result,
    # folded without being held (:class:`resources.sql.values.ResultDigest`).
    columns: list[str] | None = None
    row_total: int | None = None
    bag_digest: str | None = None
    ordered_digest: str | None = None

    @property
    def digested(self) -> bool:
        return self.bag_digest is not None

    def one_line(self) -> str:
        return f"{self.kind.value}: {' '.join(self.message.split())}"


Outcome = QueryResult | QueryFailure


def engine_of(path: str | Path) -> str:
    """'sqlite' or 'duckdb', by magic bytes first and file suffix second."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            head = fh.read(16)
    except OSError:
        head = b""
    if head.startswith(b"SQLite format 3\x00"):
        return "sqlite"
    if len(head) >= 12 and head[8:12] == b"DUCK":
        return "duckdb"
    return "duckdb" if p.suffix.lower() in DUCKDB_SUFFIXES else "sqlite"


# The longest deadline one query may have: one day. Beyond it a deadline is no deadline, and from
# about 4e9 s deadline arithmetic overflows (OverflowError, "timestamp out of range": issue 34 item 4).
MAX_TIMEOUT_S = 86_400.0


def check_timeout(timeout_s) -> float:
    """A usable timeout: a finite number of seconds > 0 and at most :data:`MAX_TIMEOUT_S` (``nan``/``inf``
    would disable the deadline, a huge one overflows it)."""
    try:
        value = float(timeout_s)
    except (TypeError, ValueError):
        raise ValueError(f"timeout must be a number of seconds, got {timeout_s!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"timeout must be a finite number of seconds > 0, got {timeout_s!r}")
    if value > MAX_TIMEOUT_S:
        raise ValueError(f"timeout must be at most {MAX_TIMEOUT_S:g} seconds (one day), got {timeout_s!r}")
    return value


def timeout_arg(text: str) -> float:
    """argparse ``type=`` for ``--timeout``: refuses nan, inf, 0 and negatives with one line."""

    try:
        return check_timeout(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def value_bytes(value) -> int:
    """Approximate size of one result value (what bounds the Python copy of a result)."""
    if isinstance(value, (str, bytes, bytearray, memoryview)):
        return len(value) + 16
    if isinstance(value, (list, tuple)):
        return 16 + sum(value_bytes(v) for v in value)
    if isinstance(value, dict):
        return 16 + sum(value_bytes(k) + value_bytes(v) for k, v in value.items())
    return 16


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)
