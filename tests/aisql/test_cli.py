"""`quandary aisql ...` commands: results, call counts, one-line errors."""

import json

import polars as pl

from cli import main
from cli.commands.aisql import per_variant_table
from tests.aisql.conftest import movie_query


def test_run_prints_rows_and_calls(sembench_root, capsys):
    sql = movie_query(sembench_root, "thalamusdb", "Q3")
    assert main(["aisql", "run", "movie", sql, "--data", str(sembench_root), "--flip-rate", "0"]) == 0
    out = capsys.readouterr().out
    assert "14" in out and "AI-operator calls: 119 distinct (made 119, cached 0, failed 0)" in out
    assert (
        main(
            [
                "aisql",
                "run",
                "movie",
                movie_query(sembench_root, "bigquery", "Q3"),
                "--data",
                str(sembench_root),
                "--flip-rate",
                "0",
                "--json",
            ]
        )
        == 0
    )
    rec = json.loads(capsys.readouterr().out)
    assert rec["dialect"] == "bigquery" and rec["rows"] == [[14]] and rec["status"] == "ok"


def test_run_errors_are_one_line(sembench_root, capsys):
    assert (
        main(
            [
                "aisql",
                "run",
                "movie",
                "SELECT AI.FROBNICATE(('x', reviewText)) FROM movie.reviews",
                "--data",
                str(sembench_root),
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert err.startswith("error: AI.FROBNICATE: unknown AI operator") and "Traceback" not in err
    assert (
        main(
            [
                "aisql",
                "run",
                "movie",
                movie_query(sembench_root, "bigquery", "Q1"),
                "--data",
                str(sembench_root),
                "--budget",
                "50",
            ]
        )
        == 1
    )
    assert "budget_exceeded: AI-operator call budget of 50 exceeded" in capsys.readouterr().err
    assert main(["aisql", "run", "cinema", "SELECT 1", "--data", str(sembench_root)]) == 2
    assert "unknown scenario 'cinema'" in capsys.readouterr().err


def test_split_command(sembench_root, capsys):
    assert main(["aisql", "split", movie_query(sembench_root, "thalamusdb", "Q2"), "--scenario", "movie"]) == 0
    out = capsys.readouterr().out
    assert "structural:     SELECT reviewId FROM Reviews WHERE id = 'taken_3' AND TRUE LIMIT 5" in out
    assert "AI part 0 [nlfilter on Reviews; inputs Reviews.reviewText]" in out
    assert main(["aisql", "split", "SELECT FROM ("]) == 2
    assert capsys.readouterr().err.startswith("error: cannot split")


def test_label_import_and_report_without_results(tmp_path, capsys, isolated_home):
    csv = tmp_path / "labels.csv"
    csv.write_text("pair_id,label,rationale\nabc,yes,same intent\ndef,maybe,\nghi,no,negated\n")
    assert main(["aisql", "label", str(csv)]) == 0
    captured = capsys.readouterr()
    assert "stored 2 manual labels" in captured.out and "'maybe' is not yes/no" in captured.err
    lines = (isolated_home / "aisql" / "labels" / "manual.jsonl").read_text().splitlines()
    assert [json.loads(x)["label"] for x in lines] == [True, False]
    bad = tmp_path / "bad.csv"
    bad.write_text("id,verdict\n1,yes\n")
    assert main(["aisql", "label", str(bad)]) == 2
    assert "needs a header with pair_id and label" in capsys.readouterr().err
    assert main(["report", "aisql"]) == 1
    assert "no aisql results yet" in capsys.readouterr().err


def test_the_per_variant_table_shows_every_row_and_method():
    """#24 item 7: thirteen variant types print as thirteen rows (no truncated frame repr, no "…")."""

    types = [f"variant_{i:02d}" for i in range(13)]
    methods = ["ex", "ours", "judge", "solver", "autorater", "llm_sql_solver"]
    pairs = pl.DataFrame({"pair_id": types, "variant_type": types, "label": [True] * 13})
    verdicts = pl.DataFrame(
        [
            {"pair_id": t, "method": m, "accepted": i % 2 == 0, "status": "ok"}
            for i, t in enumerate(types)
            for m in methods
        ]
    )
    text = per_variant_table(pairs, verdicts)
    lines = text.splitlines()
    assert len(lines) == 2 + 13 and "…" not in text
    assert all(m in lines[0] for m in methods)
