"""Symmetric AI join calls (#39 item 3): "a symmetric NLjoin prompt may swap inputs only when the
judge can say why".

An AI call over two inputs is an unknown function f(a, b); nothing makes f(a, b) equal f(b, a), so
a candidate that swaps the two inputs of the gold's call is a different call, and the structural
layer finds an AI behaviour under which the results differ. Only when the prompt states a symmetric
relation by the rule below may the judge read the candidate's call with its inputs swapped back,
and then every verdict reached that way says so.

The rule (narrow on purpose, tested in ``tests/aisql/test_symmetric_join.py``): the prompt's text
(its string literals) names a relation that is symmetric by its wording, one of

* "the same <noun>" ("express the same sentiment", "have the same disease"),
* "opposite <noun>" / "one is ... the other ..." ("express opposite sentiments"),
* "both ... or both ..." ("either both are positive or both are negative"),
* "different <noun>", "similar", "identical",

and no word that orders the two inputs: first, second, former, latter, than, before, after,
earlier, later, precede(s), follow(s), left, right, previous, next, older, younger.
Anything else (a comparison, a direction, a prompt this rule does not know) is not symmetric.
"""

import re

from sqlglot import exp

from pipelines.aisql.structural import _inputs, _kind_of, call_text, top_calls

_SYMMETRIC = [
    r"\bthe same\b",
    r"\bopposite\b",
    r"\bboth\b.*\bor both\b",
    r"\bone is\b.*\bthe other\b",
    r"\bdifferent\b",
    r"\bsimilar\b",
    r"\bidentical\b",
]
_ORDERING = (
    r"\b(first|second|former|latter|than|before|after|earlier|later|precedes?|follows?|left|right|previous|next"
    r"|older|younger)\b"
)


SWAP_NOTE = "read with its two inputs swapped"  # in every structural reason reached by the rule


def prompt_text(call: exp.Expression) -> str:
    """The prompt's words: the call's string literals, joined."""
    return " ".join(" ".join(s.this.split()) for s in call.find_all(exp.Literal) if s.is_string and s.this.strip())


def symmetric_relation(prompt: str) -> str | None:
    """Why the prompt states a symmetric relation (the phrase that makes it so), or None."""
    text = " ".join(prompt.lower().split())
    if re.search(_ORDERING, text):
        return None
    for pattern in _SYMMETRIC:
        m = re.search(pattern, text)
        if m:
            return m.group(0)
    return None


def _order(call: exp.Expression) -> list[str]:
    return [c.sql("duckdb").lower() for c in _inputs(call)]


def swapped_symmetric_calls(gold_tree: exp.Expression, cand_tree: exp.Expression):
    """(the candidate with each swappable call's two inputs exchanged, the reasons), or None. A call
    is swappable when it is a boolean AI call over exactly two input columns, the gold has a call
    with the same text (operator, prompt, columns) whose inputs come in another order, and its
    prompt states a symmetric relation: then f(b, a) = f(a, b), and reading it swapped is exact."""
    gold_orders = {}
    for c in top_calls(gold_tree):
        gold_orders.setdefault(call_text(c), []).append(_order(c))
    swaps, reasons = [], []
    for i, call in enumerate(top_calls(cand_tree)):
        cols = _inputs(call)
        if len(cols) != 2 or _kind_of(call) != "bool":
            continue
        orders = gold_orders.get(call_text(call))
        if not orders or _order(call) in orders:
            continue
        why = symmetric_relation(prompt_text(call))
        if why is None:
            continue
        a, b = (c.sql("duckdb") for c in cols)
        swaps.append((i, a, b, cols))
        reasons.append(
            f"the candidate's AI call over ({a}, {b}) {SWAP_NOTE}: its prompt states a "
            f"symmetric relation ('{why}'), so f({a}, {b}) = f({b}, {a})"
        )
    if not swaps:
        return None
    out = cand_tree.copy()  # a fresh tree: no memoised inputs of the calls changed below
    calls = top_calls(out)
    for i, a, b, cols in swaps:
        for col in list(calls[i].find_all(exp.Column)):
            text = col.sql("duckdb")
            if text in (a, b):
                col.replace((cols[1] if text == a else cols[0]).copy())
    return out, reasons
