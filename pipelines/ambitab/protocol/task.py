"""The protocol's typed view of one AmbiTab task record, split by who may read what (spec §1.3).

``Task.from_record`` accepts the corpus job's record (its typed record object, a pydantic model,
or the JSONL dict of spec §1.2) and keeps three parts apart:

- ``spec`` (:class:`Spec`): what the asker and the solver see;
- ``ambiguities`` + ``oracle_context``: what the oracle sees;
- ``verifier`` (:class:`VerifierView`): what only the verifier sees.

Askers are handed a :class:`Spec` and the history, never the ``Task``; that is the boundary.
"""

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

COUNTED_KINDS = ("critical", "knowledge")  # [P] "Only critical and knowledge ambiguities count"


def _get(obj: Any, key: str, default=None):
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _plain(obj: Any) -> Any:
    """A JSON-able plain structure from a dict / dataclass / pydantic model / JSON string."""
    if obj is None:
        return None
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")  # enums as their values
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, str):
        s = obj.strip()
        if s[:1] in "[{":
            try:
                return json.loads(s)
            except json.JSONDecodeError:
                return obj
    return obj


@dataclass(frozen=True)
class Spec:
    """The public specification x: what the asker and solver may read."""

    user_query: str
    sql_engine_name: str = "SQLite"
    db_name: str = ""
    db_schema: str = ""
    column_meanings: Any = None
    external_knowledge: Any = None

    @classmethod
    def from_any(cls, obj: Any) -> "Spec":
        obj = _plain(obj) or {}
        return cls(
            user_query=str(obj.get("user_query") or ""),
            sql_engine_name=str(obj.get("sql_engine_name") or "SQLite"),
            db_name=str(obj.get("db_name") or ""),
            db_schema=str(obj.get("db_schema") or ""),
            column_meanings=_plain(obj.get("column_meanings")),
            external_knowledge=_plain(obj.get("external_knowledge")),
        )

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Ambiguity:
    amb_id: str
    term: str
    kind: str = "critical"
    aliases: tuple[str, ...] = ()
    resolution: str = ""
    frozen_intent: str | None = None
    sql_snippet: str | None = None
    concepts: tuple[str, ...] = ()
    type: str | None = None

    @property
    def counts(self) -> bool:
        return self.kind in COUNTED_KINDS

    @property
    def names(self) -> tuple[str, ...]:
        return (self.term, *self.aliases)

    @classmethod
    def from_any(cls, obj: Any, index: int) -> "Ambiguity":
        obj = _plain(obj) or {}
        return cls(
            amb_id=str(obj.get("amb_id") or f"a{index}"),
            term=str(obj.get("term") or ""),
            kind=str(obj.get("kind") or "critical"),
            aliases=tuple(str(a) for a in (obj.get("aliases") or ()) if a),
            resolution=str(obj.get("resolution") or ""),
            frozen_intent=obj.get("frozen_intent"),
            sql_snippet=obj.get("sql_snippet"),
            concepts=tuple(str(c) for c in (obj.get("concepts") or ()) if c),
            type=obj.get("type"),
        )


@dataclass(frozen=True)
class Comparison:
    order_sensitive: bool = False
    distinct: bool = False
    float_decimals: int | None = None


@dataclass(frozen=True)
class VerifierView:
    reference_sql: tuple[str, ...]
    preprocess_sql: tuple[str, ...] = ()
    clean_up_sql: tuple[str, ...] = ()
    test_cases: tuple[str, ...] = ()
    comparison: Comparison = field(default_factory=Comparison)
    executable: bool = True
    skip_reason: str | None = None

    @classmethod
    def from_any(cls, obj: Any) -> "VerifierView":
        obj = _plain(obj) or {}

        def strs(v) -> tuple[str, ...]:
            v = _plain(v)
            if v is None:
                return ()
            if isinstance(v, str):
                return (v,) if v.strip() else ()
            return tuple(str(x) for x in v if x)

        comp = _plain(obj.get("comparison")) or {}
        return cls(
            reference_sql=strs(obj.get("reference_sql")),
            preprocess_sql=strs(obj.get("preprocess_sql")),
            clean_up_sql=strs(obj.get("clean_up_sql")),
            test_cases=strs(obj.get("test_cases")),
            comparison=Comparison(
                order_sensitive=bool(comp.get("order_sensitive") or False),
                distinct=bool(comp.get("distinct") or False),
                float_decimals=comp.get("float_decimals"),
            ),
            executable=bool(obj.get("executable", True)),
            skip_reason=obj.get("skip_reason"),
        )


@dataclass(frozen=True)
class Task:
    record_id: str
    corpus: str
    avt_id: str
    db_id: str
    db_path: str | None
    engine: str
    spec: Spec
    ambiguities: tuple[Ambiguity, ...]
    oracle_context: dict
    verifier: VerifierView
    split: str = "all"
    interpretation_id: str | None = None

    @property
    def amb(self) -> tuple[Ambiguity, ...]:
        """The counted set Amb (critical and knowledge kinds)."""
        return tuple(a for a in self.ambiguities if a.counts)

    @property
    def terms(self) -> tuple[str, ...]:
        return tuple(a.term for a in self.amb)

    @classmethod
    def from_record(cls, rec: Any) -> "Task":
        """From a :class:`pipelines.ambitab.record.TaskRecord` (through its agent / oracle /
        verifier projections), a record row (``to_row``), or a JSONL-shaped dict."""
        if isinstance(rec, Task):
            return rec
        if isinstance(rec, dict) and "spec_json" in rec:
            from pipelines.ambitab.record import TaskRecord

            rec = TaskRecord.from_row(rec)
        if hasattr(rec, "agent_view") and hasattr(rec, "oracle_view"):
            agent, oracle, verifier = rec.agent_view(), rec.oracle_view(sql_grounding=True), rec.verifier_view()
            return cls(
                record_id=rec.record_id, corpus=rec.corpus, avt_id=rec.avt_id, db_id=rec.db_id,
                db_path=verifier.db_path, engine=rec.engine, spec=Spec.from_any(agent.spec),
                ambiguities=tuple(Ambiguity.from_any(a, i) for i, a in enumerate(oracle.ambiguities)),
                oracle_context=_plain(oracle.oracle_context) or {},
                verifier=VerifierView.from_any(verifier.verifier), split=rec.split,
                interpretation_id=rec.interpretation_id,
            )
        if hasattr(rec, "model_dump") and not isinstance(rec, dict):
            rec = rec.model_dump(mode="json")
        elif dataclasses.is_dataclass(rec) and not isinstance(rec, type):
            rec = dataclasses.asdict(rec)
        ambs = _plain(_get(rec, "ambiguities")) or []
        return cls(
            record_id=str(_get(rec, "record_id")),
            corpus=str(_get(rec, "corpus") or ""),
            avt_id=str(_get(rec, "avt_id") or _get(rec, "record_id")),
            db_id=str(_get(rec, "db_id") or ""),
            db_path=_get(rec, "db_path"),
            engine=str(_get(rec, "engine") or "sqlite"),
            spec=Spec.from_any(_get(rec, "spec")),
            ambiguities=tuple(Ambiguity.from_any(a, i) for i, a in enumerate(ambs)),
            oracle_context=_plain(_get(rec, "oracle_context")) or {},
            verifier=VerifierView.from_any(_get(rec, "verifier")),
            split=str(_get(rec, "split") or "all"),
            interpretation_id=_get(rec, "interpretation_id"),
        )


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
