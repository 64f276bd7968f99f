"""#39: x / 0. BigQuery raises an error on a division by zero (SAFE_DIVIDE, NULLIF or a CASE guard give
NULL instead; a NULL operand gives NULL first, "unless otherwise specified, all operators return NULL
when one of the operands is NULL"); DuckDB, which runs the queries here, answers inf or NaN. The judge
must never call a BigQuery pair equivalent when one side may raise the error on a database where the
other cannot: the verifier decides such a pair only when both may raise it on the same databases,
else it falls back to the test suite and says why. Judged on the real medical data, label oracle
without noise, through the entry point `aisql compare` / `aisql evaluate` use."""

import pytest

from pipelines.aisql.compare import ACCEPT, BOUNDED, PROOF, REJECT, UNDECIDED
from pipelines.aisql.rewrite import to_duckdb_tree
from pipelines.aisql.semantic_cases import MED_AI, PS
from pipelines.aisql.verifier import DIV_ERROR, EQUIVALENT_UP_TO_K, UNSUPPORTED, verify
from tests.aisql.conftest import judged_fixture

SEL = f"{PS} WHERE {MED_AI.format(d='an allergy', a='s')}"
GUARDED_OR = f"SELECT p.patient_id {SEL} AND (p.age = 0 OR SAFE_DIVIDE(100, p.age) > 1)"
# (id, gold, candidate, equivalent on BigQuery, the final verdict the judge must give)
PAIRS = [
    # no patient selected: COUNT(*) = 0, and 0 / 0 raises in the gold; the guarded candidate gives NULL
    (
        "safe-divide",
        f"SELECT COUNT(p.age) / COUNT(*) AS share {SEL}",
        f"SELECT SAFE_DIVIDE(COUNT(p.age), COUNT(*)) AS share {SEL}",
        False,
        REJECT,
    ),
    (
        "nullif",
        f"SELECT COUNT(p.age) / COUNT(*) AS share {SEL}",
        f"SELECT COUNT(p.age) / NULLIF(COUNT(*), 0) AS share {SEL}",
        False,
        REJECT,
    ),
    (
        "case-guard",
        f"SELECT COUNT(p.age) / COUNT(*) AS share {SEL}",
        f"SELECT CASE WHEN COUNT(*) = 0 THEN NULL ELSE COUNT(p.age) / COUNT(*) END AS share {SEL}",
        False,
        REJECT,
    ),
    # the gold may evaluate 100 / 0 (BigQuery does not promise to short-circuit OR); the shipped data
    # has no patient aged 0, and DuckDB's inf agrees with the guard: before #39's x / 0 rule the
    # verifier called this pair equivalent up to 3 rows per table
    ("or-guard", f"SELECT p.patient_id {SEL} AND (p.age = 0 OR 100 / p.age > 1)", GUARDED_OR, False, UNDECIDED),
    (
        "row-division",
        f"SELECT p.patient_id, 100 / p.age AS x {SEL}",
        f"SELECT p.patient_id, SAFE_DIVIDE(100, p.age) AS x {SEL}",
        False,
        REJECT,
    ),
    # the same on every database, errors included
    (
        "both-guarded",
        f"SELECT SAFE_DIVIDE(COUNT(p.age), COUNT(*)) AS share {SEL}",
        f"SELECT COUNT(p.age) / NULLIF(COUNT(*), 0) AS share {SEL}",
        True,
        ACCEPT,
    ),
    # a CASE branch not taken is not evaluated (BigQuery's conditional expressions short-circuit)
    (
        "case-vs-safe",
        f"SELECT p.patient_id {SEL} AND CASE WHEN p.age = 0 THEN TRUE ELSE 100 / p.age > 1 END",
        GUARDED_OR,
        True,
        ACCEPT,
    ),
    # SUM is NULL whenever COUNT(*) is 0: NULL / 0 is NULL, never the error
    (
        "null-dividend",
        f"SELECT SUM(p.age) / COUNT(*) AS m {SEL}",
        f"SELECT SAFE_DIVIDE(SUM(p.age), COUNT(*)) AS m {SEL}",
        True,
        ACCEPT,
    ),
    # both raise on the same databases (no rows): the same behaviour
    (
        "same-division",
        f"SELECT COUNT(p.age) / COUNT(*) AS share {SEL}",
        f"SELECT COUNT(p.age) / COUNT(1) AS share {SEL}",
        True,
        ACCEPT,
    ),
]


judged = judged_fixture("medical", PAIRS, "bigquery")


@pytest.mark.parametrize("pair_id,gold,cand,equivalent,final", PAIRS, ids=[p[0] for p in PAIRS])
def test_x_over_zero_is_never_equal_to_its_guard(judged, pair_id, gold, cand, equivalent, final):
    r = judged[pair_id]
    why = r.layer("structural").reason
    assert r.final == final, why
    assert r.final != ACCEPT or equivalent, why  # never an accept of a pair one side of which may raise
    if final == ACCEPT:
        assert r.verdict_class in (PROOF, BOUNDED), why
    if pair_id in ("or-guard", "row-division"):  # the verifier fell back and says why
        assert "x / 0 raises an error in BigQuery" in why and "the gold may raise it" in why, why


def test_the_error_rule_holds_for_bigquery_only():
    """The same pair under DuckDB's semantics (x / 0 is inf or NaN, as ThalamusDB runs it) is equal
    up to k rows per table; under BigQuery's the gold may raise the error where the candidate cannot."""
    schema = {"s": {"t": {"a": "BIGINT", "b": "VARCHAR"}}}
    g = to_duckdb_tree("SELECT t.b FROM s.t AS t WHERE t.a = 0 OR 100 / t.a > 1", "bigquery")
    c = to_duckdb_tree("SELECT t.b FROM s.t AS t WHERE t.a = 0 OR SAFE_DIVIDE(100, t.a) > 1", "bigquery")
    assert verify(g, c, schema, {}, k=2, budget_ms=20000).verdict == EQUIVALENT_UP_TO_K
    res = verify(g, c, schema, {}, k=2, budget_ms=20000, division_errors=True)
    assert res.verdict == UNSUPPORTED and res.reason.startswith(DIV_ERROR) and "gold may raise" in res.reason
    # a division in the SELECT list is evaluated only for the rows WHERE keeps
    g = to_duckdb_tree("SELECT 100 / t.a FROM s.t AS t WHERE t.a <> 0", "bigquery")
    c = to_duckdb_tree("SELECT SAFE_DIVIDE(100, t.a) FROM s.t AS t WHERE t.a <> 0", "bigquery")
    assert verify(g, c, schema, {}, k=2, budget_ms=20000, division_errors=True).verdict == EQUIVALENT_UP_TO_K
