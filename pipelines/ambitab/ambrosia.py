"""AmbiTab-Ambrosia (deterministic, no LLM; AmbiTab §3, App. B).

Source: the Ambrosia resplit test file (``ambrosia/ambrosia_resplit_test.jsonl``), ambiguous
questions only (scope, attachment, vague). Steps:

1. Each annotated reading (one gold SQL of an ambiguous row) becomes one record; the readings of
   one question form one AVT (2 readings for scope / attachment, 3 for vague).
2. **Native intent**: the reading's gold SQL matches exactly one *unambiguous* row on the same
   database by normalised SQL; that row's question is the frozen intent, and the resolution is
   the intent verbatim (the deterministic-intent oracle returns it). A reading with no or several
   matches is rejected (the upstream file gives exactly one for all 309 readings).
3. **Term** [I] (``concepts.json`` annotations are not public), see :func:`derive_term`:
   scope: the quantifier phrase ("each/every/all <noun>"); attachment: the modifier whose literal
   the readings attach differently; vague: the question word aligned with the columns that differ
   between readings, else the head noun.
4. Every reading's SQL executes on the database (else the question is rejected with the error).
   Whether a question's readings give pairwise different results (BIRD set comparator) is
   recorded in ``provenance.filter_outcomes``; the paper applies no such filter to Ambrosia, so
   the 2 local questions whose readings coincide on the data are kept and counted.
5. **Slice** [I]: a database-disjoint train/test slice, whole databases greedily drawn per
   ambiguity type (seeded shuffle) until the test share reaches 20% of that type's records; the
   record's ``split`` is ``slice_test`` or ``slice_train`` (the full corpus is every record).

Databases: ``ambrosia/databases/<type>/<Domain>/<name>/<name>.sqlite``, opened read-only in place
(the verifier never writes them). Questions whose database failed to rebuild are rejected with the
rebuild error from ``REBUILD_FAILURES.json``.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import defaultdict
from pathlib import Path

import sqlglot
from sqlglot import exp

from pipelines.ambitab.build import BuildResult, item_progress
from pipelines.ambitab.comparison import results_match
from pipelines.ambitab.record import (
    Ambiguity,
    AmbiguityKind,
    OracleContext,
    Provenance,
    TaskRecord,
    VerifierAssets,
    make_avt_id,
)
from pipelines.ambitab.sources import iter_json_rows, read_json, require_file, schema_text, sql_segments
from resources.sql import execute_sql

CORPUS = "ambrosia"
SOURCE = Path("ambrosia") / "ambrosia_resplit_test.jsonl"
DB_ROOT = Path("ambrosia") / "databases"
REQUIRED_KEYS = ("db_file", "question", "is_ambiguous", "ambig_type", "gold_queries")
TYPES = ("scope", "attachment", "vague")
TEST_SHARE = 0.2
DEFAULT_SEED = 0
EXEC_TIMEOUT_S = 30.0  # the verifier's timeout


def normalize_sql(sql: str) -> str:
    return " ".join(sql.replace(";", " ").split()).lower()


def db_path_for(data_root: Path, db_file: str) -> Path:
    """``data/<type>/...`` in the source maps to ``databases/<type>/...`` here."""
    rel = db_file[len("data/") :] if db_file.startswith("data/") else db_file
    return data_root / DB_ROOT / rel


# ------------------------------------------------------------------------------------- terms

_QUANTIFIER = re.compile(r"\b(each|every|all)\s+((?:[A-Za-z][\w'-]*\s*){1,3})", re.I)
_STOP = {
    "of",
    "the",
    "a",
    "an",
    "in",
    "on",
    "at",
    "to",
    "for",
    "with",
    "by",
    "from",
    "and",
    "or",
    "uses",
    "use",
    "has",
    "have",
    "is",
    "are",
    "do",
    "does",
    "that",
    "who",
    "which",
    "we",
    "i",
    "there",
    "can",
    "offer",
    "offers",
    "work",
    "works",
    "show",
    "their",
    "them",
    "me",
    "you",
}
_HEAD_SKIP = {
    "what",
    "which",
    "who",
    "show",
    "list",
    "give",
    "find",
    "tell",
    "me",
    "is",
    "are",
    "the",
    "a",
    "an",
    "all",
    "of",
    "do",
    "does",
    "did",
    "i",
    "we",
    "you",
    "there",
    "how",
    "many",
    "much",
    "was",
    "were",
    "be",
    "please",
    "provide",
    "display",
    "get",
    "return",
    "name",
    "names",
    "my",
    "our",
    "in",
    "for",
    "need",
    "can",
    "could",
    "would",
    "should",
    "to",
    "about",
}
_WORD = re.compile(r"[A-Za-z$][\w$'-]*")
_LITERAL = re.compile(r"'([^']*)'|\"([^\"]*)\"|\b(\d+(?:\.\d+)?)\b")


def _phrase_after_quantifier(question: str) -> str | None:
    m = _QUANTIFIER.search(question)
    if not m:
        return None
    words = []
    for w in m.group(2).split():
        w = w.strip(" ?.,;:!()")
        if not w or w.lower() in _STOP:
            break
        words.append(w)
        if len(words) == 2:
            break
    return f"{m.group(1)} {' '.join(words)}".strip() if words else None


def _literals(sql: str) -> list[str]:
    out = []
    for m in _LITERAL.finditer(sql):
        lit = next(g for g in m.groups() if g is not None)
        if lit and lit not in out:
            out.append(lit)
    return out


def _attachment_term(question: str, readings: list[str]) -> tuple[str | None, list[str]]:
    """The modifier carrying a literal of the readings that the question mentions."""
    q_low = question.lower()
    # the modifier's literal closes the condition list ("(A OR B) AND <modifier>"), so scan from the end
    for lit in reversed(_literals(readings[0])):
        if len(lit) < 2 and not lit.isdigit():
            continue
        pos = q_low.find(lit.lower())
        if pos < 0:
            continue
        # the clause around the literal: from the last relative word before it to the clause end
        start = max(
            q_low.rfind(w, 0, pos)
            for w in (" that ", " who ", " which ", " with ", " in ", " from ", " at ", " for ", " located ", " whose ")
        )
        end_match = re.search(r"[.?,;!]| and | or ", q_low[pos:])
        end = pos + (end_match.start() if end_match else len(q_low) - pos)
        if start >= 0 and pos - start < 40:
            term = question[start + 1 : end].strip()
        else:  # a pre-modifier ("Spanish-speaking servers", "$150 wellness programs")
            tok = re.search(r"[\w$.-]+", question[max(0, q_low.rfind(" ", 0, pos) + 1) :])
            term = tok.group(0).strip(".") if tok else lit
        return term or lit, [lit]
    return None, []


def _columns(sql: str) -> set[str]:
    try:
        return {c.name.lower() for c in sqlglot.parse_one(sql, read="sqlite").find_all(exp.Column)}
    except Exception:  # noqa: BLE001 - unparseable: no column evidence
        return set()


def _stem(w: str) -> str:
    w = w.lower()
    for suf in ("ies", "es", "s"):
        if w.endswith(suf) and len(w) > len(suf) + 2:
            return w[: -len(suf)] + ("y" if suf == "ies" else "")
    return w


def _head_noun(question: str) -> str | None:
    words = _WORD.findall(question)
    if words and words[0].lower() == "who":  # "Who staged ...": the person is the vague part
        return "who"
    for w in words:
        if w.lower() not in _HEAD_SKIP:
            return w.strip("'")
    return None


def _vague_term(question: str, readings: list[str]) -> str | None:
    cols = [_columns(r) for r in readings]
    differing = set().union(*cols) - set.intersection(*cols) if cols else set()
    parts = {_stem(p) for c in differing for p in re.split(r"[_\s]+", c) if len(p) > 2}
    for w in _WORD.findall(question):
        if _stem(w) in parts and w.lower() not in _HEAD_SKIP:
            return w
    return _head_noun(question)


def derive_term(question: str, ambig_type: str, readings: list[str]) -> tuple[str, list[str]]:
    """(term, aliases) for one ambiguous question [I]; falls back to the head noun."""
    term, aliases = None, []
    if ambig_type == "scope":
        term = _phrase_after_quantifier(question)
        if term:
            aliases = [term.split(" ", 1)[1]] if " " in term else []
    elif ambig_type == "attachment":
        term, aliases = _attachment_term(question, readings)
    elif ambig_type == "vague":
        term = _vague_term(question, readings)
    term = term or _head_noun(question) or ambig_type
    return term, [a for a in aliases if a and a.lower() != term.lower()]


# ------------------------------------------------------------------------------------- slice


def assign_slice(db_records: dict[str, tuple[str, int]], seed: int, share: float = TEST_SHARE) -> set[str]:
    """Database-disjoint test slice: per type, whole DBs in seeded order until ``share`` is reached.

    ``db_records`` maps db key -> (ambiguity type, records on it). Returns the test DB keys.
    """
    test: set[str] = set()
    by_type: dict[str, list[str]] = defaultdict(list)
    for db, (t, _) in sorted(db_records.items()):
        by_type[t].append(db)
    for t, dbs in sorted(by_type.items()):
        total = sum(db_records[d][1] for d in dbs)
        target = share * total
        random.Random(f"{seed}:{t}").shuffle(dbs)
        taken = 0
        for db in dbs:
            if taken >= target:
                break
            n = db_records[db][1]
            # skip a DB that would overshoot further than stopping short would undershoot
            if taken + n - target > target - taken and taken > 0:
                continue
            test.add(db)
            taken += n
    return test


# ------------------------------------------------------------------------------------- build


def build(data_root: Path, seed: int = DEFAULT_SEED, limit: int | None = None, progress=None) -> BuildResult:
    """Convert the resplit test file under ``data_root`` into task records (see module doc)."""
    result = BuildResult(CORPUS, stats={"seed": seed})
    src = require_file(data_root / SOURCE, "Ambrosia resplit test file")
    failures = {}
    fpath = data_root / DB_ROOT / "REBUILD_FAILURES.json"
    if fpath.is_file():
        failures = {f["db_file"]: f["error"] for f in read_json(fpath)}

    ambiguous, intents = [], defaultdict(list)  # intents[(db_file, norm sql)] -> questions
    for sid, row in iter_json_rows(src, result, REQUIRED_KEYS):
        if row["is_ambiguous"]:
            ambiguous.append((sid, row))
        else:
            for sql in row["gold_queries"]:
                intents[(row["db_file"], normalize_sql(sql))].append(row["question"])
    result.stats["ambiguous_questions"] = len(ambiguous)
    result.stats["readings"] = sum(len(r["gold_queries"]) for _, r in ambiguous)
    if limit is not None:
        ambiguous = ambiguous[:limit]

    tick = item_progress("ambrosia questions", len(ambiguous), progress)
    pending: list[tuple[str, dict, list[TaskRecord]]] = []
    for sid, row in ambiguous:
        tick.advance()
        recs = _convert_question(data_root, sid, row, intents, failures, result, seed)
        if recs:
            pending.append((row["db_file"], row, recs))
    tick.close()

    db_records = {}
    for db_file, row, recs in pending:
        t, n = db_records.get(db_file, (row["ambig_type"], 0))
        db_records[db_file] = (t, n + len(recs))
    test_dbs = assign_slice(db_records, seed)
    for db_file, _, recs in pending:
        split = "slice_test" if db_file in test_dbs else "slice_train"
        result.records.extend(r.model_copy(update={"split": split}) for r in recs)
    result.stats["slice_test_records"] = sum(r.split == "slice_test" for r in result.records)
    result.stats["slice_test_dbs"] = len(test_dbs)
    return result.finish()


def neutral_db_name(db_file: str) -> str:
    """A database name without the upstream ambiguity-type label (issue 20): every upstream name
    starts with it (``scope_*``, ``attachment_*``, ``vague_*``), a side channel to the asker. The
    domain folder plus a short hash of the source path: stable, distinct per database, and saying
    nothing about the type. The original stays in ``provenance.source_ids`` and the verifier's
    ``db_path``."""

    parts = Path(db_file).parts
    domain = parts[2] if len(parts) > 3 else "db"
    slug = re.sub(r"[^0-9a-z]+", "_", domain.lower()).strip("_") or "db"
    return f"{slug}_{hashlib.sha256(db_file.encode()).hexdigest()[:8]}"


def _convert_question(data_root, sid, row, intents, failures, result, seed) -> list[TaskRecord]:
    question, t, db_file, readings = row["question"], row["ambig_type"], row["db_file"], row["gold_queries"]
    source_id = f"{db_file}#{sid}"
    if t not in TYPES:
        result.reject(source_id, "parse", f"unknown ambig_type {t!r} (expected {TYPES})", row)
        return []
    if not isinstance(readings, list) or len(readings) < 2 or not all(isinstance(s, str) for s in readings):
        result.reject(source_id, "parse", "an ambiguous question needs at least two gold SQL readings", row)
        return []
    db_path = db_path_for(data_root, db_file)
    if not db_path.is_file():
        why = failures.get(db_file, "database file not found")
        result.reject(source_id, "database", f"database {db_path.name} missing: {why}", row)
        return []
    try:
        schema = schema_text(db_path)
    except Exception as exc:  # noqa: BLE001 - any unusable database is a reject, not a crash
        result.reject(source_id, "database", f"cannot open {db_path.name}: {exc}", row)
        return []

    natives = []
    for sql in readings:
        matches = sorted(set(intents.get((db_file, normalize_sql(sql)), [])))
        if len(matches) != 1:
            result.reject(
                source_id,
                "intent",
                f"reading matches {len(matches)} unambiguous rows (need exactly one): {' '.join(sql.split())[:120]}",
                row,
            )
            return []
        natives.append(matches[0])

    outcomes = []
    for i, sql in enumerate(readings):
        res = execute_sql(db_path, sql, timeout_s=EXEC_TIMEOUT_S)
        if not res.ok:
            result.reject(source_id, "execute", f"reading {i} fails: {res.one_line()}", row)
            return []
        outcomes.append(res)
    # The paper applies no "readings differ" filter to Ambrosia: equal results are recorded, not dropped.
    equal_pairs = [
        [i, j]
        for i in range(len(outcomes))
        for j in range(i + 1, len(outcomes))
        if results_match(outcomes[i], outcomes[j])
    ]
    if equal_pairs:
        result.count("questions_with_equal_readings")

    term, aliases = derive_term(question, t, readings)
    db_id = neutral_db_name(db_file)  # the asker reads this name: no type label in it
    avt_id = make_avt_id(CORPUS, question, db_path.stem, [term])  # ids stay those of the original name
    records = []
    for i, (sql, intent) in enumerate(zip(readings, natives)):
        interp = f"r{i}"
        records.append(
            TaskRecord.create(
                CORPUS,
                avt_id,
                interp,
                user_query=question,
                db_id=db_id,
                db_schema=schema,
                db_path=str(db_path.resolve()),
                ambiguities=[
                    Ambiguity(
                        amb_id=f"{avt_id}-a0",
                        term=term,
                        aliases=aliases,
                        kind=AmbiguityKind.CRITICAL,
                        type=t,
                        resolution=intent,
                        frozen_intent=intent,
                    )
                ],
                oracle_context=OracleContext(clear_query=intent, sql_segments=sql_segments(sql)),
                verifier=VerifierAssets(reference_sql=[sql]),
                provenance=Provenance(
                    source_ids={"db_file": db_file, "db_name": db_path.stem, "row": sid, "reading": str(i)},
                    build_seed=seed,
                    filter_outcomes={
                        "executes": True,
                        "pairwise_distinct": not equal_pairs,
                        "equal_reading_pairs": equal_pairs,
                        "native_intent_matches": 1,
                        "rows": outcomes[i].row_count,
                    },
                ),
            )
        )
    return records
