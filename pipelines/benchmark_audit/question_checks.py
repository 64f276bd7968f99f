"""What the question asks, set against the gold's SQL, without an LLM.

``question_column_untouched``: the question sorts by a column ("ordered by their age", "in
descending order of net worth") or filters on one ("whose hometown is ...", "with a capacity
above ...") whose name it spells out, and the gold's ORDER BY (resp. WHERE / HAVING / JOIN) never
touches a column of that name. Only a phrase that *is* a column's name (its words, plurals and
"of / the / their" aside) counts: "the most expensive charge type" names no sort column.

``comparison_strictness``: the question bounds a number strictly ("less than 2", "more than 3")
and the gold compares that number only with the inclusive operator (``<= 2``), or the other way
round ("at least 10" answered by ``> 10``); a "not" just before the phrase leaves it alone.

``answer_shape``: the question asks for a count or a number ("How many ...", "What is the
average ...") and no column the gold returns can hold one; it asks for names and the gold returns
only a count; it asks yes or no and the gold returns a list of rows.

Both decide from the text and the schema; anything they cannot resolve says nothing.
"""

from __future__ import annotations

import re

from sqlglot import exp

from pipelines.benchmark_audit.checks import NUMBER_TYPE, Finding
from pipelines.sqltools.identifiers import identifier_words
from resources.catalog import DatabaseInfo

_FILLER = {"of", "the", "a", "an", "their", "its", "his", "her", "each", "all"}
_DIRECTION = {"ascending", "descending", "alphabetical", "alphabetically", "increasing", "decreasing", "reverse"}
_STOP = r"(?:from|in|and|then|with|for|of\s+the\s+\w+s\b|that|who|which|where|order|descending|ascending|,|\.|\?|$)"
_WORDS = r"((?:[A-Za-z][\w-]*\s+){0,3}?[A-Za-z][\w-]*)"
_SORTED = re.compile(
    rf"\b(?:sorted|ordered|order|sort|arranged|ranked|rank)\s+(?:them\s+|the\s+results?\s+|results?\s+)?"
    rf"(?:in\s+)?(?:(?:ascending|descending|alphabetical|increasing|decreasing|reverse)\s+)?(?:order\s+)?(?:by|of)\s+"
    rf"{_WORDS}\s*(?={_STOP})",
    re.I,
)
_COMPARATIVE = (
    r"(?:is|are|was|were|equals?|contains?|includes?|starts?|ends?|greater|larger|bigger|more|less|fewer|smaller|"
    r"lower|higher|above|below|over|under|between|at\s+least|at\s+most|not|=|<|>)"
)
_FILTERED = re.compile(rf"\b(?:whose|with\s+(?:a|an|the)?)\s*{_WORDS}\s+(?={_COMPARATIVE}\b)", re.I)


def _norm(word: str) -> str:
    w = word.lower()
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        return w[:-1]
    return w


def _phrase_words(text: str) -> tuple[str, ...]:
    return tuple(_norm(w) for w in re.split(r"[\s-]+", text) if w and w.lower() not in _FILLER | _DIRECTION)


def _tables(tree: exp.Expression, schema: DatabaseInfo):
    names = {t.name.lower() for t in tree.find_all(exp.Table)}
    return [t for t in schema.tables if t.name.lower() in names]


def _named_column(phrase: str, tree: exp.Expression, schema: DatabaseInfo) -> str | None:
    """The one column name (of the gold's tables) whose words are the phrase's words, or None."""
    words = _phrase_words(phrase)
    if not words:
        return None
    hits = {
        col.name.lower()
        for table in _tables(tree, schema)
        for col in table.columns
        if tuple(_norm(w) for w in identifier_words(col.name) if w.lower() not in _FILLER) == words
    }
    return next(iter(hits)) if len(hits) == 1 else None


def _columns_under(nodes) -> set[str]:
    return {c.name.lower() for n in nodes for c in n.find_all(exp.Column)}


def _order_columns(tree: exp.Expression) -> tuple[set[str], bool]:
    """Names of the columns every ORDER BY reads (a key that is a projection's alias reads that
    projection's columns) and whether some ORDER BY exists."""
    names: set[str] = set()
    found = False
    for select in tree.find_all(exp.Select):
        order = select.args.get("order")
        if order is None:
            continue
        found = True
        aliases = {p.alias.lower(): p for p in select.expressions if p.alias}
        for ordered in order.expressions:
            key = ordered.this
            if isinstance(key, exp.Column) and not key.table and key.name.lower() in aliases:
                key = aliases[key.name.lower()]
            if isinstance(key, exp.Literal) and not key.is_string:
                n = int(key.this) if key.this.isdigit() else 0
                key = select.expressions[n - 1] if 1 <= n <= len(select.expressions) else key
            names |= _columns_under([key])
    order_of_set = tree.args.get("order") if isinstance(tree, exp.SetOperation) else None
    if order_of_set is not None:
        found = True
        names |= _columns_under(order_of_set.expressions)
    return names, found


def _filter_columns(tree: exp.Expression) -> set[str]:
    """Columns the gold filters or ranks by: WHERE, HAVING, JOIN ... ON and ORDER BY ("whose
    number of products is the largest" is answered by a sort)."""
    nodes = [*tree.find_all(exp.Where), *tree.find_all(exp.Having), *tree.find_all(exp.Order)]
    nodes += [j.args["on"] for j in tree.find_all(exp.Join) if j.args.get("on") is not None]
    return _columns_under(nodes)


def question_column_findings(question: str, tree: exp.Expression | None, schema: DatabaseInfo | None) -> list[Finding]:
    if tree is None or schema is None:
        return []
    findings = []
    order_names, has_order = _order_columns(tree)
    for m in _SORTED.finditer(question):
        column = _named_column(m.group(1), tree, schema)
        if column is None or column in order_names:
            continue
        if has_order and any(o.find(exp.AggFunc) for o in tree.find_all(exp.Ordered)):
            continue  # an aggregate sort key ("by the number of ...") may stand for the column
        sorts = (
            f"its ORDER BY reads {', '.join(sorted(order_names)) or 'no column'}" if has_order else "it has no ORDER BY"
        )
        findings.append(
            Finding(
                "question_column_untouched",
                f"the question sorts by {column} ({m.group(0).strip()!r}); {sorts}",
            )
        )
    filtered = _filter_columns(tree)
    for m in _FILTERED.finditer(question):
        column = _named_column(m.group(1), tree, schema)
        if column is None or column in filtered:
            continue
        findings.append(
            Finding(
                "question_column_untouched",
                f"the question filters on {column} ({m.group(0).strip()!r}); the gold's WHERE / HAVING / JOIN / ORDER BY never reads it",
            )
        )
    findings += _superlative_findings(question, tree, schema, order_names)
    return findings[:1] if findings else []


# a superlative names what is ranked: "the highest capacity" (a column's name), "the oldest" (age)
_SUPERLATIVE = re.compile(
    rf"\b(?:highest|lowest|largest|smallest|greatest|biggest|maximum|minimum|max|min|most|least|fewest)\s+{_WORDS}"
    rf"\s*(?={_STOP}|is\b|are\b|was\b|were\b)",
    re.I,
)
_RANKED_BY = {
    "oldest": ("age", "birth", "born"),
    "youngest": ("age", "birth", "born"),
    "tallest": ("height",),
    "shortest": ("height", "length"),
    "heaviest": ("weight",),
    "lightest": ("weight",),
    "cheapest": ("price", "cost"),
    "richest": ("worth", "wealth", "money"),
}


def _ranked_columns(tree: exp.Expression) -> set[str]:
    """Columns a superlative may rest on: ORDER BY keys, MAX / MIN arguments, and WHERE (a
    comparison with a subquery's MAX)."""
    nodes = [*tree.find_all(exp.Order), *tree.find_all(exp.Max), *tree.find_all(exp.Min), *tree.find_all(exp.Where)]
    nodes += [*tree.find_all(exp.Having)]
    return _columns_under(nodes)


def _superlative_findings(question: str, tree: exp.Expression, schema: DatabaseInfo, order_names: set[str]):
    """The question ranks by a column ("the highest capacity", "the oldest" -> age) and the gold ranks
    by another: its ORDER BY / MAX / MIN / WHERE never reads that column, while a plain column is
    what it sorts by (an aggregate key, "the most concerts", is left alone)."""
    ranked = _ranked_columns(tree)
    keys = [o.this for o in tree.find_all(exp.Ordered)]
    plain_sort = bool(keys) and all(isinstance(k, exp.Column) for k in keys)
    uses_extreme = any(True for _ in tree.find_all(exp.Max, exp.Min))
    if not (plain_sort or uses_extreme):
        return []
    found = []
    for m in _SUPERLATIVE.finditer(question):
        if m.group(0).split()[0].lower() in ("most", "least", "fewest") and m.group(1).lower().endswith("s"):
            continue  # "the most languages": a count of rows, not the column's value
        column = _named_column(m.group(1), tree, schema)
        if column is not None and column not in ranked:
            found.append((column, m.group(0).strip()))
    words = {w.lower() for w in re.findall(r"[A-Za-z]+", question)}
    for adjective, stems in _RANKED_BY.items():
        if adjective not in words:
            continue
        candidates = {
            col.name.lower()
            for table in _tables(tree, schema)
            for col in table.columns
            if any(_norm(w) in stems for w in identifier_words(col.name))
        }
        if len(candidates) == 1 and not candidates & ranked:
            found.append((next(iter(candidates)), adjective))
    return [
        Finding(
            "question_column_untouched",
            f"the question ranks by {column} ({phrase!r}); the gold ranks by {', '.join(sorted(order_names)) or 'MAX / MIN of other columns'}",
        )
        for column, phrase in found[:1]
    ]


# --- the answer's shape --------------------------------------------------------------------------

_ASKS_NUMBER = re.compile(
    r"^\s*(?:how\s+many|(?:what|which)\s+(?:is|was|are|were)\s+the\s+(?:total\s+)?(?:number|count|average|mean|sum|total)"
    r"\b|(?:count|find|give|return|show|tell\s+me|compute|calculate)\s+(?:me\s+)?the\s+(?:total\s+)?(?:number|count|average|sum)\b"
    r"|count\s+(?:how\s+many|the)\b)",
    re.I,
)
_ASKS_NAMES = re.compile(
    r"^\s*(?:what\s+(?:are|is)|list|show|find|give(?:\s+me)?|return|tell\s+me)\s+(?:all\s+)?the\s+names?\b", re.I
)
_ASKS_YES_NO = re.compile(r"^\s*(?:is|are|does|do|did|was|were|has|have|can)\s", re.I)


def _first_select(tree: exp.Expression) -> exp.Select | None:
    while isinstance(tree, exp.SetOperation):
        tree = tree.this
    return tree if isinstance(tree, exp.Select) else None


def _column_type(col: exp.Column, tree: exp.Expression, schema: DatabaseInfo) -> str | None:
    types = {(c.type or "").upper() for t in _tables(tree, schema) if (c := t.column(col.name)) is not None}
    return types.pop() if len(types) == 1 else None


def _may_be_number(projection: exp.Expression, tree: exp.Expression, schema: DatabaseInfo) -> bool:
    """False only for what cannot hold a number: a bare column declared text-like, a string literal."""
    node = projection.unalias()
    if isinstance(node, exp.Literal):
        return not node.is_string
    if not isinstance(node, exp.Column):
        return True  # aggregates, arithmetic, CASE, casts: may well be
    kind = _column_type(node, tree, schema)
    return kind is None or not kind or bool(NUMBER_TYPE.search(kind))


def _numeric_result_column(outcome) -> bool:
    """Whether some column of the gold's rows holds only numbers (a TEXT column can)."""
    if outcome is None or not getattr(outcome, "ok", False) or not outcome.rows:
        return False
    width = len(outcome.rows[0])
    for i in range(width):
        values = [r[i] for r in outcome.rows if r[i] is not None]
        if values and all(
            isinstance(v, (int, float)) or (isinstance(v, str) and re.fullmatch(r"\s*-?\d+(\.\d+)?\s*", v))
            for v in values
        ):
            return True
    return False


def answer_shape_findings(
    question: str, tree: exp.Expression | None, schema: DatabaseInfo | None, outcome=None
) -> list[Finding]:
    select = _first_select(tree) if tree is not None else None
    if select is None or schema is None or any(isinstance(p, exp.Star) for p in select.expressions):
        return []
    projections = select.expressions
    shown = ", ".join(p.sql(dialect="sqlite") for p in projections)
    if _ASKS_NUMBER.search(question):
        if not any(_may_be_number(p, tree, schema) for p in projections) and not _numeric_result_column(outcome):
            return [Finding("answer_shape", f"the question asks for a count or a number; the gold returns {shown}")]
    elif _ASKS_NAMES.search(question):
        if all(isinstance(p.unalias(), exp.Count) for p in projections):
            return [Finding("answer_shape", f"the question asks for names; the gold returns only {shown}")]
    elif _ASKS_YES_NO.search(question):
        plain = all(isinstance(p.unalias(), exp.Column) for p in projections)
        aggregated = select.args.get("group") is not None
        if plain and not aggregated and outcome is not None and outcome.ok and len(outcome.rows) > 1:
            return [
                Finding(
                    "answer_shape",
                    f"the question asks yes or no; the gold returns {len(outcome.rows)} rows of {shown}",
                )
            ]
    return []


# --- strict or inclusive bounds ------------------------------------------------------------------

_SMALL_NUMBERS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
_ANY_N = re.compile(r"\b(?:at least|any|some|a few|up to)\s+(\d+|" + "|".join(_SMALL_NUMBERS) + r")\b", re.I)


def asks_for_any(question: str, k: int) -> bool:
    """The question asks for any ``k`` rows ("list down at least five superpowers", "name any 3
    students"): an unordered ``LIMIT k`` answers the question whichever rows come back, yet fixes
    one arbitrary set as the gold."""
    for m in _ANY_N.finditer(question or ""):
        word = m.group(1).lower()
        if _SMALL_NUMBERS.get(word, int(word) if word.isdigit() else None) == k:
            return True
    return False


_BOUNDS = {
    "less than": "<", "fewer than": "<", "below": "<", "under": "<",
    "more than": ">", "greater than": ">", "larger than": ">", "bigger than": ">", "higher than": ">",
    "above": ">", "over": ">",
    "at least": ">=", "no less than": ">=", "no fewer than": ">=",
    "at most": "<=", "no more than": "<=",
}  # fmt: skip
_BOUND = re.compile(
    r"\b("
    + "|".join(sorted(_BOUNDS, key=len, reverse=True))
    + r")\s+(\d+(?:\.\d+)?|"
    + "|".join(_SMALL_NUMBERS)
    + r")\b",
    re.I,
)
_OTHER_STRICTNESS = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}
_OPERATORS = {exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _compared(tree: exp.Expression) -> dict[float, set[str]]:
    """number -> the operators the gold compares it with, written as ``column OP number``."""
    out: dict[float, set[str]] = {}
    for kind, op in _OPERATORS.items():
        for node in tree.find_all(kind):
            for number, flipped in ((node.expression, False), (node.this, True)):
                if isinstance(number, exp.Literal):
                    try:
                        value = float(number.this)
                    except ValueError:
                        continue
                    out.setdefault(value, set()).add(_FLIPPED[op] if flipped else op)
    return out


def comparison_findings(question: str, tree: exp.Expression | None) -> list[Finding]:
    if tree is None:
        return []
    compared = _compared(tree)
    for m in _BOUND.finditer(question):
        before = question[: m.start()].lower().split()[-4:]
        if any(w in ("not", "no", "n't", "never") or w.endswith("n't") for w in before):
            continue
        word = m.group(2).lower()
        number = float(_SMALL_NUMBERS.get(word, word))
        asked = _BOUNDS[" ".join(m.group(1).lower().split())]
        ops = compared.get(number, set())
        if ops and asked not in ops and ops == {_OTHER_STRICTNESS[asked]}:
            return [
                Finding(
                    "comparison_strictness",
                    f"the question says {m.group(0)!r} ({asked} {m.group(2)}); the gold compares {m.group(2)} "
                    f"with {' / '.join(sorted(ops))} only",
                )
            ]
    return []
