"""#39 item 1 in the judge job (`aisql judge`, aisql_verdicts / aisql_metrics): every stored verdict
says what it claims (compare.verdict_class, the one classification), k where it is a bounded proof,
and Table 1 counts the verdicts per class, with coverage and accuracy on decided pairs apart."""

import polars as pl

from pipelines.aisql.compare import BOUNDED, EQUAL_DB, OPEN, PROOF, VERDICT_CLASSES, WITNESS
from pipelines.aisql.metrics import metric_table, table1_sections
from pipelines.aisql.pipeline import (
    STALE_EXECUTIONS,
    VERDICT_SCHEMA,
    AisqlSettings,
    layers_verdict,
    make_runtime,
    run_executions,
    run_methods,
)

AI = "AI.IF(('Determine if the following movie review is clearly positive, review: ', {a}.reviewText))"
GOLD = f"SELECT COUNT(*) AS n FROM movie.reviews AS r WHERE r.id = 'taken_3' AND {AI.format(a='r')}"
PAIRS = [  # (id, candidate, label, the class the deterministic layers must give)
    (
        "alias",
        f"SELECT COUNT(*) AS n FROM movie.reviews AS x WHERE x.id = 'taken_3' AND {AI.format(a='x')}",
        True,
        PROOF,
    ),
    (
        "count1",
        f"SELECT COUNT(1) AS n FROM movie.reviews AS r WHERE r.id = 'taken_3' AND {AI.format(a='r')}",
        True,
        None,
    ),
    (
        "movie",
        f"SELECT COUNT(*) AS n FROM movie.reviews AS r WHERE r.id = 'ant_man' AND {AI.format(a='r')}",
        False,
        WITNESS,
    ),
]


def test_the_judge_job_stores_a_class_per_verdict_and_table1_counts_them(movie_db):
    pairs = pl.DataFrame(
        [
            {"pair_id": pid, "dialect": "bigquery", "question": "q", "gold_sql": GOLD, "candidate_sql": c, "label": y}
            for pid, c, y, _ in PAIRS
        ]
    )
    settings = AisqlSettings(flip_rate=0.0, methods=("ex", "layers"))
    rt = make_runtime(settings, movie_db)
    try:
        execs, evidence = run_executions(pairs, movie_db, rt, settings)
    finally:
        rt.close()
    verdicts = run_methods(pairs, execs, evidence, settings, schema_of=lambda d: "")
    assert verdicts.schema == pl.Schema(VERDICT_SCHEMA)
    assert set(verdicts["verdict_class"]) <= set(VERDICT_CLASSES)
    layers = {r["pair_id"]: r for r in verdicts.filter(pl.col("method") == "layers").iter_rows(named=True)}
    for pid, _, _, cls in PAIRS:
        if cls is not None:
            assert layers[pid]["verdict_class"] == cls, layers[pid]["reason"]
    # COUNT(1) vs COUNT(*): proven on every database, or by the verifier up to k rows per table (k stored)
    assert layers["count1"]["verdict_class"] in (PROOF, BOUNDED) and layers["count1"]["accepted"]
    for r in layers.values():
        assert (r["bound_k"] == 3) == (r["verdict_class"] == BOUNDED)
        assert r["accepted"] == (r["verdict_class"] in (PROOF, BOUNDED))
    # EX's accept is agreement on this database: evidence, never a proof
    ex = verdicts.filter(pl.col("method") == "ex")
    assert set(ex.filter(pl.col("accepted"))["verdict_class"]) == {EQUAL_DB}
    assert set(ex.filter(~pl.col("accepted"))["verdict_class"]) <= {WITNESS}

    m = metric_table(pairs, verdicts)
    row = m.filter(pl.col("method") == "layers").row(0, named=True)
    assert row["n_proof"] + row["n_bounded"] == 2 and row["n_witness"] == 1
    assert row["wrong_proof"] == row["wrong_bounded"] == row["wrong_witness"] == 0
    assert row["coverage"] == 1.0 and row["acc_decided"] == 1.0
    assert m.filter(pl.col("method") == "ex").row(0, named=True)["n_equal_on_database"] == int(ex["accepted"].sum())
    text = "\n".join(table1_sections(m.with_columns(pl.lit("synthetic").alias("set")), "movie"))
    assert "| Deterministic layers (stand-in) | bigquery | differ (witness) | 1 | 33.3 | 0 |" in text
    if row["n_bounded"]:
        assert "equivalent up to k = 3 rows per table" in text


def _frames(status: list[str], classes: list[str | None] | None):
    pairs = pl.DataFrame({"pair_id": ["a", "b"], "dialect": ["bigquery"] * 2, "label": [True, False]})
    verdicts = pl.DataFrame(
        {"pair_id": ["a", "b"], "method": ["layers"] * 2, "accepted": [False, False], "status": status}
    )
    if classes is not None:
        verdicts = verdicts.with_columns(pl.Series("verdict_class", classes), pl.lit(None, pl.Int64).alias("bound_k"))
    return pairs, verdicts


def test_undecided_is_not_zero_and_old_artifacts_read_as_unknown():
    # every pair open: coverage 0, accuracy on decided pairs '–' (never 0), the open class counted
    m = metric_table(*_frames(["undecided", "undecided"], [OPEN, OPEN]))
    r = m.row(0, named=True)
    assert (r["decided"], r["acc_decided"], r["n_open"], r["errors"]) == (0, None, 2, 0)
    text = "\n".join(table1_sections(m, "movie"))
    assert "| 0/2 (0.0) | – |" in text and "| cannot decide | 2 | 100.0 | – |" in text
    # verdicts stored before the class column: read, counted, classes unknown ('–'), never 0
    m = metric_table(*_frames(["ok", "ok"], None))
    r = m.row(0, named=True)
    assert r["n"] == 2 and r["n_proof"] is None and r["wrong_witness"] is None
    assert "verdict classes: – (not recorded" in "\n".join(table1_sections(m, "movie"))
    old_metrics = m.drop([c for c in m.columns if c.startswith(("n_", "wrong_")) or c == "bound_k"])
    assert "verdict classes: – (not recorded" in "\n".join(table1_sections(old_metrics, "movie"))


def test_an_execution_row_stored_before_the_layers_verdict_is_undecided_and_says_so():
    v = layers_verdict("p", {"pair_id": "p", "gold_status": "ok"})
    assert (v.status, v.accepted, v.verdict_class, v.reason) == ("undecided", False, OPEN, STALE_EXECUTIONS)
