"""Hand-written labelled pairs on both CPU scenarios (movie, medical), one group per point of #39.

Each label is written from SQL semantics, not from a run: ``equivalent`` pairs return the same bag
of rows on *every* database of the schema (NULLs, duplicates wherever the shipped data has them,
any dates and ages) and for every behaviour of the aligned AI calls; the others differ on some
database or AI behaviour. Several of the non-equivalent ones are *data-blind*: on SemBench's
shipped rows both queries return the same result (no review on a BETWEEN boundary, no patient with
symptoms under 18, ...), which is exactly what a verdict drawn from this database alone must not
call a proof.

The spec (§3, §12.3) counts ``AI.IF(p)`` and ``AI.GENERATE(p … TRUE or FALSE).result = 'TRUE'`` as
the same call, so that pair is labelled equivalent; ``= 'FALSE'`` is its negation.

Used by ``tests/aisql/test_semantic_cases.py`` (no decided verdict may be wrong) and
``bench/bench_aisql_families.py --cases`` (decided share and errors per verdict class).
"""

from dataclasses import dataclass

MOVIE_AI = "AI.IF(('Determine if the following movie review is clearly positive, review: ', {a}.reviewText))"
MED_AI = 'AI.IF(FORMAT("Patient with these symptoms has {d}. Symptoms: %s.", {a}.symptoms))'
MED_GEN = (
    'AI.GENERATE(FORMAT("Patient with these symptoms has {d}. Symptoms: %s. Answer only TRUE or FALSE.", '
    "{a}.symptoms)).result = '{v}'"
)
TDB = "NLfilter(reviewText, 'the review sentiment is positive')"
PS = "FROM medical_dataset.patients AS p JOIN medical_dataset.symptoms_texts AS s ON p.patient_id = s.patient_id"


@dataclass(frozen=True)
class SemanticCase:
    id: str
    scenario: str
    point: str  # data_blind | ai_select | ai_generate | keys | rewrite
    equivalent: bool
    gold_sql: str
    candidate_sql: str
    why: str
    dialect: str = "bigquery"


def _m(a: str = "r") -> str:
    return MOVIE_AI.format(a=a)


def _d(disease: str, a: str = "s") -> str:
    return MED_AI.format(d=disease, a=a)


def _cases() -> list[SemanticCase]:
    r, allergy = _m(), _d("an allergy")
    reflux, ulcer = _d("gastroesophageal reflux disease"), _d("peptic ulcer disease")
    out = [
        # 1. differences the shipped data hides (a boundary, a dropped filter): never a proof
        SemanticCase(
            "medical-drop-adult-filter",
            "medical",
            "data_blind",
            False,
            f"SELECT p.patient_id {PS} WHERE p.age >= 18 AND {allergy}",
            f"SELECT p.patient_id {PS} WHERE {allergy}",
            "a patient under 18 with allergy symptoms is kept by the candidate only",
        ),
        SemanticCase(
            "medical-age-strict-bound",
            "medical",
            "data_blind",
            False,
            f"SELECT COUNT(*) {PS} WHERE p.age >= 30 AND {allergy}",
            f"SELECT COUNT(*) {PS} WHERE p.age > 30 AND {allergy}",
            "a 30-year-old patient is counted by the gold only",
        ),
        SemanticCase(
            "movie-between-vs-strict",
            "movie",
            "data_blind",
            False,
            f"SELECT r.reviewId FROM movie.reviews AS r WHERE r.creationDate BETWEEN '2019-01-01' AND '2019-12-31' AND {r}",
            f"SELECT r.reviewId FROM movie.reviews AS r WHERE r.creationDate > '2019-01-01' AND r.creationDate < '2019-12-31' AND {r}",
            "a review dated 2019-01-01 or 2019-12-31 is kept by the gold only",
        ),
        SemanticCase(
            "movie-drop-date-filter",
            "movie",
            "data_blind",
            False,
            f"SELECT COUNT(*) FROM movie.reviews AS r WHERE r.id = 'taken_3' AND r.creationDate >= '1990-01-01' AND {r}",
            f"SELECT COUNT(*) FROM movie.reviews AS r WHERE r.id = 'taken_3' AND {r}",
            "a review before 1990 (or with no date) is counted by the candidate only",
        ),
        SemanticCase(
            "movie-limit-more",
            "movie",
            "data_blind",
            False,
            f"SELECT r.reviewId FROM movie.reviews AS r WHERE r.id = 'taken_3' AND {r} ORDER BY r.reviewId LIMIT 50",
            f"SELECT r.reviewId FROM movie.reviews AS r WHERE r.id = 'taken_3' AND {r} ORDER BY r.reviewId LIMIT 60",
            "more than 50 positive reviews of taken_3 tell the limits apart",
        ),
        SemanticCase(
            "medical-coalesce-zero-in-avg",
            "medical",
            "data_blind",
            False,
            f"SELECT AVG(p.age) {PS} WHERE {allergy}",
            f"SELECT AVG(COALESCE(p.age, 0)) {PS} WHERE {allergy}",
            "a patient with no age changes the candidate's average only",
        ),
        # 2. AI calls that select other rows, however rare the positives
        SemanticCase(
            "medical-swap-reflux-ulcer",
            "medical",
            "ai_select",
            False,
            f"SELECT p.patient_id {PS} WHERE {reflux}",
            f"SELECT p.patient_id {PS} WHERE {ulcer}",
            "two different diseases: no row in common is accepted by both calls",
        ),
        SemanticCase(
            "medical-swap-dengue-malaria",
            "medical",
            "ai_select",
            False,
            f"SELECT COUNT(*) {PS} WHERE {_d('dengue')}",
            f"SELECT COUNT(*) {PS} WHERE {_d('malaria')}",
            "related fevers, different diseases",
        ),
        SemanticCase(
            "medical-swap-cold-asthma",
            "medical",
            "ai_select",
            False,
            f"SELECT AVG(p.age) {PS} WHERE {_d('common cold')}",
            f"SELECT AVG(p.age) {PS} WHERE {_d('bronchial asthma')}",
            "related respiratory labels, different diseases",
        ),
        SemanticCase(
            "movie-negated-intent",
            "movie",
            "ai_select",
            False,
            f"SELECT COUNT(*) FROM movie.reviews AS r WHERE r.id = 'taken_3' AND {r}",
            f"SELECT COUNT(*) FROM movie.reviews AS r WHERE r.id = 'taken_3' AND {r.replace('clearly positive', 'clearly negative')}",
            "negative instead of positive reviews",
        ),
        SemanticCase(
            "medical-paraphrase",
            "medical",
            "ai_select",
            True,
            f"SELECT p.patient_id {PS} WHERE {allergy}",
            f"SELECT p.patient_id {PS} WHERE "
            + 'AI.IF(FORMAT("Do these symptoms show that the patient has an allergy? Symptoms: %s.", s.symptoms))',
            "the same question in other words",
        ),
        SemanticCase(
            "movie-same-call-two-aliases",
            "movie",
            "ai_select",
            True,
            f"SELECT r.id, r.reviewId FROM movie.reviews AS r WHERE {r} AND r.creationDate IS NOT NULL AND "
            f"r.creationDate = (SELECT MAX(r2.creationDate) FROM movie.reviews AS r2 WHERE r2.id = r.id AND {_m('r2')})",
            f"SELECT r.id, r.reviewId FROM movie.reviews AS r WHERE {r} AND r.creationDate IS NOT NULL "
            "AND r.id IS NOT NULL QUALIFY RANK() OVER (PARTITION BY r.id ORDER BY r.creationDate DESC) = 1",
            "the latest positive reviews per movie (a NULL id or date matches no MAX): the gold's second call "
            "is the same prompt on the same column",
        ),
        # 2b. AI.GENERATE(...).result = 'TRUE' is the boolean call (spec §3, §12.3)
        SemanticCase(
            "medical-generate-true",
            "medical",
            "ai_generate",
            True,
            f"SELECT p.patient_id {PS} WHERE {allergy}",
            f"SELECT p.patient_id {PS} WHERE " + MED_GEN.format(d="an allergy", a="s", v="TRUE"),
            "AI.GENERATE answering TRUE/FALSE compared with 'TRUE' is AI.IF",
        ),
        SemanticCase(
            "medical-generate-false",
            "medical",
            "ai_generate",
            False,
            f"SELECT p.patient_id {PS} WHERE {allergy}",
            f"SELECT p.patient_id {PS} WHERE " + MED_GEN.format(d="an allergy", a="s", v="FALSE"),
            "compared with 'FALSE': the patients without an allergy",
        ),
        SemanticCase(
            "medical-generate-other-disease",
            "medical",
            "ai_generate",
            False,
            f"SELECT COUNT(*) {PS} WHERE {allergy}",
            f"SELECT COUNT(*) {PS} WHERE " + MED_GEN.format(d="skin acne", a="s", v="TRUE"),
            "the GENERATE form of another disease",
        ),
        # 3. keys the shipped data does not satisfy (Reviews.reviewId, Movies.id repeat)
        SemanticCase(
            "movie-count-vs-count-distinct-key",
            "movie",
            "keys",
            False,
            f"SELECT COUNT(*) FROM movie.reviews AS r WHERE r.id = 'taken_3' AND {r}",
            f"SELECT COUNT(DISTINCT r.reviewId) FROM movie.reviews AS r WHERE r.id = 'taken_3' AND {r}",
            "reviewId repeats (135 duplicate rows): a duplicated review is counted twice by the gold",
        ),
        SemanticCase(
            "movie-movies-id-distinct",
            "movie",
            "keys",
            False,
            "SELECT m.id FROM movie.movies AS m WHERE m.id LIKE 'a%'",
            "SELECT DISTINCT m.id FROM movie.movies AS m WHERE m.id LIKE 'a%'",
            "Movies.id repeats (11 duplicate rows)",
        ),
        # 5. rewrites a model writes every day, equivalent on every database
        SemanticCase(
            "medical-count-1-vs-star",
            "medical",
            "rewrite",
            True,
            f"SELECT COUNT(*) {PS} WHERE {allergy}",
            f"SELECT COUNT(1) {PS} WHERE {allergy}",
            "COUNT(1) counts every row",
        ),
        SemanticCase(
            "movie-bool-eq-true",
            "movie",
            "rewrite",
            True,
            f"SELECT r.reviewId FROM movie.reviews AS r WHERE r.isTopCritic = TRUE AND {r}",
            f"SELECT r.reviewId FROM movie.reviews AS r WHERE r.isTopCritic AND {r}",
            "b = TRUE is b (NULL either way)",
        ),
        SemanticCase(
            "movie-left-join-null-rejecting",
            "movie",
            "rewrite",
            True,
            f"SELECT m.title, r.reviewId FROM movie.movies AS m LEFT JOIN movie.reviews AS r ON m.id = r.id "
            f"WHERE r.criticName = 'Randall King' AND {r}",
            f"SELECT m.title, r.reviewId FROM movie.movies AS m JOIN movie.reviews AS r ON m.id = r.id "
            f"WHERE r.criticName = 'Randall King' AND {r}",
            "the WHERE rejects the NULL-extended rows, so the LEFT JOIN is an inner join",
        ),
        SemanticCase(
            "movie-left-join-not-null-rejecting",
            "movie",
            "rewrite",
            False,
            "SELECT m.title, r.reviewId FROM movie.movies AS m LEFT JOIN movie.reviews AS r ON m.id = r.id "
            "WHERE r.criticName IS NULL OR r.criticName = 'Randall King'",
            "SELECT m.title, r.reviewId FROM movie.movies AS m JOIN movie.reviews AS r ON m.id = r.id "
            "WHERE r.criticName IS NULL OR r.criticName = 'Randall King'",
            "IS NULL keeps the movies without reviews in the LEFT JOIN only",
        ),
        SemanticCase(
            "medical-coalesce-vs-case",
            "medical",
            "rewrite",
            True,
            f"SELECT p.patient_id, COALESCE(p.smoking_history, 'unknown') {PS} WHERE {allergy}",
            f"SELECT p.patient_id, CASE WHEN p.smoking_history IS NULL THEN 'unknown' ELSE p.smoking_history END "
            f"{PS} WHERE {allergy}",
            "COALESCE(x, c) is CASE WHEN x IS NULL THEN c ELSE x END",
        ),
        SemanticCase(
            "medical-avg-vs-sum-count",
            "medical",
            "rewrite",
            True,
            f"SELECT p.gender, AVG(p.age) {PS} WHERE {allergy} GROUP BY p.gender",
            f"SELECT p.gender, SUM(p.age) / COUNT(p.age) {PS} WHERE {allergy} GROUP BY p.gender",
            "AVG ignores NULLs as SUM and COUNT(x) do; both NULL on no ages",
        ),
        SemanticCase(
            "medical-avg-vs-sum-count-star",
            "medical",
            "rewrite",
            False,
            f"SELECT AVG(p.age) {PS} WHERE {allergy}",
            f"SELECT SUM(p.age) / COUNT(*) {PS} WHERE {allergy}",
            "COUNT(*) counts patients with no age: a NULL age lowers the candidate's mean",
        ),
        SemanticCase(
            "movie-anti-join-forms",
            "movie",
            "rewrite",
            True,
            f"SELECT m.title FROM movie.movies AS m LEFT JOIN movie.reviews AS r ON r.id = m.id AND {r} "
            "WHERE r.id IS NULL",
            f"SELECT m.title FROM movie.movies AS m WHERE NOT EXISTS "
            f"(SELECT 1 FROM movie.reviews AS r WHERE r.id = m.id AND {r})",
            "movies without a positive review; r.id is never NULL on a matched row",
        ),
        SemanticCase(
            "medical-group-key-order",
            "medical",
            "rewrite",
            True,
            f"SELECT p.gender, p.smoking_history, COUNT(*) {PS} WHERE {allergy} GROUP BY p.gender, p.smoking_history",
            f"SELECT p.gender, p.smoking_history, COUNT(*) {PS} WHERE {allergy} GROUP BY p.smoking_history, p.gender",
            "GROUP BY keys form a set",
        ),
        SemanticCase(
            "medical-group-key-dropped",
            "medical",
            "rewrite",
            False,
            f"SELECT p.gender, COUNT(*) {PS} WHERE {allergy} GROUP BY p.gender, p.smoking_history",
            f"SELECT p.gender, COUNT(*) {PS} WHERE {allergy} GROUP BY p.gender",
            "one row per gender and smoking history vs one per gender",
        ),
        # more of points 1 and 5, both scenarios
        SemanticCase(
            "movie-not-eq-false-vs-bool",
            "movie",
            "rewrite",
            True,
            f"SELECT r.reviewId FROM movie.reviews AS r WHERE NOT (r.isTopCritic = FALSE) AND {r}",
            f"SELECT r.reviewId FROM movie.reviews AS r WHERE r.isTopCritic AND {r}",
            "NOT (b = FALSE) is TRUE, FALSE or NULL exactly when b is",
        ),
        SemanticCase(
            "movie-coalesce-false-in-where",
            "movie",
            "rewrite",
            True,
            f"SELECT COUNT(*) FROM movie.reviews AS r WHERE COALESCE(r.isTopCritic, FALSE) AND {r}",
            f"SELECT COUNT(*) FROM movie.reviews AS r WHERE r.isTopCritic AND {r}",
            "a NULL flag drops the row either way",
        ),
        SemanticCase(
            "movie-count-star-vs-count-column",
            "movie",
            "data_blind",
            False,
            f"SELECT COUNT(*) FROM movie.reviews AS r WHERE r.id = 'taken_3' AND {r}",
            f"SELECT COUNT(r.criticName) FROM movie.reviews AS r WHERE r.id = 'taken_3' AND {r}",
            "a review without a critic name is counted by the gold only",
        ),
        SemanticCase(
            "movie-sum-case-vs-count",
            "movie",
            "data_blind",
            False,
            f"SELECT SUM(CASE WHEN {r} THEN 1 ELSE 0 END) FROM movie.reviews AS r WHERE r.id = 'taken_3'",
            f"SELECT COUNT(*) FROM movie.reviews AS r WHERE r.id = 'taken_3' AND {r}",
            "no review of taken_3: SUM is NULL, COUNT is 0",
        ),
        SemanticCase(
            "medical-between-vs-range",
            "medical",
            "rewrite",
            True,
            f"SELECT p.patient_id {PS} WHERE p.age BETWEEN 20 AND 40 AND {allergy}",
            f"SELECT p.patient_id {PS} WHERE p.age >= 20 AND p.age <= 40 AND {allergy}",
            "BETWEEN is the closed range",
        ),
        SemanticCase(
            "medical-having-count-positive",
            "medical",
            "rewrite",
            True,
            f"SELECT p.gender, COUNT(*) {PS} WHERE {allergy} GROUP BY p.gender HAVING COUNT(*) > 0",
            f"SELECT p.gender, COUNT(*) {PS} WHERE {allergy} GROUP BY p.gender",
            "every group has at least one row",
        ),
        SemanticCase(
            "medical-distinct-patient-dropped",
            "medical",
            "data_blind",
            False,
            f"SELECT DISTINCT p.patient_id {PS} WHERE {allergy}",
            f"SELECT p.patient_id {PS} WHERE {allergy}",
            "a patient with two symptom texts appears twice in the candidate",
        ),
        SemanticCase(
            "medical-not-equal-vs-not",
            "medical",
            "rewrite",
            True,
            f"SELECT COUNT(*) {PS} WHERE p.smoking_history <> 'never' AND {allergy}",
            f"SELECT COUNT(*) {PS} WHERE NOT (p.smoking_history = 'never') AND {allergy}",
            "x <> c is NOT (x = c), NULL alike",
        ),
        SemanticCase(
            "medical-or-null-vs-coalesce",
            "medical",
            "rewrite",
            True,
            f"SELECT p.patient_id {PS} WHERE (p.age > 60 OR p.age IS NULL) AND {allergy}",
            f"SELECT p.patient_id {PS} WHERE COALESCE(p.age, 100) > 60 AND {allergy}",
            "a missing age counts as over 60 on both sides",
        ),
        SemanticCase(
            "medical-swap-acne-psoriasis",
            "medical",
            "ai_select",
            False,
            f"SELECT p.patient_id {PS} WHERE {_d('skin acne')}",
            f"SELECT p.patient_id {PS} WHERE {_d('psoriasis')}",
            "two skin diseases",
        ),
        # the ThalamusDB dialect (NLfilter) through the same layers
        SemanticCase(
            "movie-tdb-count-1-vs-star",
            "movie",
            "rewrite",
            True,
            f"SELECT COUNT(*) FROM Reviews WHERE id = 'taken_3' AND {TDB}",
            f"SELECT COUNT(1) FROM Reviews WHERE {TDB} AND id = 'taken_3'",
            "COUNT(1) counts every row",
            "thalamusdb",
        ),
        SemanticCase(
            "movie-tdb-count-star-vs-count-column",
            "movie",
            "data_blind",
            False,
            f"SELECT COUNT(*) FROM Reviews WHERE id = 'taken_3' AND {TDB}",
            f"SELECT COUNT(criticName) FROM Reviews WHERE id = 'taken_3' AND {TDB}",
            "a review without a critic name is counted by the gold only",
            "thalamusdb",
        ),
    ]
    return out


CASES: tuple[SemanticCase, ...] = tuple(_cases())


def prediction_rows(cases=CASES) -> list[dict]:
    """The cases as ``quandary aisql evaluate`` rows (labelled from SQL semantics)."""
    return [
        {
            "id": c.id,
            "scenario": c.scenario,
            "question": c.why,
            "gold_sql": c.gold_sql,
            "predicted_sql": c.candidate_sql,
            "label": c.equivalent,
            "dialect": c.dialect,  # two golds have no AI call, which detection would read as ThalamusDB
        }
        for c in cases
    ]
