"""Text normalisation and term matching shared by every AmbiTab matcher (spec §4.1).

``norm(s)``: NFKC, lower case, ``_`` and ``-`` become spaces, whitespace collapsed. A *name* (a
term or an alias) matches a text on word boundaries, optionally followed by a plural ending
("s" or "es"), so "country" is not found inside "countryside" but "employees" matches "employee".
"""

import re
from dataclasses import dataclass
from functools import lru_cache

from pipelines.ambitab.record import norm_text

# Quoted spans: straight double, curly double, backticks, and single quotes that are not
# apostrophes (a quote must not sit between two word characters: "what's" is no quote).
_QUOTED = (
    re.compile(r'"([^"]+)"'),
    re.compile(r"\u201c([^\u201d]+)\u201d"),
    re.compile(r"\u2018([^\u2019]+)\u2019"),
    re.compile(r"`([^`]+)`"),
    re.compile(r"(?<!\w)'([^']+)'(?!\w)"),
)


def norm(text: str | None) -> str:
    """The record's normalisation (one definition for ids and matching)."""
    return norm_text(str(text)) if text else ""


@lru_cache(maxsize=4096)
def _name_pattern(name: str) -> re.Pattern:
    # Word boundaries on both sides; an optional plural ending. Internal spaces match any run of
    # whitespace (the text is normalised, so a single space).
    body = r"\s".join(re.escape(part) for part in name.split(" "))
    return re.compile(rf"(?<!\w){body}(?:s|es)?(?!\w)")


@dataclass(frozen=True)
class Hit:
    start: int
    length: int
    name: str


def find_name(name: str, text_normed: str) -> Hit | None:
    """Earliest occurrence of normalised ``name`` in normalised text (longest plural form)."""
    if not name:
        return None
    m = _name_pattern(name).search(text_normed)
    return Hit(m.start(), m.end() - m.start(), name) if m else None


def earliest_hit(names, text_normed: str) -> Hit | None:
    """Earliest occurrence among ``names``; at an equal offset the longest match wins."""
    best: Hit | None = None
    for name in names:
        hit = find_name(name, text_normed)
        if hit and (best is None or (hit.start, -hit.length) < (best.start, -best.length)):
            best = hit
    return best


def quoted_spans(text: str) -> list[tuple[int, str]]:
    """(offset, normalised content) of every quoted span, in order of appearance."""
    spans = []
    for pattern in _QUOTED:
        for m in pattern.finditer(text or ""):
            content = norm(m.group(1))
            if content:
                spans.append((m.start(1), content))
    return sorted(spans)
