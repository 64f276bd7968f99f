"""#33 items 3 and 4 on real movie data: the AI layer's probe for calls inside correlated subqueries
and EXISTS comes from the split's AI part; the relational gate keeps a proven difference final."""

from pipelines.aisql.compare import ACCEPT, REJECT, judge_pair
from pipelines.aisql.scenarios import MOVIE, visible_columns
from pipelines.aisql.split_execution import EvalContext, table_columns_of

EXISTS_GOLD = (
    "SELECT COUNT(*) FROM movie.movies AS m WHERE EXISTS (SELECT 1 FROM movie.reviews AS r "
    "WHERE r.id = m.id AND AI.IF(('Determine if the following movie review is clearly positive, review: ', "
    "r.reviewText)))"
)


def _ctx(movie_db, oracle_runtime, p=0.1):
    return EvalContext(
        movie_db.path, oracle_runtime(p=p), MOVIE.key_columns(), table_columns_of(visible_columns(movie_db.path))
    )


def test_probe_of_a_call_inside_exists_runs(movie_db, oracle_runtime):
    ctx = _ctx(movie_db, oracle_runtime, p=0.0)  # no noise: a paraphrase answers like the gold
    para = EXISTS_GOLD.replace("clearly positive, review: ", "positive? Review: ")
    r = judge_pair(ctx, EXISTS_GOLD, para, "bigquery")
    probe = r.evidence.alignment[0]["probe"]
    assert probe["comparable"] and probe["probe_rows"] == 100, probe
    assert r.layer("ai").verdict == ACCEPT and "Binder Error" not in r.layer("ai").reason
    negated = EXISTS_GOLD.replace("clearly positive", "clearly negative")
    r = judge_pair(ctx, EXISTS_GOLD, negated, "bigquery")
    assert r.layer("ai").verdict == REJECT and r.final == REJECT and r.final_method == "ai"


def test_generated_families_on_movie_data_never_err_and_a_cte_gets_its_probe(movie_db, oracle_runtime):
    """Every rewrite family on the real movie data (label oracle p = 0): no deterministic layer
    contradicts the construction label, and the AI probe reads a filtering CTE as its table."""
    from pipelines.aisql.normal_form import schema_of
    from pipelines.aisql.rewrite_families import family_pairs
    from pipelines.aisql.scenarios import visible_types

    ctx = _ctx(movie_db, oracle_runtime, p=0.0)
    ctx.schema = schema_of(visible_types(movie_db.path))
    for p in family_pairs(1):
        r = judge_pair(ctx, p.gold_sql, p.candidate_sql, "bigquery", parts=False)
        for name in ("structural", "ai", "layers"):
            v = r.layer(name).verdict
            assert v == "cannot decide" or (v == ACCEPT) == p.equivalent or name == "ai", (p.family, name, v)
        if p.family == "cte_inlined":
            assert r.layer("ai").verdict == ACCEPT and r.final == ACCEPT, r.layer("ai").reason
