"""Cell values that compare "as the same value" across engines, and a digest of a whole result.

:func:`normalize_value` is the one value normalisation of the result comparison
(:mod:`pipelines.sqltools.results` re-exports it and documents the rules); it lives here, below
the domain layer, because the safe executor folds results too large to hold into a
:class:`ResultDigest` with the very same normalisation (#30 item 4).

**Digest.** A multiset hash: each row (a tuple of normalised cells, ``repr``-encoded) is hashed with
BLAKE2b-128 and the hashes are *added* modulo 2**128, so the bag digest ignores row order and counts
duplicates; the ordered digest chains the row hashes instead. Equal digests (and row counts) mean
equal results up to a hash collision (~2**-64 for non-adversarial data); different digests mean
different results under the default tolerance (7 significant digits), with the columns in the
same order.
"""

from __future__ import annotations

import hashlib
from decimal import Decimal
from typing import Any

SIGNIFICANT_DIGITS = 7  # the cascade's and AmbiTab's float tolerance: ~1e-6 relative


class _NaN:
    """One hashable NaN so that NaN matches NaN in sets and multisets (float('nan') != itself)."""

    def __repr__(self) -> str:
        return "NaN"


NAN = _NaN()


def _float(x: float, significant_digits: int | None) -> Any:
    if x != x:
        return NAN
    if x in (float("inf"), float("-inf")):
        return x
    if x.is_integer():
        return int(x)  # 1.0 -> 1 so that it hashes and compares like the integer
    if significant_digits is None:
        return x
    rounded = float(f"{x:.{significant_digits}g}")
    return int(rounded) if rounded.is_integer() else rounded


def normalize_value(
    value: Any, *, significant_digits: int | None = SIGNIFICANT_DIGITS, decimals: int | None = None
) -> Any:
    """A hashable value that compares as the module docstring says (tolerances explicit)."""
    if value is None or type(value) in (str, int, bytes):  # fast path: most cells
        return value
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if decimals is not None:
            value = round(value, decimals)
        return _float(value, significant_digits)
    if isinstance(value, Decimal):
        if value.is_finite() and value == value.to_integral_value():
            return int(value)
        return _float(float(value), significant_digits)
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, (list, tuple)):  # DuckDB LIST / ARRAY values
        return tuple(normalize_value(v, significant_digits=significant_digits, decimals=decimals) for v in value)
    if isinstance(value, dict):  # DuckDB STRUCT / MAP values
        return tuple(
            sorted(
                (
                    (str(k), normalize_value(v, significant_digits=significant_digits, decimals=decimals))
                    for k, v in value.items()
                ),
                key=repr,
            )
        )
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value  # dates, times, UUIDs: already comparable and hashable


_MOD = 1 << 128


def _row_hash(row: tuple) -> bytes:
    return hashlib.blake2b(repr(tuple(normalize_value(v) for v in row)).encode(), digest_size=16).digest()


class ResultDigest:
    """Fold rows one at a time without keeping them: row count, bag digest, ordered digest."""

    def __init__(self) -> None:
        self.rows = 0
        self._bag = 0
        self._chain = b""

    def add(self, row) -> None:
        h = _row_hash(tuple(row))
        self.rows += 1
        self._bag = (self._bag + int.from_bytes(h, "big")) % _MOD
        self._chain = hashlib.blake2b(self._chain + h, digest_size=16).digest()

    @property
    def bag(self) -> str:
        return f"{self._bag:032x}"

    @property
    def ordered(self) -> str:
        return self._chain.hex()


def digest_rows(rows) -> ResultDigest:
    d = ResultDigest()
    for r in rows:
        d.add(r)
    return d
