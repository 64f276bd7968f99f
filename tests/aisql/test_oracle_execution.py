"""Label oracle, budgeted UDF execution and the shared call cache, on the real movie data."""

import pytest

from pipelines.aisql.compare import judge_pair
from pipelines.aisql.diffs import ex_equal
from pipelines.aisql.evalset import variant_pairs
from pipelines.aisql.execute import RunRecord, run_query
from pipelines.aisql.methods import ex_verdict
from pipelines.aisql.metrics import confusion
from pipelines.aisql.operators import LabelOracle, OpRequest, OracleCannotDecide, read_concept
from pipelines.aisql.scenarios import MOVIE, leaked_label_columns, load_queries, visible_columns
from pipelines.aisql.split_execution import EvalContext, execute_pair, table_columns_of
from pipelines.aisql.variants import CHANGED_CONCEPT
from tests.aisql.conftest import movie_query

PARAPHRASE = "Is this review positive? Review: "
GOLD_PROMPT = "Determine if the following movie review is clearly positive, review: "


def test_scenario_db_hides_the_label_columns(movie_db):
    assert leaked_label_columns(movie_db.path, MOVIE) == []
    cols = visible_columns(movie_db.path)
    assert "reviewText" in cols["main.Reviews"] and "reviewText" in cols["movie.reviews"]
    assert not {"scoreSentiment", "reviewState", "originalScore"} & set(cols["main.Reviews"])
    assert movie_db.row_counts == {"Reviews": 2000, "Movies": 116}


@pytest.mark.parametrize("dialect", ["bigquery", "thalamusdb"])
def test_gold_anchor_answers_with_no_noise(sembench_root, movie_db, oracle_runtime, dialect):
    rt = oracle_runtime(p=0.0)
    q3 = run_query(movie_db.path, movie_query(sembench_root, dialect, "Q3"), dialect, rt)
    assert q3.ok and q3.rows == [(14,)]
    q4 = run_query(movie_db.path, movie_query(sembench_root, dialect, "Q4"), dialect, rt)
    assert q4.rows[0][0] == pytest.approx(14 / 120, abs=1e-6)
    q8 = run_query(movie_db.path, movie_query(sembench_root, dialect, "Q8"), dialect, rt)
    assert sorted(q8.rows) == [("NEGATIVE", 106), ("POSITIVE", 14)]


def test_oracle_is_deterministic_and_flips_depend_on_wording(movie_labels):
    texts = list(movie_labels)[:400]

    def answers(p, seed, prompt):
        o = LabelOracle(movie_labels, MOVIE.vocabulary, p=p, seed=seed)
        return [o.answer(OpRequest("ai_if", prompt + t)) for t in texts]

    clean = answers(0.0, 0, GOLD_PROMPT)
    assert clean == [movie_labels[t] == "POSITIVE" for t in texts]
    noisy = answers(0.2, 7, GOLD_PROMPT)
    assert noisy == answers(0.2, 7, GOLD_PROMPT)  # same seed, same answers
    flipped = sum(a != b for a, b in zip(clean, noisy))
    assert 40 <= flipped <= 120  # about p of the rows
    assert answers(0.2, 8, GOLD_PROMPT) != noisy  # another seed flips another subset
    para = answers(0.2, 7, PARAPHRASE)
    assert para != noisy  # a paraphrase shifts the boundary on other rows
    assert answers(0.0, 0, PARAPHRASE) == clean  # ... but asks the same concept


def test_concept_reading():
    v = MOVIE.vocabulary
    assert read_concept("Is this review positive?", v, 1).label == "POSITIVE"
    neg = read_concept("the review is not positive", v, 1)
    assert (neg.label, neg.negated) == ("POSITIVE", True)
    assert read_concept("Does it mention the director?", v, 1).kind == "unknown"
    assert read_concept("both reviews share the same sentiment", v, 2).kind == "same"
    assert read_concept("one is positive, the other negative: opposite", v, 2).kind == "different"


def test_budget_exceeded_is_a_status(sembench_root, movie_db, oracle_runtime):
    rec = run_query(movie_db.path, movie_query(sembench_root, "bigquery", "Q1"), "bigquery", oracle_runtime(budget=100))
    assert rec.status == "budget_exceeded" and "100" in rec.error and rec.calls <= 100
    # LIMIT does not cut calls: Q1 LIMIT 5 still evaluates every distinct review
    ok = run_query(movie_db.path, movie_query(sembench_root, "bigquery", "Q1"), "bigquery", oracle_runtime())
    assert ok.ok and ok.row_count == 5 and ok.calls == 1864


def test_gold_candidate_and_split_parts_share_calls(sembench_root, movie_db, oracle_runtime):
    rt = oracle_runtime(p=0.1)
    ctx = EvalContext(movie_db.path, rt, MOVIE.key_columns(), table_columns_of(visible_columns(movie_db.path)))
    gold = movie_query(sembench_root, "bigquery", "Q3")
    cand = gold.replace(GOLD_PROMPT, PARAPHRASE)
    first = execute_pair(ctx, gold, cand, "bigquery")
    made_first = rt.totals.made
    # the AI part over the whole table evaluates the same (prompt, text) keys as the full query
    assert first.gold.made == 119 and first.gold_ai[0].calls == 1864
    assert first.gold_ai[0].cached >= 119
    again = execute_pair(ctx, gold, cand, "bigquery")
    assert rt.totals.made == made_first  # a rerun makes no new call
    assert again.gold.cached == again.gold.calls == 119
    assert again.gold.rows == first.gold.rows
    # the paraphrase shifts the count (EX would reject) while the relational parts agree
    assert first.gold.rows != first.cand.rows
    assert first.relational_diff["multiset_equal"] is True
    assert first.structural.verdict == "equal" and first.structural.method == "syntactic"
    probe = first.alignment[0]["probe"]
    assert probe["comparable"] and probe["probe_rows"] == 100 and 0.7 <= probe["agreement"] < 1.0


def test_distinct_dropped_shows_a_relational_diff_on_duplicated_rows(movie_db, oracle_runtime):
    rt = oracle_runtime(p=0.0)
    ctx = EvalContext(movie_db.path, rt, MOVIE.key_columns(), table_columns_of(visible_columns(movie_db.path)))
    gold = (
        "SELECT DISTINCT reviewId FROM Reviews WHERE id = 'ant_man_and_the_wasp_quantumania' "
        "AND NLfilter(reviewText, 'the review sentiment is positive')"
    )
    ev = execute_pair(ctx, gold, gold.replace("DISTINCT ", ""), "thalamusdb")
    assert ev.relational_diff["set_equal"] and not ev.relational_diff["multiset_equal"]
    assert ev.structural.verdict == "differ"
    # issue 19 item 3: EX is bag-based, so dropping a DISTINCT over duplicate rows is not a match
    assert ev.gold.row_count < ev.cand.row_count and set(ev.gold.rows) == set(ev.cand.rows)
    assert not ex_equal(ev.gold, ev.cand, ev.ordered)


def test_ex_is_bag_based_and_ordered_under_a_gold_order_by():
    def rec(rows):
        return RunRecord(status="ok", sql="", rows=rows)

    rows = [(i,) for i in range(66)]
    assert not ex_equal(rec(rows), rec(rows + rows))  # 66 vs 132 rows: DISTINCT dropped
    assert ex_equal(rec(rows), rec(list(reversed(rows))))  # no ORDER BY: order ignored
    assert not ex_equal(rec(rows), rec(list(reversed(rows))), ordered=True)
    assert ex_equal(rec([(1.0000001, "a")]), rec([(1.0, "a")]))  # floats rounded to 1e-6
    assert not ex_equal(rec([(1,)]), RunRecord(status="error", sql="", error="x"))


def test_oracle_cannot_decide_a_value_operator_asking_another_concept(sembench_root, movie_db, oracle_runtime):
    """Issue 19 item 4: SCORE / GENERATE / CLASSIFY answer only what the labels and the instruction decide."""

    gold = movie_query(sembench_root, "bigquery", "Q9")
    rt = oracle_runtime(p=0.0)
    ok = run_query(movie_db.path, gold, "bigquery", rt)
    assert ok.ok and {r[1] for r in ok.rows} <= {2.0, 4.0}
    changed = gold.replace("Score from 1 to 5 how much did the reviewer like the movie", CHANGED_CONCEPT)
    changed = changed.split("Rubrics:")[0] + 'Review:\n    """, reviewText)' + changed.split("reviewText)", 1)[1]
    rec = run_query(movie_db.path, changed, "bigquery", rt)
    assert rec.status == "undecided" and rec.error.startswith("oracle cannot decide AI.SCORE")
    v = ex_verdict("p", ok.status, rec.status, False)
    assert v.status == "error" and "cannot decide" in v.reason and not v.accepted
    oracle = LabelOracle({"fine": "POSITIVE"}, MOVIE.vocabulary, score_of=MOVIE.score_of)
    with pytest.raises(OracleCannotDecide):
        oracle.answer(OpRequest("ai_score", "Score how negative this review is: \x1efine\x1f"))
    with pytest.raises(OracleCannotDecide):
        oracle.answer(OpRequest("ai_generate", "Name the director: \x1efine\x1f"))
    assert oracle.answer(OpRequest("ai_score", "Score how positive this review is: \x1efine\x1f")) == 4.0
    assert oracle.answer(OpRequest("ai_generate", "Is it positive? Answer TRUE or FALSE: \x1efine\x1f")) == "TRUE"


@pytest.mark.parametrize("dialect", ["bigquery", "thalamusdb"])
def test_oracle_cannot_decide_a_boolean_operator_naming_no_labelled_concept(
    sembench_root, movie_db, oracle_runtime, dialect
):
    """Issue 19 item 4 (rest): AI.IF / NLfilter with an instruction naming no labelled concept is
    'cannot decide', never a seeded coin flip; the same holds for a pair predicate it cannot read."""

    oracle = LabelOracle({"fine": "POSITIVE", "bad": "NEGATIVE"}, MOVIE.vocabulary, p=0.0)
    for prompt in ("Does this review mention the director? \x1efine\x1f", CHANGED_CONCEPT + " \x1efine\x1f"):
        with pytest.raises(OracleCannotDecide, match="oracle cannot decide AI.IF: the instruction .* names no concept"):
            oracle.answer(OpRequest("ai_if", prompt))
    with pytest.raises(OracleCannotDecide):
        oracle.answer(OpRequest("nljoin", "Do these reviews talk about actors?", ("fine", "bad")))
    assert oracle.answer(OpRequest("ai_if", "Is this review positive? \x1efine\x1f")) is True
    assert oracle.answer(OpRequest("ai_if", "Is this review not positive? \x1efine\x1f")) is False
    gold = movie_query(sembench_root, dialect, "Q3")
    prompt = GOLD_PROMPT if dialect == "bigquery" else "the review sentiment is positive"
    rec = run_query(
        movie_db.path, gold.replace(prompt, "the review mentions the director"), dialect, oracle_runtime(p=0.0)
    )
    assert rec.status == "undecided" and "names no concept the labels cover" in rec.error


def test_changed_concept_variants_stay_measured_from_their_construction(sembench_root, movie_db, oracle_runtime):
    """The changed-concept variants keep their constructed label (False); with the oracle unable to
    run them, EX records an error verdict (a rejection, so a true negative) and the AI layer cannot decide."""

    golds = [g for g in load_queries("movie", sembench_root) if g.question_id == "Q3"]
    rows = variant_pairs(MOVIE, golds, correct_share=None, variant_types=("changed_concept",))
    assert len(rows) == 2 and all(r["label"] is False and r["label_source"] == "constructed" for r in rows)
    ctx = EvalContext(
        movie_db.path, oracle_runtime(p=0.0), MOVIE.key_columns(), table_columns_of(visible_columns(movie_db.path))
    )
    verdicts = []
    for r in rows:
        j = judge_pair(ctx, r["gold_sql"], r["candidate_sql"], r["dialect"])
        ev = j.evidence
        assert ev.gold.ok and ev.cand.status == "undecided"
        assert j.layer("ai").verdict == "cannot decide" and j.layer("ex").verdict == "cannot decide"
        verdicts.append(ex_verdict(r["pair_id"], ev.gold.status, ev.cand.status, False).accepted)
    assert confusion([r["label"] for r in rows], verdicts).tn == 2
