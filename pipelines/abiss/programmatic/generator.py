"""Programmatic candidate generator: schema- and data-driven NLQ objects, zero LLM calls.

``generate_candidates(db_path)`` reads a database's schema and data
(:mod:`pipelines.abiss.programmatic.schema_analysis`), runs one or more builders per ABISS
subcategory (:mod:`pipelines.abiss.programmatic.builders`), verifies every draft by execution through
the safe executor and returns a :class:`GenerationReport` of :class:`Candidate` records plus, for
each subcategory that produced nothing, the reason (``skipped``).

Verification (a draft failing any check is dropped, never emitted):

* answerable / ambiguous SQL executes through :func:`resources.sql.execute_sql` and
  returns at least one row that is not all NULL / zero;
* the two readings of an ambiguous question return different results, compared as multisets
  of rows (order-insensitive);
* unanswerable questions name something the schema truly lacks: the named attribute or entity
  occurs in no table or column name; for a missing relationship the two tables exist, no join
  path links them (:meth:`SchemaAnalysis.joinable`) and no inclusion dependency in the data does
  (:meth:`SchemaAnalysis.value_linked`).

Output is deterministic for a seed: every random choice comes from ``random.Random`` seeded
with ``f"{seed}|{db_id}|{subcategory}"``; nothing depends on set order or time.

Difficulty comes from the project's one rule, the shared sqlglot relabeller
:func:`pipelines.sqltools.difficulty.relabel_difficulty` (points for joins, subqueries,
aggregation, conditions, ... turned into ``simple`` / ``moderate`` / ``complex`` /
``highly complex``); a candidate without SQL (unanswerable) has no difficulty (``None``).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pipelines.abiss import wellformed
from pipelines.abiss.programmatic import builders as _builders  # noqa: F401  (registers builders)
from pipelines.abiss.programmatic.builders.base import BUILDERS, BuildContext, Draft, same_content
from pipelines.abiss.programmatic.schema_analysis import SchemaAnalysis, analyze
from pipelines.abiss.taxonomy import STYLES, SUBCATEGORIES, Group
from pipelines.abiss.taxonomy import subcategory as _subcategory
from pipelines.abiss.wellformed import Vocabulary
from pipelines.sqltools.difficulty import relabel_difficulty

GENERATOR = "programmatic"
MAX_DRAFTS_PER_SUBCATEGORY = 60  # verification attempts per subcategory before giving up

__all__ = ["Candidate", "GenerationReport", "generate_candidates", "difficulty_of", "GENERATOR"]


@dataclass
class Candidate:
    candidate_id: str
    group_id: str
    db_id: str
    subcategory: str
    group: str
    style: str
    difficulty: str | None
    question: str
    evidence: str | None
    sql: str | None
    hidden_knowledge: str | None
    feedback: str | None
    interpretation_index: int | None
    generator: str
    builder: str
    seed: int

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class GenerationReport:
    db_id: str
    candidates: list[Candidate] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)
    # candidate_id -> what an unanswerable candidate claims the schema lacks (checked)
    absence_claims: dict[str, dict] = field(default_factory=dict)

    @property
    def covered(self) -> list[str]:
        seen = {c.subcategory for c in self.candidates}
        return [s.id for s in SUBCATEGORIES if s.id in seen]

    def to_dict(self) -> dict:
        return {
            "db_id": self.db_id,
            "candidates": [c.to_dict() for c in self.candidates],
            "skipped": dict(self.skipped),
            "attempts": dict(self.attempts),
            "absence_claims": dict(self.absence_claims),
            "covered": self.covered,
        }


# ------------------------------------------------------------------------------ difficulty


def difficulty_of(sql: str | None) -> str | None:
    """The shared SQL difficulty label (:func:`~pipelines.sqltools.difficulty.relabel_difficulty`,
    keyword counting for SQL sqlglot cannot parse); None for no SQL."""
    return relabel_difficulty(sql) if sql else None


# ------------------------------------------------------------------------------ verification


def _informative(rows: list[tuple]) -> bool:
    return any(v is not None and v != 0 and v != "" for r in rows for v in r)


def _multiset(rows: list[tuple]) -> Counter:
    return Counter(tuple(repr(v) for v in r) for r in rows)


def _run_informative(ctx: BuildContext, sql: str, failed: str, empty: str) -> tuple[str | None, list[tuple]]:
    """``(None, rows)`` when ``sql`` runs and returns an informative row, else ``(reason, [])``
    with reason ``f"{failed} (<failure kind>)"`` or ``empty``."""
    res = ctx.run(sql)
    if not res.ok:
        return f"{failed} ({res.kind.value})", []
    if not res.rows or not _informative(res.rows):
        return empty, []
    return None, res.rows


MIN_READING_GAP_ROWS = 2
MIN_READING_GAP_SHARE = 0.15


def reading_gap(rows_a: list[tuple], rows_b: list[tuple]) -> tuple[float, float]:
    """``(gap, base)`` between two readings' results: for two single counts, their difference and the
    larger count; otherwise the size of the multiset symmetric difference and the larger result."""
    if len(rows_a) == len(rows_b) == 1 and len(rows_a[0]) == len(rows_b[0]) == 1:
        x, y = rows_a[0][0], rows_b[0][0]
        if isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool):
            return abs(x - y), max(abs(x), abs(y))
    ma, mb = _multiset(rows_a), _multiset(rows_b)
    return sum(((ma - mb) + (mb - ma)).values()), max(len(rows_a), len(rows_b))


def _too_close(rows_a, rows_b, ma=None, mb=None) -> str | None:
    """Vagueness readings must differ by a meaningful share of rows, not by a handful (thresholds
    637 vs 642): at least MIN_READING_GAP_ROWS rows and MIN_READING_GAP_SHARE of the larger result."""
    gap, base = reading_gap(rows_a, rows_b)
    if gap < MIN_READING_GAP_ROWS or (base and gap < MIN_READING_GAP_SHARE * base):
        return f"readings differ too little ({gap:g} of {base:g})"
    return None


def _vocabulary(a: SchemaAnalysis):
    cached = a.__dict__.get("_wellformed_vocabulary")
    if cached is None:
        names = [t.name for t in a.tables] + [c.name for t in a.tables for c in t.columns]
        values = [str(v) for t in a.tables for c in t.columns for v in c.values[:25] if isinstance(v, str)]
        cached = a.__dict__["_wellformed_vocabulary"] = Vocabulary.build(names, values)
    return cached


def _not_wellformed(draft: Draft, ctx: BuildContext) -> str | None:
    """The well-formedness filter's verdict (step 0 of the cascade) on every record of the draft:
    the generator never emits what the filter would reject (over-long values, ...)."""

    rows = [
        {
            "subcategory": draft.subcategory,
            "style": draft.style,
            "question": draft.question,
            "evidence": draft.evidence,
            "feedback": draft.feedback,
            "sql": draft.sql,
        }
    ]
    if draft.readings:
        rows = [{**rows[0], "sql": r.sql, "hidden_knowledge": r.hidden_knowledge} for r in draft.readings]
    for row in rows:
        defects = wellformed.check(row, _vocabulary(ctx.analysis))
        if defects:
            return f"not well-formed ({defects[0].rule})"
    return None


def _verify(draft: Draft, ctx: BuildContext) -> str | None:
    """None when the draft passes; otherwise a short reason (execution checks first, then the
    well-formedness filter)."""
    why = _verify_execution(draft, ctx)
    return why if why is not None else _not_wellformed(draft, ctx)


def _verify_execution(draft: Draft, ctx: BuildContext) -> str | None:
    if not draft.question or not draft.question.strip():
        return "empty question"
    sub = _subcategory(draft.subcategory)
    a = ctx.analysis
    if sub.group is Group.ANSWERABLE:
        if not draft.sql:
            return "answerable draft without SQL"
        why, _ = _run_informative(ctx, draft.sql, "sql failed", "sql returned no informative rows")
        if why is not None:
            return why
        if sub.has_evidence and not draft.evidence:
            return "missing evidence"
        return None
    if sub.group is Group.AMBIGUOUS:
        if not draft.readings or len(draft.readings) != 2:
            return "ambiguous draft needs exactly two readings"
        outs, raw = [], []
        for r in draft.readings:
            why, rows = _run_informative(ctx, r.sql, "reading sql failed", "a reading returned no informative rows")
            if why is not None:
                return why
            outs.append(_multiset(rows))
            raw.append(rows)
        if outs[0] == outs[1]:
            return "readings return the same result"
        if same_content(raw[0], raw[1]):
            return "readings differ only in projected columns or repeats"
        if sub.id == "lexical_vagueness":
            why = _too_close(raw[0], raw[1], outs[0], outs[1])
            if why is not None:
                return why
        if draft.readings[0].hidden_knowledge == draft.readings[1].hidden_knowledge:
            return "readings share hidden knowledge"
        if sub.has_evidence and not draft.evidence:
            return "missing evidence"
        return None
    # unanswerable
    if not draft.feedback:
        return "unanswerable draft without feedback"
    ab = draft.absence
    if ab is None:
        return "unanswerable draft without an absence claim"
    if ab.kind == "terms":
        if not ab.terms:
            return "absence claim without terms"
        present = [t for t in ab.terms if a.mentions(t)]
        if present:
            return f"schema mentions {present[0]!r}"
        return None
    if ab.kind == "relationship":
        if len(ab.tables) != 2 or any(a.table(t) is None for t in ab.tables):
            return "relationship claim on unknown tables"
        if a.related(*ab.tables):
            return "tables are related"
        if a.joinable(*ab.tables):
            return "a join path links the tables"  # invoice lines → tracks ← playlist tracks → playlists
        if a.value_linked(*ab.tables):
            return "the data links the tables"  # every trip's start day is a weather date
        return None
    if ab.kind == "improper":
        return None
    return f"unknown absence kind {ab.kind!r}"


# ------------------------------------------------------------------------------ records


def _hash(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _records(draft: Draft, db_id: str, seed: int) -> list[Candidate]:
    sub = _subcategory(draft.subcategory)
    base = dict(
        db_id=db_id,
        subcategory=sub.id,
        group=sub.group.value,
        style=draft.style,
        question=draft.question,
        evidence=draft.evidence,
        generator=GENERATOR,
        builder=draft.builder,
        seed=seed,
    )
    if sub.group is Group.AMBIGUOUS:
        group_id = _hash(db_id, sub.id, draft.question, [r.sql for r in draft.readings])
        return [
            Candidate(
                candidate_id=_hash(db_id, sub.id, draft.question, i, r.sql),
                group_id=group_id,
                difficulty=difficulty_of(r.sql),
                sql=r.sql,
                hidden_knowledge=r.hidden_knowledge,
                feedback=None,
                interpretation_index=i,
                **base,
            )
            for i, r in enumerate(draft.readings)
        ]
    cid = _hash(db_id, sub.id, draft.question, None, draft.sql)
    return [
        Candidate(
            candidate_id=cid,
            group_id=cid,
            difficulty=difficulty_of(draft.sql),
            sql=draft.sql,
            hidden_knowledge=None,
            feedback=draft.feedback if sub.group is Group.UNANSWERABLE else None,
            interpretation_index=None,
            **base,
        )
    ]


def _dedupe_key(draft: Draft) -> tuple:
    sqls = tuple(r.sql for r in draft.readings) if draft.readings else (draft.sql,)
    return (" ".join(draft.question.lower().split()), sqls if any(sqls) else draft.feedback)


# ------------------------------------------------------------------------------ meaning


_STOP = frozenset(
    "the a an of me please you can could would like to i need is are what which show list give find return "
    "there how many number count hey so u".split()
)
NEAR_DUPLICATE_SHARE = 0.85


def _frame(question: str) -> frozenset[str]:
    """Content words of a question with its values masked: the wording a reader compares."""
    text = re.sub(r"'[^']*'", " VALUE ", question.lower())
    text = re.sub(r"\d[\d,.]*", " NUMBER ", text)
    return frozenset(re.findall(r"[a-z]+|VALUE|NUMBER", text)) - _STOP


class Meanings:
    """What a database's accepted questions mean, to refuse a second question meaning the same: a
    shared reading (the same SQL), the same unanswerable claim (the same missing terms, the same
    unrelated tables, the same feedback), or the same words up to values (≥ NEAR_DUPLICATE_SHARE)."""

    def __init__(self) -> None:
        self.sqls: set[tuple[str, str]] = set()
        self.claims: set[tuple] = set()
        self.frames: list[tuple[str, frozenset[str]]] = []

    @staticmethod
    def _sqls(draft: Draft) -> list[tuple[str, str]]:
        """Readings keyed by the subcategory's group: an ambiguous question may share one reading
        with an answerable one (that is what makes it ambiguous), not with another ambiguous one."""
        raw = [r.sql for r in draft.readings] if draft.readings else [draft.sql]
        group = _subcategory(draft.subcategory).group.value
        return [(group, " ".join(x.lower().split())) for x in raw if x]

    @staticmethod
    def _claims(draft: Draft) -> list[tuple]:
        ab = draft.absence
        if ab is None or ab.kind == "improper":
            return [("builder", draft.subcategory, draft.builder, draft.question.lower())]
        out = [("feedback", draft.subcategory, draft.feedback)]
        if ab.kind == "terms":
            out.append(("terms", draft.subcategory, tuple(sorted(ab.terms))))
        if ab.kind == "relationship":
            out.append(("tables", draft.subcategory, tuple(sorted(ab.tables))))
        return out

    def repeats(self, draft: Draft) -> str | None:
        if any(x in self.sqls for x in self._sqls(draft)):
            return "shares a reading with an earlier question"
        if any(c in self.claims for c in self._claims(draft)):
            return "claims what an earlier question claims"
        frame = _frame(draft.question)
        for sub, other in self.frames:
            if sub == draft.subcategory and frame and len(frame & other) >= NEAR_DUPLICATE_SHARE * len(frame | other):
                return "near-duplicate wording"
        return None

    def add(self, draft: Draft) -> None:
        self.sqls.update(self._sqls(draft))
        self.claims.update(self._claims(draft))
        self.frames.append((draft.subcategory, _frame(draft.question)))


MAX_DEFERRED = 4  # drafts of an already used template kept waiting for a new one; then taken


def _take(deferred: list[Draft], accepted: list[Draft], meanings: Meanings, limit: int) -> None:
    """Accept waiting drafts (in order) up to ``limit``; the list is emptied."""
    for draft in deferred:
        if len(accepted) >= limit:
            break
        if meanings.repeats(draft) is None:
            meanings.add(draft)
            accepted.append(draft)
    deferred.clear()


# ------------------------------------------------------------------------------ driver


def generate_candidates(
    db_path: str | Path,
    per_subcategory: int = 2,
    seed: int = 0,
    styles: list[str] | tuple[str, ...] | None = None,
    subcategories: list[str] | tuple[str, ...] | None = None,
    db_id: str | None = None,
    analysis: SchemaAnalysis | None = None,
) -> GenerationReport:
    """Verified candidates for every requested subcategory the database supports.

    ``per_subcategory`` counts NLQ objects *questions* (an ambiguous question yields two
    records); ``styles`` defaults to all taxonomy styles, cycled per subcategory from a seeded
    offset; ``subcategories`` defaults to all 13.
    """
    analysis = analysis or analyze(db_path, db_id)
    db_id = analysis.db_id
    style_ids = [s.id for s in STYLES]
    styles = list(styles) if styles else style_ids
    unknown = [s for s in styles if s not in style_ids]
    if unknown:
        raise ValueError(f"unknown style(s) {unknown}; known: {', '.join(style_ids)}")
    wanted = list(subcategories) if subcategories else [s.id for s in SUBCATEGORIES]
    for sid in wanted:
        _subcategory(sid)  # raises KeyError for unknown ids
    report = GenerationReport(db_id=db_id)
    if per_subcategory <= 0:
        return report
    meanings = Meanings()  # one database: no two questions that mean the same (issue #35 item 7)
    for sid in [s.id for s in SUBCATEGORIES if s.id in wanted]:
        ctx = BuildContext(analysis, random.Random(f"{seed}|{db_id}|{sid}"), styles, sid)
        accepted: list[Draft] = []
        deferred: list[Draft] = []  # verified, but of a template already used: taken only if nothing new comes
        failures: Counter = Counter()
        seen: set[tuple] = set()
        attempts = 0
        for name, fn in BUILDERS.get(sid, []):
            try:
                for draft in fn(ctx):
                    attempts += 1
                    why = _verify(draft, ctx)
                    key = _dedupe_key(draft)
                    if why is None and key in seen:
                        why = "duplicate"
                    if why is None:
                        why = meanings.repeats(draft)
                    if why is not None:
                        failures[why] += 1
                    elif any(d.builder == draft.builder for d in accepted) and len(deferred) < MAX_DEFERRED:
                        seen.add(key)
                        deferred.append(draft)
                    else:
                        seen.add(key)
                        meanings.add(draft)
                        accepted.append(draft)
                    if len(deferred) >= MAX_DEFERRED:  # no new template in sight: take what waits
                        _take(deferred, accepted, meanings, per_subcategory)
                    if len(accepted) >= per_subcategory or attempts >= MAX_DRAFTS_PER_SUBCATEGORY:
                        break
            except Exception as exc:  # a builder bug must not sink the other subcategories
                failures[f"builder error in {name}: {type(exc).__name__}: {exc}"] += 1
            if len(accepted) >= per_subcategory or attempts >= MAX_DRAFTS_PER_SUBCATEGORY:
                break
        _take(deferred, accepted, meanings, per_subcategory)
        report.attempts[sid] = attempts
        for d in accepted:
            records = _records(d, db_id, seed)
            report.candidates.extend(records)
            if d.absence is not None:
                for r in records:
                    report.absence_claims[r.candidate_id] = {
                        "kind": d.absence.kind,
                        "terms": list(d.absence.terms),
                        "tables": list(d.absence.tables),
                    }
        if not accepted:
            if not BUILDERS.get(sid):
                report.skipped[sid] = "no builder for this subcategory"
            elif failures:
                top = "; ".join(
                    f"{why} ×{n}" for why, n in sorted(failures.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
                )
                report.skipped[sid] = f"all {attempts} drafts failed verification: {top}"
            else:
                report.skipped[sid] = "; ".join(ctx.reasons) or "the database offers nothing to build on"
    return report
