"""The AmbiTab task record and its three access-controlled projections (AmbiTab §3, Fig. 1b).

One :class:`TaskRecord` fixes one interpretation θ of an ambiguous verifiable task (AVT): the
public specification ``x`` (:class:`Spec`), the registered ambiguities with their resolutions
ρ_θ (:class:`Ambiguity`), oracle-only context, the verifier's private assets V_θ and provenance.
Records that share ``x`` and the set of terms share an ``avt_id`` (the bootstrap cluster).

The access boundary is enforced by types, not by convention. Code that talks to a party gets only
that party's projection:

* :class:`AgentView` (``record.agent_view()``; aliases ``AskerView`` / ``SolverView``): the asker
  and the solver may read the visible spec and the question budget — never ambiguities,
  resolutions, withheld evidence or reference SQL. The model forbids extra fields, so nothing can
  be smuggled in by construction.
* :class:`OracleView` (``record.oracle_view()``): the spec, the ambiguities with resolutions, and
  the oracle context; the reference SQL and its segments only when SQL grounding is on (the paper's default: on for
  the unfiltered Bird / EW-Bird oracles, off for the scoped oracles of the other four corpora).
* :class:`VerifierView` (``record.verifier_view()``): the database and the verifier assets.

This is the one record model: the evaluation protocol declares no record types of its own, its
:class:`~pipelines.ambitab.protocol.task.Task` holds exactly these three views.

Serialisation: :meth:`TaskRecord.to_json_line` / :meth:`TaskRecord.from_json_line` (the JSONL
export other teams load) and :meth:`TaskRecord.to_row` / :meth:`TaskRecord.from_row`, a flat
Parquet-friendly row whose nested parts are canonical JSON strings (exact round trip).

Plain Python, no Dagster import.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import unicodedata
from enum import Enum
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, field_validator

RECORD_SCHEMA_VERSION = "1"

CORPORA = ("ambrosia", "ambiqt", "taco", "ew_bird", "bird_interact", "bird")
ENGINES = ("sqlite", "postgresql")
ENGINE_NAMES = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
# Oracles whose prompt sees the reference SQL by default (the "unfiltered" LLM oracle, Table 6).
UNFILTERED_ORACLE_CORPORA = frozenset({"bird", "ew_bird"})
# Clarification budget: m + 3 decisions (the last reserved for stopping), i.e. m + 2 questions.
EXTRA_QUESTIONS = 2


class AmbiguityKind(str, Enum):
    CRITICAL = "critical"
    KNOWLEDGE = "knowledge"
    NON_CRITICAL = "non_critical"  # kept (BIRD-Interact order/limit) but never counted in |Amb|


COUNTED_KINDS = frozenset({AmbiguityKind.CRITICAL, AmbiguityKind.KNOWLEDGE})


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Ambiguity(_Model):
    """One registered gap in the spec, named by its term (ORACLE-only)."""

    amb_id: str
    term: str = Field(min_length=1)
    aliases: list[str] = Field(default_factory=list)
    kind: AmbiguityKind
    type: str = ""  # the source's own label (scope, schema_linking, hint, table, ...)
    resolution: str = Field(min_length=1)  # frozen text the deterministic oracle returns verbatim
    frozen_intent: str | None = None  # the NL reading when the intent itself is the resolution
    sql_snippet: str | None = None
    concepts: list[str] = Field(default_factory=list)  # evidence-derived (Bird / EW-Bird)

    @property
    def counted(self) -> bool:
        return self.kind in COUNTED_KINDS

    @property
    def names(self) -> list[str]:
        return [self.term, *[a for a in self.aliases if a != self.term]]


class Spec(_Model):
    """The public task specification x (VISIBLE to the asker and the solver)."""

    user_query: str = Field(min_length=1)
    sql_engine_name: str  # "SQLite" | "PostgreSQL"
    db_name: str
    db_schema: str  # CREATE TABLE statements + example rows
    column_meanings: dict[str, str] | None = None
    external_knowledge: list[Any] | None = None  # visible entries only (withheld/deleted removed)


class OracleContext(_Model):
    """What only the oracle may read besides the ambiguities."""

    clear_query: str | None = None
    withheld_evidence: list[str] = Field(default_factory=list)
    sql_segments: list[str] = Field(default_factory=list)


class ComparisonPolicy(_Model):
    """How the verifier compares a submitted result with the reference result."""

    order_sensitive: bool = False
    distinct: bool = False
    float_decimals: int | None = None


class VerifierAssets(_Model):
    """The verifier's private assets for θ (VERIFIER-only)."""

    reference_sql: list[str] = Field(min_length=1)  # run in order; SQLite corpora have exactly one
    preprocess_sql: list[str] = Field(default_factory=list)
    clean_up_sql: list[str] = Field(default_factory=list)
    test_cases: list[str] = Field(default_factory=list)
    comparison: ComparisonPolicy = Field(default_factory=ComparisonPolicy)
    executable: bool = True  # False when the database is absent here (structural record)
    skip_reason: str | None = None  # why verification cannot run, when it cannot

    @field_validator("reference_sql", mode="before")
    @classmethod
    def _listify(cls, v):
        return [v] if isinstance(v, str) else v

    @property
    def single_sql(self) -> str | None:
        return self.reference_sql[0] if len(self.reference_sql) == 1 else None


class Provenance(_Model):
    source_ids: dict[str, str] = Field(default_factory=dict)
    build_seed: int | None = None
    filter_outcomes: dict[str, Any] = Field(default_factory=dict)
    alternatives: list[dict[str, Any]] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class TaskRecord(_Model):
    """One interpretation θ of one AVT: (x, Amb, ρ_θ, V_θ) plus provenance."""

    record_id: str
    corpus: str
    split: str = "all"  # train | dev | all | slice_*
    avt_id: str
    interpretation_id: str
    engine: str = "sqlite"
    db_id: str
    db_path: str | None = None
    spec: Spec
    ambiguities: list[Ambiguity] = Field(default_factory=list)
    oracle_context: OracleContext = Field(default_factory=OracleContext)
    verifier: VerifierAssets
    provenance: Provenance = Field(default_factory=Provenance)
    schema_version: str = RECORD_SCHEMA_VERSION

    @field_validator("corpus")
    @classmethod
    def _corpus(cls, v):
        if v not in CORPORA:
            raise ValueError(f"unknown corpus {v!r}; expected one of {CORPORA}")
        return v

    @field_validator("engine")
    @classmethod
    def _engine(cls, v):
        if v not in ENGINES:
            raise ValueError(f"unknown engine {v!r}; expected one of {ENGINES}")
        return v

    @classmethod
    def create(
        cls,
        corpus: str,
        avt_id: str,
        interpretation_id: str,
        *,
        user_query: str,
        db_id: str,
        db_schema: str,
        verifier: VerifierAssets,
        engine: str = "sqlite",
        split: str = "all",
        db_path: str | None = None,
        column_meanings: dict[str, str] | None = None,
        external_knowledge: list[Any] | None = None,
        ambiguities: list[Ambiguity] = (),
        oracle_context: OracleContext | None = None,
        provenance: Provenance | None = None,
    ) -> TaskRecord:
        """The record every corpus conversion builds: the opaque id from ``avt_id`` and
        ``interpretation_id`` (:func:`make_record_id`), the visible spec of ``user_query`` on database
        ``db_id`` with the engine's display name."""
        return cls(
            record_id=make_record_id(corpus, avt_id, interpretation_id),
            corpus=corpus,
            split=split,
            avt_id=avt_id,
            interpretation_id=interpretation_id,
            engine=engine,
            db_id=db_id,
            db_path=db_path,
            spec=Spec(
                user_query=user_query,
                sql_engine_name=ENGINE_NAMES.get(engine, engine),
                db_name=db_id,
                db_schema=db_schema,
                column_meanings=column_meanings,
                external_knowledge=external_knowledge,
            ),
            ambiguities=list(ambiguities),
            oracle_context=oracle_context or OracleContext(),
            verifier=verifier,
            provenance=provenance or Provenance(),
        )

    # ------------------------------------------------------------------ counts and budget

    @property
    def counted_ambiguities(self) -> list[Ambiguity]:
        """Amb: only critical and knowledge ambiguities count [P]."""
        return [a for a in self.ambiguities if a.counted]

    @property
    def n_ambiguities(self) -> int:
        return len(self.counted_ambiguities)

    @property
    def is_control(self) -> bool:
        return self.n_ambiguities == 0

    @property
    def max_questions(self) -> int:
        """m + 2 questions when m = |Amb| > 0; 0 (clarification skipped) for controls."""
        m = self.n_ambiguities
        return m + EXTRA_QUESTIONS if m else 0

    # ------------------------------------------------------------------ projections

    def agent_view(self) -> AgentView:
        return AgentView(
            record_id=self.record_id,
            corpus=self.corpus,
            split=self.split,
            engine=self.engine,
            db_id=self.db_id,
            spec=self.spec,
            max_questions=self.max_questions,
        )

    def oracle_view(self, sql_grounding: bool | None = None) -> OracleView:
        """``sql_grounding=None`` uses the corpus default (unfiltered for Bird / EW-Bird)."""
        grounded = self.corpus in UNFILTERED_ORACLE_CORPORA if sql_grounding is None else sql_grounding
        return OracleView(
            record_id=self.record_id,
            corpus=self.corpus,
            engine=self.engine,
            db_id=self.db_id,
            spec=self.spec,
            ambiguities=self.ambiguities,
            # the segments are SQL too: a scoped (ungrounded) oracle does not get them
            oracle_context=self.oracle_context
            if grounded
            else self.oracle_context.model_copy(update={"sql_segments": []}),
            sql_grounding=grounded,
            reference_sql=list(self.verifier.reference_sql) if grounded else None,
        )

    def verifier_view(self) -> VerifierView:
        return VerifierView(
            record_id=self.record_id,
            corpus=self.corpus,
            engine=self.engine,
            db_id=self.db_id,
            db_path=self.db_path,
            verifier=self.verifier,
        )

    def view(self, party: str, **kw) -> AgentView | OracleView | VerifierView:
        if party in ("asker", "solver", "agent"):
            return self.agent_view()
        if party == "oracle":
            return self.oracle_view(**kw)
        if party == "verifier":
            return self.verifier_view()
        raise ValueError(f"unknown view {party!r}; expected asker, solver, oracle or verifier")

    # ------------------------------------------------------------------ (de)serialisation

    def to_json_line(self) -> str:
        return json.dumps(self.model_dump(mode="json"), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json_line(cls, line: str) -> TaskRecord:
        return cls.model_validate_json(line)

    def to_row(self) -> dict[str, Any]:
        """A flat row: scalar columns for filtering, nested parts as canonical JSON strings."""
        return {
            "record_id": self.record_id,
            "corpus": self.corpus,
            "split": self.split,
            "avt_id": self.avt_id,
            "interpretation_id": self.interpretation_id,
            "engine": self.engine,
            "db_id": self.db_id,
            "db_path": self.db_path,
            "user_query": self.spec.user_query,
            "n_ambiguities": self.n_ambiguities,
            "n_annotations": len(self.ambiguities),
            "terms": [a.term for a in self.ambiguities],
            "executable": self.verifier.executable,
            "spec_json": _canonical(self.spec),
            "ambiguities_json": _canonical(self.ambiguities),
            "oracle_context_json": _canonical(self.oracle_context),
            "verifier_json": _canonical(self.verifier),
            "provenance_json": _canonical(self.provenance),
            "schema_version": self.schema_version,
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> TaskRecord:
        return cls(
            record_id=row["record_id"],
            corpus=row["corpus"],
            split=row["split"],
            avt_id=row["avt_id"],
            interpretation_id=row["interpretation_id"],
            engine=row["engine"],
            db_id=row["db_id"],
            db_path=row.get("db_path"),
            spec=Spec.model_validate_json(row["spec_json"]),
            ambiguities=[Ambiguity.model_validate(a) for a in json.loads(row["ambiguities_json"])],
            oracle_context=OracleContext.model_validate_json(row["oracle_context_json"]),
            verifier=VerifierAssets.model_validate_json(row["verifier_json"]),
            provenance=Provenance.model_validate_json(row["provenance_json"]),
            schema_version=row.get("schema_version") or RECORD_SCHEMA_VERSION,
        )


# ---------------------------------------------------------------------------- projections


class AgentView(_Model):
    """What the asker and the solver may read: the visible spec and the question budget."""

    record_id: str
    corpus: str
    split: str
    engine: str
    db_id: str
    spec: Spec
    max_questions: int  # the paper shows the budget to the asker (m + 2 questions)


AskerView = AgentView
SolverView = AgentView


class OracleView(_Model):
    """What the oracle may read: spec, ambiguities + resolutions, oracle context; SQL if grounded."""

    record_id: str
    corpus: str
    engine: str
    db_id: str
    spec: Spec
    ambiguities: list[Ambiguity]
    oracle_context: OracleContext
    sql_grounding: bool = False
    reference_sql: list[str] | None = None

    @property
    def counted_ambiguities(self) -> list[Ambiguity]:
        return [a for a in self.ambiguities if a.counted]


class VerifierView(_Model):
    """What the verifier may read: the database and its private assets."""

    record_id: str
    corpus: str
    engine: str
    db_id: str
    db_path: str | None
    verifier: VerifierAssets


# ---------------------------------------------------------------------------- ids and text

_WS = re.compile(r"\s+")


def norm_text(s: str) -> str:
    """Lowercase, NFKC, '_' and '-' to space, collapse whitespace (the matcher's norm too)."""
    s = unicodedata.normalize("NFKC", s or "").lower().replace("_", " ").replace("-", " ")
    return _WS.sub(" ", s).strip()


def stable_hash(*parts: Any, length: int = 16) -> str:
    payload = json.dumps(parts, ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:length]


def make_avt_id(corpus: str, user_query: str, db_id: str, terms: list[str]) -> str:
    """hash(norm(user_query), db_id, sorted terms), namespaced by corpus."""
    return f"{corpus}-avt-" + stable_hash(norm_text(user_query), db_id, sorted(norm_text(t) for t in terms))


def make_record_id(corpus: str, avt_id: str, interpretation_id: str) -> str:
    """Opaque on purpose: the id an asker sees must not reveal which reading it is."""
    return f"{corpus}-" + stable_hash(avt_id, interpretation_id, length=12)


def _canonical(obj: Any) -> str:
    if isinstance(obj, list):
        data = [o.model_dump(mode="json") for o in obj]
    else:
        data = obj.model_dump(mode="json")
    return json.dumps(data, ensure_ascii=False, sort_keys=True)


# ---------------------------------------------------------------------------- tables

ROW_COLUMNS = (
    "record_id",
    "corpus",
    "split",
    "avt_id",
    "interpretation_id",
    "engine",
    "db_id",
    "db_path",
    "user_query",
    "n_ambiguities",
    "n_annotations",
    "terms",
    "executable",
    "spec_json",
    "ambiguities_json",
    "oracle_context_json",
    "verifier_json",
    "provenance_json",
    "schema_version",
)


def records_frame(records: list[TaskRecord]):
    """A polars frame of :meth:`TaskRecord.to_row` rows (empty frames keep the schema)."""

    schema = {c: pl.String for c in ROW_COLUMNS}
    schema.update(n_ambiguities=pl.Int64, n_annotations=pl.Int64, executable=pl.Boolean, terms=pl.List(pl.String))
    return (
        pl.DataFrame([r.to_row() for r in records], schema=schema, orient="row")
        if records
        else pl.DataFrame(schema=schema)
    )


def records_from_frame(df) -> list[TaskRecord]:
    return [TaskRecord.from_row(row) for row in df.iter_rows(named=True)]


def write_jsonl(records: list[TaskRecord], path) -> int:
    """Write one record a line, atomically (nothing half-written is left behind)."""

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for r in records:
            fh.write(r.to_json_line() + "\n")
    os.replace(tmp, path)
    return len(records)


def read_jsonl(path) -> list[TaskRecord]:
    """Load an exported JSONL file; a bad line raises with its line number."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                out.append(TaskRecord.from_json_line(line))
            except ValueError as exc:
                raise ValueError(f"{path}:{no}: not a task record ({str(exc).splitlines()[0]})") from exc
    return out
