"""Each controlled variant type changes (or keeps) the label-oracle result as its label says."""

from collections import defaultdict

from pipelines.aisql.diffs import ex_equal
from pipelines.aisql.execute import run_query
from pipelines.aisql.scenarios import MOVIE, load_queries
from pipelines.aisql.variants import AI_ERRORS, EQUIVALENT, VariantSettings, make_variants

QUERIES = ("Q2", "Q3", "Q4", "Q5", "Q8")  # every variant type applies to at least one of these


def test_variants_change_the_oracle_result_as_labelled(sembench_root, movie_db, oracle_runtime):
    rt = oracle_runtime(p=0.0)  # no noise: equivalent variants must return identical rows
    vs = VariantSettings(MOVIE.vocabulary, MOVIE.wrong_columns, MOVIE.alternative_literals)
    changed: dict[str, list[bool]] = defaultdict(list)
    for g in load_queries("movie", sembench_root):
        if g.question_id not in QUERIES:
            continue
        gold = run_query(movie_db.path, g.sql, g.dialect, rt)
        assert gold.ok, (g.dialect, g.question_id, gold.error)
        for v in make_variants(g.sql, g.dialect, vs, MOVIE.key_columns()):
            assert v.label is (v.type in EQUIVALENT)
            assert v.layer == ("none" if v.label else "ai" if v.type in AI_ERRORS else "relational")
            res = run_query(movie_db.path, v.sql, g.dialect, rt)
            changed[v.type].append(not ex_equal(gold, res))
            if v.label:
                assert res.ok and ex_equal(gold, res), (g.dialect, g.question_id, v.type, v.sql)
    for vtype in EQUIVALENT:
        assert changed[vtype] and not any(changed[vtype]), vtype
    errors = [t for t in changed if t not in EQUIVALENT]
    assert {
        "distinct_added",
        "wrong_literal",
        "dropped_filter",
        "wrong_limit",
        "negated_intent",
        "changed_concept",
        "wrong_column",
        "ai_removed",
    } <= set(errors)
    for vtype in errors:  # an error may hide on this data (e.g. DISTINCT on a LIMIT 5), but not always
        if vtype != "distinct_added":
            assert any(changed[vtype]), vtype


def test_variants_render_in_the_gold_dialect(sembench_root):
    vs = VariantSettings(MOVIE.vocabulary, MOVIE.wrong_columns, MOVIE.alternative_literals)
    g = next(q for q in load_queries("movie", sembench_root) if q.dialect == "bigquery" and q.question_id == "Q3")
    para = next(v for v in make_variants(g.sql, g.dialect, vs, MOVIE.key_columns()) if v.type == "paraphrase")
    assert "AI.IF('Is this review positive? Review: ' || r.reviewText)" in para.sql
