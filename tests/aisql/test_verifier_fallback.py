"""#39 item 2: what the bounded verifier does not encode (ORDER BY ... LIMIT, a window function or
QUALIFY, set operations, LIKE) falls back to the test suite, and the verdict's explanation says so,
whichever way the test suite comes out (agreement is evidence, a witness rejects). Judged through
the domain entry point on the real movie data, label oracle without noise."""

import pytest

from pipelines.aisql.compare import ACCEPT, EQUAL_SUITE_CLASS, REJECT, WITNESS
from tests.aisql.conftest import judged_fixture

AI = "NLfilter(reviewText, 'the review is positive')"
# (id, gold, candidate, what the verifier names, the verdict class the test suite gives)
GAPS = [
    (
        "order-by-limit",
        f"SELECT reviewId FROM Reviews WHERE id = 'taken_3' AND {AI} ORDER BY reviewId LIMIT 500",
        f"SELECT reviewId FROM Reviews WHERE {AI} AND id = 'taken_3' ORDER BY reviewId LIMIT 600",
        "ORDER BY",
        EQUAL_SUITE_CLASS,
    ),
    (
        "qualify",
        f"SELECT id, reviewId FROM Reviews WHERE {AI} QUALIFY ROW_NUMBER() OVER (PARTITION BY id ORDER BY reviewId) = 1",
        f"SELECT id, MIN(reviewId) FROM Reviews WHERE {AI} GROUP BY id",
        "QUALIFY",
        EQUAL_SUITE_CLASS,
    ),
    (
        "window",
        f"SELECT id, COUNT(*) OVER (PARTITION BY id) FROM Reviews WHERE id = 'taken_3' AND {AI}",
        f"SELECT id, COUNT(*) OVER (PARTITION BY id, id) FROM Reviews WHERE {AI} AND id = 'taken_3'",
        "window function",
        EQUAL_SUITE_CLASS,
    ),
    (
        "set-operation",
        f"SELECT id FROM Reviews WHERE id = 'taken_3' AND {AI} UNION SELECT id FROM Movies WHERE id = 'taken_3'",
        f"SELECT id FROM Movies WHERE id = 'taken_3' UNION SELECT id FROM Reviews WHERE {AI} AND id = 'taken_3'",
        "set operations",
        EQUAL_SUITE_CLASS,
    ),
    (
        # '_' matches any one character: an id 'taken-3' is counted by the gold only (blind-11)
        "like",
        f"SELECT COUNT(*) FROM Reviews WHERE id LIKE 'taken_3' AND {AI}",
        f"SELECT COUNT(*) FROM Reviews WHERE id = 'taken_3' AND {AI}",
        "Like",
        WITNESS,
    ),
]


judged = judged_fixture("movie", GAPS, "thalamusdb")


@pytest.mark.parametrize("pair_id,gold,cand,gap,verdict_class", GAPS, ids=[g[0] for g in GAPS])
def test_a_verifier_gap_falls_back_to_the_test_suite_and_says_so(judged, pair_id, gold, cand, gap, verdict_class):
    r = judged[pair_id]
    sv = r.evidence.structural
    assert sv.method == "test_suite", sv.reason
    assert "verifier: " in sv.reason and gap in sv.reason, sv.reason  # what the verifier did not cover
    assert r.verdict_class == verdict_class, sv.reason
    # evidence never accepts; a test-suite witness rejects
    assert r.final == (REJECT if verdict_class == WITNESS else "cannot decide") and r.final != ACCEPT
