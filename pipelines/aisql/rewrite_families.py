"""Generator-made labelled pairs for every rewrite family of #33 item 1, equivalent and not.

Each family writes a gold query and a candidate over the movie schema (BigQuery dialect, one
``AI.IF`` the label oracle reads), labelled by construction: ``equivalent`` pairs return the same
bag of rows on every database and for every behaviour of the AI call; the others differ on some
database (not necessarily on SemBench's: that is what the test-suite databases are for).
Parameters (literals, thresholds) vary with the seed so that a family is not one fixed text.

:func:`family_pairs` feeds ``tests/aisql/test_normal_form.py`` (no wrong proof on random
databases) and ``bench/bench_aisql_families.py`` (decided share and errors, pairs/s), whose rows
are ``quandary aisql evaluate`` input.
"""

import random
from dataclasses import dataclass

AI = "AI.IF(('Determine if the following movie review is clearly positive, review: ', {a}.reviewText))"
MOVIES = ("taken_3", "ant_man_and_the_wasp_quantumania", "avatar_the_way_of_water", "barbie")


@dataclass(frozen=True)
class FamilyPair:
    family: str
    equivalent: bool
    gold_sql: str
    candidate_sql: str


def _families(rng: random.Random) -> list[tuple[str, bool, str, str]]:
    m1, m2 = rng.sample(MOVIES, 2)
    k = rng.randint(1, 4)
    n = rng.choice((3, 5, 10))
    ai_r, ai_x = AI.format(a="r"), AI.format(a="x")
    count = f"SELECT COUNT(*) FROM movie.reviews AS r WHERE r.id = '{m1}' AND {ai_r}"
    ids = f"SELECT r.reviewId FROM movie.reviews AS r WHERE r.id = '{m1}' AND {ai_r}"
    per_movie = f"SELECT r.id, COUNT(*) AS n FROM movie.reviews AS r WHERE {ai_r} GROUP BY r.id"
    return [
        # equivalent on every database, for every behaviour of the AI call
        ("alias_rename", True, count, count.replace("AS r", "AS x").replace("r.", "x.").replace(ai_r, ai_x)),
        ("conjunct_order", True, count, f"SELECT COUNT(*) FROM movie.reviews AS r WHERE {ai_r} AND r.id = '{m1}'"),
        (
            "disjunct_order",
            True,
            f"SELECT r.reviewId FROM movie.reviews AS r WHERE (r.id = '{m1}' OR r.id = '{m2}') AND {ai_r}",
            f"SELECT r.reviewId FROM movie.reviews AS r WHERE {ai_r} AND (r.id = '{m2}' OR r.id = '{m1}')",
        ),
        (
            "cte_inlined",
            True,
            ids,
            f"WITH picked AS (SELECT * FROM movie.reviews AS r WHERE r.id = '{m1}') "
            f"SELECT r.reviewId FROM picked AS r WHERE {ai_r}",
        ),
        (
            "derived_table",
            True,
            ids,
            f"SELECT q.reviewId FROM (SELECT * FROM movie.reviews AS r WHERE {ai_r}) AS q WHERE q.id = '{m1}'",
        ),
        (
            "in_vs_or",
            True,
            f"SELECT r.reviewId FROM movie.reviews AS r WHERE r.id IN ('{m1}', '{m2}') AND {ai_r}",
            f"SELECT r.reviewId FROM movie.reviews AS r WHERE (r.id = '{m2}' OR r.id = '{m1}') AND {ai_r}",
        ),
        ("int_bound", True, f"{per_movie} HAVING COUNT(*) > {k}", f"{per_movie} HAVING COUNT(*) >= {k + 1}"),
        (
            "distinct_vs_group_by",
            True,
            f"SELECT DISTINCT r.id FROM movie.reviews AS r WHERE {ai_r}",
            f"SELECT r.id FROM movie.reviews AS r WHERE {ai_r} GROUP BY r.id",
        ),
        (
            "join_form",
            True,
            f"SELECT m.title, r.reviewId FROM movie.movies AS m JOIN movie.reviews AS r ON m.id = r.id "
            f"WHERE m.id = '{m1}' AND {ai_r}",
            f"SELECT m.title, r.reviewId FROM movie.reviews AS r, movie.movies AS m "
            f"WHERE {ai_r} AND r.id = m.id AND m.id = '{m1}'",
        ),
        (
            "in_subquery_vs_exists",
            True,
            f"SELECT m.title FROM movie.movies AS m WHERE m.id IN (SELECT r.id FROM movie.reviews AS r WHERE {ai_r})",
            f"SELECT m.title FROM movie.movies AS m WHERE EXISTS "
            f"(SELECT 1 FROM movie.reviews AS r WHERE r.id = m.id AND {ai_r})",
        ),
        (
            "having_vs_subquery",
            True,
            f"{per_movie} HAVING COUNT(*) >= {k}",
            f"SELECT q.id, q.n FROM ({per_movie}) AS q WHERE q.n >= {k}",
        ),
        # not equivalent: some database (or some AI behaviour) tells them apart
        ("wrong_literal", False, count, count.replace(m1, m2)),
        ("limit_changed", False, f"{ids} ORDER BY r.reviewId LIMIT {n}", f"{ids} ORDER BY r.reviewId LIMIT {n + 5}"),
        (
            "distinct_dropped",
            False,
            f"SELECT DISTINCT r.id FROM movie.reviews AS r WHERE {ai_r}",
            f"SELECT r.id FROM movie.reviews AS r WHERE {ai_r}",
        ),
        ("int_bound_off_by_one", False, f"{per_movie} HAVING COUNT(*) > {k}", f"{per_movie} HAVING COUNT(*) >= {k}"),
        (
            "disjunct_dropped",
            False,
            f"SELECT r.reviewId FROM movie.reviews AS r WHERE (r.id = '{m1}' OR r.id = '{m2}') AND {ai_r}",
            f"SELECT r.reviewId FROM movie.reviews AS r WHERE r.id = '{m1}' AND {ai_r}",
        ),
        (
            "inner_vs_left_join",
            False,
            f"SELECT m.title, r.reviewId FROM movie.movies AS m JOIN movie.reviews AS r ON m.id = r.id AND {ai_r}",
            f"SELECT m.title, r.reviewId FROM movie.movies AS m LEFT JOIN movie.reviews AS r ON m.id = r.id AND {ai_r}",
        ),
        (
            "not_in_vs_not_exists",
            False,
            f"SELECT m.title FROM movie.movies AS m WHERE m.id NOT IN "
            f"(SELECT r.id FROM movie.reviews AS r WHERE {ai_r})",
            f"SELECT m.title FROM movie.movies AS m WHERE NOT EXISTS "
            f"(SELECT 1 FROM movie.reviews AS r WHERE r.id = m.id AND {ai_r})",
        ),
        (
            "group_key_added",
            False,
            f"SELECT r.id, COUNT(*) FROM movie.reviews AS r WHERE {ai_r} GROUP BY r.id",
            f"SELECT r.id, COUNT(*) FROM movie.reviews AS r WHERE {ai_r} GROUP BY r.id, r.criticName",
        ),
        (
            "ai_condition_negated_scope",
            False,
            f"SELECT COUNT(*) FROM movie.reviews AS r WHERE r.id = '{m1}' AND NOT {ai_r}",
            f"SELECT COUNT(*) FROM movie.reviews AS r WHERE NOT (r.id = '{m1}' AND {ai_r})",
        ),
    ]


FAMILIES = tuple((name, eq) for name, eq, _, _ in _families(random.Random(0)))


def family_pairs(seed: int = 0, per_family: int = 1) -> list[FamilyPair]:
    """``per_family`` pairs of every family, with seeded parameters."""
    rng = random.Random(seed)
    out = []
    for _ in range(per_family):
        out += [FamilyPair(name, eq, g, c) for name, eq, g, c in _families(rng)]
    return out


def prediction_rows(pairs: list[FamilyPair]) -> list[dict]:
    """The pairs as ``quandary aisql evaluate`` rows (labelled by construction)."""
    return [
        {
            "id": f"{p.family}-{i}",
            "scenario": "movie",
            "question": f"rewrite family {p.family}",
            "gold_sql": p.gold_sql,
            "predicted_sql": p.candidate_sql,
            "label": p.equivalent,
        }
        for i, p in enumerate(pairs)
    ]
