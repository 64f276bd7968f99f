"""What every AmbiTab conversion returns: records, rejected source rows and skipped steps.

A conversion never raises for one bad source row: the row becomes a :class:`Reject` with the
stage and reason (and its raw text, truncated), and the build goes on. A step that cannot run
here (a database or file missing from ``../shared/data``) becomes a :class:`SkippedStep` that the
asset surfaces as metadata and a WARN check — never silently.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import polars as pl

from pipelines.ambitab.record import TaskRecord
from resources.progress import Progress, Sink

RAW_LIMIT = 2000


@dataclass(frozen=True)
class Reject:
    corpus: str
    source_id: str
    stage: str  # parse | database | execute | filter | ...
    reason: str
    raw: str = ""

    @classmethod
    def of(cls, corpus: str, source_id: str, stage: str, reason: str, raw: Any = "") -> Reject:
        text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False, default=str)
        return cls(corpus, str(source_id), stage, " ".join(str(reason).split()), text[:RAW_LIMIT])


@dataclass(frozen=True)
class SkippedStep:
    step: str
    reason: str
    affected: int = 0  # source rows / records the skip touches


@dataclass
class BuildResult:
    corpus: str
    records: list[TaskRecord] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)
    skipped: list[SkippedStep] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)

    def reject(self, source_id: str, stage: str, reason: str, raw: Any = "") -> None:
        self.rejects.append(Reject.of(self.corpus, source_id, stage, reason, raw))

    def skip(self, step: str, reason: str, affected: int = 0) -> None:
        self.skipped.append(SkippedStep(step, reason, affected))

    def count(self, key: str, n: int = 1) -> None:
        self.stats[key] = self.stats.get(key, 0) + n

    def finish(self) -> BuildResult:
        self.stats["seconds"] = round(time.perf_counter() - self.started, 3)
        self.stats["records"] = len(self.records)
        self.stats["rejects"] = len(self.rejects)
        return self

    def rejects_rows(self) -> list[dict]:
        return [asdict(r) for r in self.rejects]

    def skipped_rows(self) -> list[dict]:
        return [asdict(s) for s in self.skipped]


REJECT_COLUMNS = ("corpus", "source_id", "stage", "reason", "raw")


def rejects_frame(rejects: list[Reject]):
    schema = {c: pl.String for c in REJECT_COLUMNS}
    return (
        pl.DataFrame([asdict(r) for r in rejects], schema=schema, orient="row")
        if rejects
        else pl.DataFrame(schema=schema)
    )


def item_progress(label: str, total: int, sink: Sink | None) -> Progress:
    """A builder's count of the items it has worked through, as lines to ``sink`` (the corpus asset's
    log) and never on the terminal; ``advance()`` per item, ``close()`` for the last line."""
    return Progress(label, total, sinks=(sink,) if sink else (), terminal=False)
