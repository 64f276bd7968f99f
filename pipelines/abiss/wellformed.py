"""Well-formedness filter: deterministic, cheap checks that run before any council vote.

The paper's cascade (§4.2) spends council calls on every candidate; a tiny or careless generator
produces items that no vote should be needed for: a question that is literally the output
schema's field description, a copied prompt example, ``{{answer}}``, 2,000 characters of one
phrase repeated, an ``INSERT INTO`` where a question belongs. This module rejects those with a
named rule and the offending text, like any stage decision (``reason`` starts with the rule's
code, so ``GROUP BY split_part(reason, ':', 1)`` gives the rejections per rule).

Rules (:data:`RULES`), each applied to the text fields a candidate has (question, evidence,
hidden knowledge, feedback):

* ``missing_text`` — no question; an ambiguous reading without hidden knowledge; an unanswerable
  question without feedback; an evidence subcategory without evidence;
* ``placeholder`` — template placeholders left in (``{{answer}}``, ``{description}``,
  ``<table_name>``, ``[insert ...]``, ``TODO``, ``lorem ipsum``);
* ``instruction_echo`` — the text is (or contains) an instruction or a field description of the
  generation prompt ("The natural-language question.", "Return JSON ...");
* ``prompt_example_copy`` — the question (four words or more) is a near-copy (similarity ≥ 0.9 after
  normalisation, by words) of one of the taxonomy examples every generation prompt shows;
* ``degenerate_repetition`` — a run of one character, or a text whose word 3-grams are mostly
  repeats (≥ 8 words and under half of them distinct), or one word making up > 40 % of ≥ 12;
* ``length`` — a question over 300 characters / 60 words or under 3 words (concise-style and
  improper questions may be a single word); evidence or hidden knowledge over 600 characters;
  feedback over 1,200 characters or under 4 words;
* ``sql_in_question`` — SQL or DML in the question (``SELECT … FROM``, ``INSERT INTO``,
  ``DELETE FROM`` …), except for improper questions, which may ask to modify data;
* ``no_schema_mention`` — an answerable or ambiguous question none of whose content words
  matches a table or column name, a sample value of the schema, or a literal of its own SQL;
* ``feedback_names_nothing`` — feedback of a missing-entity / relationship / external-knowledge
  question that names nothing of the schema and nothing of the question.

Word matching is deliberately lenient (case-insensitive, naive singular, a shared 5-letter
prefix: "enrolled" matches ``enrollment``) so synonyms of the schema's words rarely trip the
schema rule; a question that shares *no* word with the schema is not about this database.

The filter is step 0 of the cascade (``s00_wellformedness``); ``CascadeSettings.wellformedness``
turns it off for paper-exact runs (every candidate then passes with ``applies = False``).
"""

from __future__ import annotations

import hashlib
import re
import zlib
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import cache
from pathlib import Path

from pipelines.abiss.taxonomy import STYLES, SUBCATEGORIES, Group, subcategory
from pipelines.sqltools.identifiers import identifier_words


def _source_version() -> str:
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]


# the s00 asset's code version: editing a rule marks the filter step and its downstream stale
VERSION = _source_version()

RULES = (
    "missing_text",
    "placeholder",
    "instruction_echo",
    "prompt_example_copy",
    "degenerate_repetition",
    "length",
    "sql_in_question",
    "no_schema_mention",
    "feedback_names_nothing",
)

QUESTION_MAX_CHARS, QUESTION_MAX_WORDS, QUESTION_MIN_WORDS = 300, 60, 3
NOTE_MAX_CHARS = 600  # evidence, hidden knowledge
FEEDBACK_MAX_CHARS, FEEDBACK_MIN_WORDS = 1200, 4
COPY_SIMILARITY = 0.9

_WORD = re.compile(r"[A-Za-z][A-Za-z']*|\d+(?:\.\d+)?")
_PLACEHOLDER = re.compile(
    r"\{\{[^{}]*\}\}|\{[A-Za-z_][A-Za-z0-9_]*\}|<\s*[A-Za-z_][A-Za-z0-9_ ]{0,30}\s*>|"
    r"\[\s*(?:insert|your|placeholder|fill|add|enter)\b[^\]]*\]|\bTODO\b|\bTBD\b|lorem ipsum|\bxxx+\b",
    re.IGNORECASE,
)
_SQL = re.compile(
    r"\bselect\b[^.?!]{0,200}?\bfrom\s+[\w\"`\[]|\binsert\s+into\b|\bupdate\s+[\w\"`]+\s+set\b|\bdelete\s+from\b|"
    r"\b(?:create|drop|alter)\s+(?:table|view|index|database)\b|\bwhere\s+[\w.\"]+\s*(?:=|<>|!=|>=|<=)\s*\S",
    re.IGNORECASE,
)
_CHAR_RUN = re.compile(r"(.)\1{9,}")
# phrases of the generation prompt and its output schemas that never belong in a question
ECHO_PHRASES = (
    "natural-language question",
    "natural language question",
    "return json",
    "json matching",
    "json object",
    "output schema",
    "the requested schema",
    "hidden knowledge",
    "target sql difficulty",
    "distinguishing characteristics",
    "disambiguation information",
    "write one natural",
    "as an ai",
    "i cannot generate",
    "here is the question",
    "here is a question",
)

STOPWORDS = frozenset(
    """
a an the and or but if then else of in on at to for from by with without about into onto over under
between among per as is are was were be been being am do does did done have has had having can could
would should will shall may might must not no nor so than that this these those there here their
them they it its it's he she his her we our you your i me my mine what which who whom whose when where
why how all any each every some many much more most few less least other another same such only
own just also very too please kindly list show give find return display tell need want like would
looking see get provide retrieve obtain know count number total average mean sum value values
record records row rows entry entries table tables column columns database data field fields detail
details information info question answer sql query schema thanks hey let's lets u ur pull up got
us one ones whose ever exactly roughly quick real gimme can't don't what're yes ok okay
""".split()
)
_GENERIC_FEEDBACK = STOPWORDS | frozenset(
    "cannot answered answerable unanswerable missing exist exists stored store stores available ask "
    "administrator admin add added user users knowledge base external because since contain contains "
    "containing possible impossible".split()
)


@dataclass(frozen=True)
class Defect:
    rule: str
    field: str
    detail: str

    def text(self) -> str:
        return f"{self.rule}: {self.field} {self.detail}"


# ------------------------------------------------------------------------------ words


def words(text: str | None) -> list[str]:
    return [w.lower().strip("'") for w in _WORD.findall(text or "")]


def stem(word: str) -> str:
    """Naive singular, lower case: 'Students' → 'student', 'classes' → 'class', 'cities' → 'city'."""
    w = word.lower().strip("'")
    if w.endswith("'s"):
        w = w[:-2]
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 4 and w.endswith(("sses", "shes", "ches", "xes")):
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


def stem_variants(word: str) -> set[str]:
    """The naive singular plus the alternative an "-ies"/"-es" ending allows (movies → movy, movie)."""
    w = word.lower().strip("'")
    out = {stem(w)}
    if len(w) > 4 and w.endswith(("ies", "es")):
        out.add(w[:-1])
    return out


def content_stems(text: str | None) -> set[str]:
    return {
        v for w in words(text) if len(w) >= 3 and w not in STOPWORDS and not w[0].isdigit() for v in stem_variants(w)
    }


def _split_identifier(name: str) -> list[str]:
    return [w.lower() for w in identifier_words(name) if w.isalpha()]


@dataclass(frozen=True)
class Vocabulary:
    """Stems of a database's table/column names and sample values (for the schema rules)."""

    stems: frozenset[str]

    @classmethod
    def build(cls, names: list[str] = (), texts: list[str] = ()) -> Vocabulary:
        out: set[str] = set()
        for n in names:
            out.update(v for w in _split_identifier(n) if len(w) >= 3 for v in stem_variants(w))
            out.update(stem_variants(n.replace("_", "")))
        for t in texts:
            for tok in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", t or ""):
                out.update(v for w in _split_identifier(tok) if len(w) >= 3 for v in stem_variants(w))
                out.update(stem_variants(tok.lower()))
        return cls(frozenset(s for s in out if len(s) >= 3))

    @classmethod
    def of_database(cls, db_path: str | None, schema_context: str | None = None) -> Vocabulary:
        """Names from the database itself (complete even when the prompt's context was trimmed) and
        every word of the schema context (its DDL and sample rows)."""
        names: list[str] = []
        if db_path:
            try:
                from resources.catalog import inspect_database  # lazy: only with a database file

                info = inspect_database(db_path)
                for t in info.tables:
                    names.append(t.name)
                    names.extend(c.name for c in t.columns)
            except Exception:  # an unreadable database leaves the schema context alone to decide
                names = []
        return cls.build(names, [schema_context or ""])

    def matches(self, stems: set[str], extra: frozenset[str] = frozenset()) -> bool:
        pool = self.stems | extra
        if stems & pool:
            return True
        prefixes = {s[:5] for s in pool if len(s) >= 5}
        return any(len(s) >= 5 and s[:5] in prefixes for s in stems)


# ------------------------------------------------------------------------------ prompt texts


def _norm(text: str) -> str:
    return " ".join(words(text))


@cache
def _example_texts() -> dict[str, tuple[str, ...]]:
    """Normalised example texts every generation prompt shows, per field."""
    q, ev, hk = set(), set(), set()
    for sub in SUBCATEGORIES:
        for ex in sub.examples:
            q.add(_norm(ex.get("question", "")))
            if ex.get("evidence"):
                ev.add(_norm(ex["evidence"]))
            for interp in ex.get("interpretations", []):
                hk.add(_norm(interp.get("hidden_knowledge", "")))
            if ex.get("feedback"):
                hk.add(_norm(ex["feedback"]))
    for s in STYLES:
        if getattr(s, "example", None):
            q.add(_norm(s.example))
    return {
        "question": tuple(sorted(x for x in q if x)),
        "evidence": tuple(sorted(x for x in ev if x)),
        "notes": tuple(sorted(x for x in hk if x)),
    }


@cache
def _field_descriptions() -> tuple[str, ...]:
    out: set[str] = set()

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("description"), str):
                out.add(_norm(node["description"]))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    for sub in SUBCATEGORIES:
        walk(sub.output_model.model_json_schema())
        out.add(_norm(sub.definition))
    return tuple(sorted(x for x in out if x))


def _similar(a: str, b: str) -> bool:
    """Near-copy: word-level similarity ≥ COPY_SIMILARITY (cheap upper bounds first)."""
    if not a or not b:
        return False
    if a == b:
        return True
    wa, wb = a.split(), b.split()
    if abs(len(wa) - len(wb)) > 0.2 * max(len(wa), len(wb)):
        return False
    sm = SequenceMatcher(None, wa, wb, autojunk=False)
    return (
        sm.real_quick_ratio() >= COPY_SIMILARITY
        and sm.quick_ratio() >= COPY_SIMILARITY
        and sm.ratio() >= COPY_SIMILARITY
    )


# ------------------------------------------------------------------------------ rules


def _degenerate(text: str) -> str | None:
    run = _CHAR_RUN.search(text)
    if run:
        return f"repeats {run.group(1)!r} {len(run.group(0))} times"
    ws = words(text)
    if len(ws) >= 8:
        grams = [tuple(ws[i : i + 3]) for i in range(len(ws) - 2)]
        share = len(set(grams)) / len(grams)
        if share < 0.5:
            return f"is mostly repeated phrases ({share:.0%} distinct 3-grams of {len(ws)} words)"
    if len(ws) >= 12:
        top = max(ws.count(w) for w in set(ws) if w not in STOPWORDS) if set(ws) - STOPWORDS else 0
        if top > 0.4 * len(ws):
            return f"repeats one word {top} times in {len(ws)}"
    if len(text) >= 300 and len(zlib.compress(text.encode())) < 0.2 * len(text):
        return "compresses below 20% (repetitive)"
    return None


def _clip(text: str, n: int = 60) -> str:
    text = " ".join(str(text).split())
    return repr(text if len(text) <= n else text[: n - 1] + "…")


def check(row: dict, vocabulary: Vocabulary | None = None) -> list[Defect]:
    """All defects of one candidate row (keys: question, subcategory, style, evidence,
    hidden_knowledge, feedback, sql). Empty list = well-formed."""
    sub = subcategory(row["subcategory"])
    style = row.get("style") or ""
    question = (row.get("question") or "").strip()
    fields = {
        "question": question,
        "evidence": (row.get("evidence") or "").strip(),
        "hidden_knowledge": (row.get("hidden_knowledge") or "").strip(),
        "feedback": (row.get("feedback") or "").strip(),
    }
    out: list[Defect] = []

    if not question:
        return [Defect("missing_text", "question", "is empty")]
    if sub.group is Group.AMBIGUOUS and not fields["hidden_knowledge"]:
        out.append(Defect("missing_text", "hidden_knowledge", "is empty for an ambiguous reading"))
    if sub.group is Group.UNANSWERABLE and not fields["feedback"]:
        out.append(Defect("missing_text", "feedback", "is empty for an unanswerable question"))
    if sub.has_evidence and not fields["evidence"]:
        out.append(Defect("missing_text", "evidence", "is empty"))

    examples = _example_texts()
    descriptions = _field_descriptions()
    for name, text in fields.items():
        if not text:
            continue
        m = _PLACEHOLDER.search(text)
        if m:
            out.append(Defect("placeholder", name, f"contains {m.group(0)!r}"))
        norm = _norm(text)
        if any(_similar(norm, d) for d in descriptions):
            out.append(Defect("instruction_echo", name, f"is a prompt field description ({_clip(text)})"))
        elif name == "question":
            low = text.lower()
            hit = next((p for p in ECHO_PHRASES if p in low), None)
            if hit:
                out.append(Defect("instruction_echo", name, f"contains the prompt phrase {hit!r}"))
        # only the question: hidden knowledge such as "The user's department is 'Physics'." is a fact of
        # the paper's university database and legitimately recurs there; very short texts ("hello")
        # coincide with an example without copying it
        if name == "question" and len(norm.split()) >= 4 and any(_similar(norm, e) for e in examples["question"]):
            out.append(Defect("prompt_example_copy", name, f"copies a prompt example ({_clip(text)})"))
        why = _degenerate(text)
        if why:
            out.append(Defect("degenerate_repetition", name, why))

    n_words = len(words(question))
    short_ok = style == "concise" or sub.id == "improper_question"
    if len(question) > QUESTION_MAX_CHARS or n_words > QUESTION_MAX_WORDS:
        out.append(Defect("length", "question", f"is too long ({len(question)} chars, {n_words} words)"))
    elif n_words < (1 if short_ok else QUESTION_MIN_WORDS) or len(question) < 2:
        out.append(Defect("length", "question", f"is too short ({n_words} words)"))
    for name in ("evidence", "hidden_knowledge"):
        if len(fields[name]) > NOTE_MAX_CHARS:
            out.append(Defect("length", name, f"is too long ({len(fields[name])} chars)"))
    fb = fields["feedback"]
    if fb and (len(fb) > FEEDBACK_MAX_CHARS or len(words(fb)) < FEEDBACK_MIN_WORDS):
        out.append(
            Defect(
                "length",
                "feedback",
                f"has {len(fb)} chars / {len(words(fb))} words "
                f"(bounds {FEEDBACK_MIN_WORDS} words – {FEEDBACK_MAX_CHARS} chars)",
            )
        )

    if sub.id != "improper_question":
        m = _SQL.search(question)
        if m:
            out.append(Defect("sql_in_question", "question", f"contains SQL ({_clip(m.group(0), 40)})"))

    if vocabulary is not None:
        q_stems = content_stems(question)
        if sub.group in (Group.ANSWERABLE, Group.AMBIGUOUS):
            literals = frozenset(content_stems(" ".join(re.findall(r"'((?:[^']|'')*)'", row.get("sql") or ""))))
            if not vocabulary.matches(q_stems, literals):
                out.append(
                    Defect(
                        "no_schema_mention",
                        "question",
                        f"names no table, column or value of this database ({_clip(question)})",
                    )
                )
        elif sub.id != "improper_question" and fb:
            fb_stems = {s for s in content_stems(fb) if s not in _GENERIC_FEEDBACK}
            if not (vocabulary.matches(fb_stems) or fb_stems & q_stems):
                out.append(
                    Defect(
                        "feedback_names_nothing",
                        "feedback",
                        f"names nothing of the schema or the question ({_clip(fb)})",
                    )
                )
    return out


def reason(defects: list[Defect]) -> str:
    """The decision reason: the first defect's rule leads; every defect is listed."""
    return "; ".join(d.text() for d in defects) if defects else "well-formed"
