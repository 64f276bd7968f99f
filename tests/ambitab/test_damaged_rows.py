"""Damaged AmbiTab sources never build green with fewer records (issue 34 item 9): a row that cannot
be read as its format promises (a deleted field, a duplicated record) fails the build naming the file
and line unless the user passes an allowance, and every record's reference SQL must parse."""

import json

import pytest

from cli import main
from pipelines.ambitab.corpora import build_corpus
from pipelines.ambitab.sources import SourceError
from tests.ambitab.test_corrupt_sources import mirror

AMBROSIA = "ambrosia/ambrosia_resplit_test.jsonl"
INTERACT = "bird_interact/bird_interact_conv/data/datasets/bird_interact_data.jsonl"
SPIDER_DEV = "spider/dev.json"


def _lines(shared, rel):
    return (shared / rel).read_text().splitlines(keepends=True)


def test_a_deleted_field_fails_the_build_naming_file_and_line(shared_data, corpus_build, tmp_path):
    lines = _lines(shared_data, AMBROSIA)
    row = json.loads(lines[4])
    del row["question"]
    lines[4] = json.dumps(row) + "\n"
    root = mirror(shared_data, tmp_path / "a", AMBROSIA, "".join(lines).encode())
    with pytest.raises(SourceError) as err:
        build_corpus("ambrosia", root)
    msg = str(err.value)
    assert "ambrosia_resplit_test.jsonl line 5" in msg and "missing key(s) ['question']" in msg
    assert "--allow-malformed 1" in msg and "\n" not in msg
    clean = corpus_build("ambrosia")  # the session's clean build
    allowed = build_corpus("ambrosia", root, allow_malformed=1)  # the explicit allowance
    assert len(allowed.records) < len(clean.records)


def test_a_deleted_field_in_spider_fails_ambiqt(shared_data, tmp_path):
    dev = json.loads((shared_data / SPIDER_DEV).read_text())
    del dev[3]["query"]
    root = mirror(shared_data, tmp_path / "q", SPIDER_DEV, json.dumps(dev).encode())
    with pytest.raises(SourceError, match=r"dev\.json item 4: unreadable"):
        build_corpus("ambiqt", root)


def test_a_duplicated_record_is_named(shared_data, tmp_path):
    lines = _lines(shared_data, INTERACT)
    lines.insert(3, lines[1])
    root = mirror(shared_data, tmp_path / "d", INTERACT, "".join(lines).encode())
    with pytest.raises(SourceError) as err:
        build_corpus("bird_interact", root)
    msg = str(err.value)
    iid = json.loads(lines[1])["instance_id"]
    assert f"line 4: duplicate instance_id '{iid}' (also line 2)" in msg and "bird_interact_data.jsonl" in msg


def test_an_invalid_reference_sql_fails_naming_the_record(shared_data, tmp_path, capsys):
    lines = _lines(shared_data, INTERACT)
    i = next(k for k, line in enumerate(lines) if json.loads(line).get("sol_sql"))
    row = json.loads(lines[i])
    row["sol_sql"] = ["SELEC broken FRM nowhere"]
    lines[i] = json.dumps(row) + "\n"
    root = mirror(shared_data, tmp_path / "s", INTERACT, "".join(lines).encode())
    with pytest.raises(SourceError) as err:
        build_corpus("bird_interact", root)
    assert "reference SQL does not parse as postgres" in str(err.value) and row["instance_id"] in str(err.value)
    assert main(["ambitab", "build", "--corpus", "bird_interact", "--data", str(root)]) == 1
    assert "reference SQL does not parse" in capsys.readouterr().err


def test_a_duplicated_row_in_a_source_without_ids_is_named(shared_data, corpus_build, tmp_path):
    """Ambrosia and TACO rows carry no id: a whole repeated row is the duplicate (it used to build green)."""
    lines = _lines(shared_data, AMBROSIA)
    lines.insert(6, lines[2])
    root = mirror(shared_data, tmp_path / "r", AMBROSIA, "".join(lines).encode())
    with pytest.raises(SourceError) as err:
        build_corpus("ambrosia", root)
    msg = str(err.value)
    assert "ambrosia_resplit_test.jsonl line 7: the same row as line 3" in msg and "\n" not in msg
    assert len(build_corpus("ambrosia", root, allow_malformed=1).records) == len(corpus_build("ambrosia").records)
