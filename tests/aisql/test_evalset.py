"""Labelled pairs: variants by construction, balanced per dialect; generator candidates only count once labelled."""

import json

from pipelines.aisql.evalset import (
    apply_manual_labels,
    build_pairs,
    few_shot_examples,
    generator_pairs,
    import_label_csv,
    pairs_frame,
    read_manual_labels,
)
from pipelines.aisql.scenarios import MOVIE, load_queries
from resources.llm import Council
from resources.llm.registry import call_log
from tests.llm_fakes import scripted_member


def test_pairs_are_balanced_per_dialect(sembench_root):
    golds = [g for g in load_queries("movie", sembench_root) if g.question_id in ("Q2", "Q3", "Q8")]
    pairs = build_pairs("movie", sembench_root, golds, correct_share=0.7)
    for dialect in ("bigquery", "thalamusdb"):
        sub = pairs.filter(pairs["dialect"] == dialect)
        share = sub["label"].mean()
        assert 0.6 <= share <= 0.8, (dialect, share)
        assert set(sub["label_source"]) == {"constructed"}
    assert pairs["pair_id"].n_unique() == pairs.height


def test_generator_candidates_are_unlabelled_until_a_person_labels_them(sembench_root, scripted, tmp_path):
    examples = few_shot_examples(sembench_root, "movie", "thalamusdb")
    assert examples and all("NLfilter" in sql or "NLjoin" in sql for _, sql in examples)
    scripted.responder = lambda req: json.dumps(
        {
            "sql": "SELECT count(*) AS positive_review_cnt FROM Reviews "
            "WHERE id = 'taken_3' AND NLfilter(reviewText, 'positive')"
        }
    )
    council = Council("generators", [scripted_member("gen")], call_log())
    golds = [g for g in load_queries("movie", sembench_root, dialects=("thalamusdb",)) if g.question_id == "Q3"]
    rows = generator_pairs(council, sembench_root, MOVIE, golds, lambda d: "TABLE Reviews (...)", samples=2)
    assert len(rows) == 2 and {r["label"] for r in rows} == {None}
    assert [json.loads(r["generator"])["sample_idx"] for r in rows] == [0, 1]
    prompt = scripted.requests[0].messages
    assert "Count of positive reviews" in prompt[-1]["content"] and "sentiment" not in prompt[0]["content"].lower()
    pairs = pairs_frame(rows)  # both samples are the same SQL: one pair
    assert pairs.height == 1
    csv = tmp_path / "l.csv"
    csv.write_text(f"pair_id,label,rationale\n{pairs['pair_id'][0]},yes,paraphrased filter\n")
    import_label_csv(csv, tmp_path / "manual.jsonl")
    labelled = apply_manual_labels(pairs, read_manual_labels(tmp_path / "manual.jsonl"))
    assert labelled["label"].to_list() == [True] and labelled["label_source"].to_list() == ["manual"]


def test_count_key_pairs_only_for_declared_keys(sembench_root):
    """#39: `COUNT(*)` vs `COUNT(key)` is equivalent only where the key cannot be NULL, i.e. a declared
    key. SemBench declares none, so a label of True for COUNT(reviewId) was wrong by construction
    (the verifier found a database with a NULL reviewId); the judge job makes no such pair there."""
    from dataclasses import replace

    from pipelines.aisql.evalset import variant_pairs

    golds = [g for g in load_queries("movie", sembench_root) if g.question_id in ("Q2", "Q3", "Q4", "Q5", "Q8")]
    assert not variant_pairs(MOVIE, golds, correct_share=None, variant_types=("count_key",))
    declared = replace(MOVIE, tables=tuple(replace(t, declared_key=t.key) for t in MOVIE.tables))
    rows = variant_pairs(declared, golds, correct_share=None, variant_types=("count_key",))
    assert rows and all(r["label"] is True for r in rows)
