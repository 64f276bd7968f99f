"""Stream the elements of a JSON list from a file, one at a time, in bounded memory.

``json.loads`` of a whole file holds every record as Python objects at once, several times the
file's size (issue 23 item 9). Here the file is read in chunks, each element is decoded with the
standard library's C decoder (``raw_decode``) as soon as it is complete, and the buffer keeps only
the chunk being read. Errors carry the byte offset and the element's index, so a truncated or
damaged file is reported where it breaks.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from pathlib import Path

CHUNK = 1 << 20
# One element larger than this is refused rather than buffered (a record is a few hundred bytes;
# a runaway string or a file that is not a list of records must not take the memory).
MAX_ELEMENT_CHARS = 16 << 20
_WORDS = ("true", "false", "null", "NaN", "Infinity", "-Infinity")
_WS = " \t\r\n"
_NUMBER_TAIL = re.compile(r"[-+.eE0-9]+")
_ESCAPE_TAIL = re.compile(r"[\\u0-9a-fA-F]{0,11}")  # \uXXXX, maybe a surrogate pair, cut short


class JsonStreamError(ValueError):
    """The file is not a JSON list, or breaks at ``byte`` inside element ``index``."""

    def __init__(self, message: str, byte: int | None = None, index: int | None = None):
        super().__init__(message)
        self.byte, self.index = byte, index


class _Reader:
    """The file's text from ``self.pos`` on; ``self.base`` is the byte offset of ``self.buf[0]``."""

    def __init__(self, fh, chunk: int):
        self.fh, self.chunk = fh, chunk
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.buf, self.pos, self.base, self.eof = "", 0, 0, False

    def more(self) -> bool:
        """Append the next chunk (dropping what was consumed); False at end of file."""
        if self.eof:
            return False
        data = self.fh.read(self.chunk)
        try:
            text = self.decoder.decode(data, final=not data)
        except UnicodeDecodeError as exc:
            raise JsonStreamError(
                f"not valid JSON: not UTF-8 text near byte {self.byte_at(len(self.buf)) + exc.start}"
            ) from None
        self.eof = not data
        self.base += len(self.buf[: self.pos].encode())
        self.buf, self.pos = self.buf[self.pos :] + text, 0
        return not self.eof or bool(text)

    def byte_at(self, pos: int) -> int:
        return self.base + len(self.buf[:pos].encode())

    def skip_ws(self) -> str:
        """The next non-blank character ('' at end of file), not consumed."""
        while True:
            n = len(self.buf)
            while self.pos < n and self.buf[self.pos] in _WS:
                self.pos += 1
            if self.pos < n:
                return self.buf[self.pos]
            if not self.more():
                return ""


def _incomplete(exc: json.JSONDecodeError, buf: str) -> bool:
    """Whether decoding failed only because the text ran out (more data may complete it)."""
    tail = buf[exc.pos :]
    if exc.msg.startswith("Unterminated string") or not tail.strip():
        return True
    if exc.msg.startswith("Invalid \\"):  # an escape cut in half
        return bool(_ESCAPE_TAIL.fullmatch(tail))
    if _NUMBER_TAIL.fullmatch(tail):  # a number cut after its sign, point or exponent
        return True
    return exc.msg == "Expecting value" and any(w.startswith(tail) for w in _WORDS)


def _truncated(r: _Reader, index: int, inside: bool) -> JsonStreamError:
    size = r.byte_at(len(r.buf))
    where = (
        f"inside record {index} (it starts at byte {r.byte_at(r.pos)})" if inside else "before the list's closing ']'"
    )
    return JsonStreamError(
        f"truncated: the file ends at byte {size} {where}; {index} complete records before it", size, index
    )


def _element(r: _Reader, index: int, decode, max_element: int):
    """Decode the element at ``r.pos``, reading more of the file while it is incomplete."""
    while True:
        try:
            value, end = decode(r.buf, r.pos)
        except json.JSONDecodeError as exc:
            if not _incomplete(exc, r.buf):
                where = r.byte_at(exc.pos)
                raise JsonStreamError(
                    f"not valid JSON at byte {where} in record {index} ({exc.msg})", where, index
                ) from None
            if len(r.buf) - r.pos > max_element:
                raise JsonStreamError(
                    f"record {index} at byte {r.byte_at(r.pos)} is larger than "
                    f"{max_element >> 20} MiB or never ends (records are small flat objects)",
                    r.byte_at(r.pos),
                    index,
                ) from None
            if not r.more():
                raise _truncated(r, index, inside=True) from None
            continue
        except RecursionError:
            raise JsonStreamError(
                f"JSON nested too deeply in record {index} at byte {r.byte_at(r.pos)} "
                "(records are a list of flat objects)",
                r.byte_at(r.pos),
                index,
            ) from None
        # a number that reaches the buffer's end may go on in the next chunk
        if (end == len(r.buf) or _NUMBER_TAIL.fullmatch(r.buf, end)) and r.more():
            continue
        r.pos = end
        return value


def iter_json_list(path: str | Path, chunk: int | None = None, max_element: int | None = None) -> Iterator[object]:
    """Yield the elements of the JSON list in ``path`` in order; :class:`JsonStreamError` names the
    byte and element where the file stops being a list (truncated, invalid, nested too deeply)."""
    decode = json.JSONDecoder().raw_decode
    max_element = max_element or MAX_ELEMENT_CHARS
    with open(path, "rb") as fh:
        r = _Reader(fh, chunk or CHUNK)
        first = r.skip_ws()
        if first != "[":
            what = "an empty file" if first == "" else f"{first!r} at byte {r.byte_at(r.pos)}"
            raise JsonStreamError(f"expected a JSON list of records, found {what}", r.byte_at(r.pos), None)
        r.pos += 1
        index, sep = 0, r.skip_ws()
        while sep != "]":
            if sep == "":
                raise _truncated(r, index, inside=False)
            yield _element(r, index, decode, max_element)
            index += 1
            sep = r.skip_ws()
            if sep == ",":
                r.pos += 1
                sep = r.skip_ws()
                if sep == "":
                    raise _truncated(r, index, inside=False)
                if sep == "]":
                    raise JsonStreamError(
                        f"not valid JSON at byte {r.byte_at(r.pos)}: a ',' before the closing ']'",
                        r.byte_at(r.pos),
                        index,
                    )
            elif sep not in ("]", ""):
                where = r.byte_at(r.pos)
                raise JsonStreamError(
                    f"not valid JSON at byte {where} after record {index - 1} (expected ',' or ']', found {sep!r})",
                    where,
                    index,
                )
        r.pos += 1
        if (rest := r.skip_ws()) != "":
            where = r.byte_at(r.pos)
            raise JsonStreamError(f"not valid JSON: {rest!r} at byte {where} after the list's closing ']'", where, None)
