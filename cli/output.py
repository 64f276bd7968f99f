"""Shared rendering for CLI output: aligned text tables, CSV and JSON."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence


def _text(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bytes):
        return f"<{len(v)} bytes>"
    return str(v)


def render_table(columns: Sequence[str], rows: Sequence[Sequence], max_width: int = 60) -> str:
    cells = [[_text(v).replace("\n", " ") for v in row] for row in rows]
    cells = [[c if len(c) <= max_width else c[: max_width - 1] + "…" for c in row] for row in cells]
    widths = [len(c) for c in columns]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row)]
    line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths)).rstrip()  # noqa: E731
    out = [line(list(columns)), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    return "\n".join(out)


def render_csv(columns: Sequence[str], rows: Sequence[Sequence]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([[_text(v) if v is not None else "" for v in r] for r in rows])
    return buf.getvalue().rstrip("\n")


def render_json(columns: Sequence[str], rows: Sequence[Sequence]) -> str:
    return json.dumps([dict(zip(columns, r)) for r in rows], default=_text, indent=2)


def render(fmt: str, columns: Sequence[str], rows: Sequence[Sequence]) -> str:
    return {"table": render_table, "csv": render_csv, "json": render_json}[fmt](columns, rows)
