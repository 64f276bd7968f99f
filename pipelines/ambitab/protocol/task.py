"""The protocol's handle on one AmbiTab task record: the record's three views, kept apart (spec §1.3).

There is one record model, :mod:`pipelines.ambitab.record`; the protocol declares no types of its
own. ``Task.from_record`` takes a :class:`~pipelines.ambitab.record.TaskRecord` (or its flat row,
or its JSONL dict) and keeps only its projections:

- ``agent`` (:class:`~pipelines.ambitab.record.AgentView`): what the asker and the solver may read;
  ``task.spec`` is its :class:`~pipelines.ambitab.record.Spec`;
- ``oracle`` (:class:`~pipelines.ambitab.record.OracleView`, grounded: each oracle decides by its
  scope what its prompts show): the ambiguities with their resolutions and the oracle context;
- ``verifier_view`` (:class:`~pipelines.ambitab.record.VerifierView`): the database and the
  verifier's private assets (``task.verifier``).

Askers are handed a :class:`~pipelines.ambitab.record.Spec` and the history, never the ``Task``;
that is the boundary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipelines.ambitab.record import (
    AgentView,
    Ambiguity,
    OracleContext,
    OracleView,
    Spec,
    TaskRecord,
    VerifierAssets,
    VerifierView,
)


@dataclass(frozen=True)
class Task:
    agent: AgentView
    oracle: OracleView
    verifier_view: VerifierView
    avt_id: str
    interpretation_id: str

    @classmethod
    def from_record(cls, rec: Any) -> Task:
        """From a :class:`~pipelines.ambitab.record.TaskRecord`, a record row (``to_row``) or a
        JSONL dict (``to_json_line``), through the record's agent / oracle / verifier projections."""
        if isinstance(rec, Task):
            return rec
        if isinstance(rec, dict):
            rec = TaskRecord.from_row(rec) if "spec_json" in rec else TaskRecord.model_validate(rec)
        if not isinstance(rec, TaskRecord):
            raise TypeError(f"not an AmbiTab task record: {type(rec).__name__}")
        return cls(
            agent=rec.agent_view(),
            oracle=rec.oracle_view(sql_grounding=True),
            verifier_view=rec.verifier_view(),
            avt_id=rec.avt_id,
            interpretation_id=rec.interpretation_id,
        )

    # identity (the agent view carries it; every view agrees)

    @property
    def record_id(self) -> str:
        return self.agent.record_id

    @property
    def corpus(self) -> str:
        return self.agent.corpus

    @property
    def split(self) -> str:
        return self.agent.split

    @property
    def engine(self) -> str:
        return self.agent.engine

    @property
    def db_id(self) -> str:
        return self.agent.db_id

    @property
    def db_path(self) -> str | None:
        return self.verifier_view.db_path

    # each party's part

    @property
    def spec(self) -> Spec:
        return self.agent.spec

    @property
    def ambiguities(self) -> list[Ambiguity]:
        return self.oracle.ambiguities

    @property
    def oracle_context(self) -> OracleContext:
        return self.oracle.oracle_context

    @property
    def verifier(self) -> VerifierAssets:
        return self.verifier_view.verifier

    @property
    def amb(self) -> tuple[Ambiguity, ...]:
        """The counted set Amb (critical and knowledge kinds)."""
        return tuple(self.oracle.counted_ambiguities)

    @property
    def terms(self) -> tuple[str, ...]:
        return tuple(a.term for a in self.amb)


def select_tasks(tasks, split: str | None = None, limit: int | None = None) -> list[Task]:
    """Records of ``split`` (all when None); with ``limit``, whole AVTs in AVT-id order until at
    least ``limit`` records are taken (the readings of one AVT stay together)."""
    chosen = [t for t in tasks if split is None or t.split == split]
    if limit is None:
        return chosen
    by_avt: dict[str, list[Task]] = {}
    for t in chosen:
        by_avt.setdefault(t.avt_id, []).append(t)
    out: list[Task] = []
    for avt in sorted(by_avt):
        if len(out) >= limit:
            break
        out.extend(by_avt[avt])
    return out
