"""Corrupt, truncated or empty source files fail the build loudly (issue 20 item 6).

Each corpus's source file is cut at several points (empty, and inside a line near 10%, 60% and
95% of its bytes) in a copy of ../shared/data whose other files are links to the real ones; the
conversion must raise one clear error naming the file and the line / byte where it broke, never
build part of the file green. A cut exactly at a line boundary of a JSONL file leaves a shorter,
valid file: no parser can tell it apart, so the cut points avoid it.
"""

import re
from pathlib import Path

import pytest

from cli import main
from pipelines.ambitab.corpora import build_corpus
from pipelines.ambitab.sources import SourceError
from storage.artifacts import latest_path

SOURCES = [
    ("ambrosia", "ambrosia/ambrosia_resplit_test.jsonl"),
    ("ambiqt", "spider/dev.json"),
    ("ambiqt", "ambiqt/benchmark/col-synonyms/two_col_synonyms.json"),
    ("ew_bird", "bird/dev/dev.jar.json"),
    ("bird", "bird/dev/dev.jar.json"),
    ("taco", "taco/us/new_sql_nl_single/vermont_center_for_96.jsonl"),
    ("taco", "taco/us/new_schema/vermont_center_for_96_schema.json"),
    ("bird_interact", "bird_interact/bird_interact_conv/data/datasets/bird_interact_data.jsonl"),
    ("bird_interact", "bird_interact/bird_interact_conv/data/DBs/alien/alien_kb.jsonl"),
]
FRACTIONS = (0.0, 0.1, 0.6, 0.95)


def mirror(shared: Path, root: Path, rel: str, data: bytes) -> Path:
    """``root`` mirrors ``shared`` with links, except ``rel``, which holds ``data``."""
    src, dst = shared, root
    for part in Path(rel).parts[:-1]:
        dst.mkdir(parents=True, exist_ok=True)
        for child in src.iterdir():
            if child.name != part and not (dst / child.name).exists():
                (dst / child.name).symlink_to(child)
        src, dst = src / part, dst / part
    dst.mkdir(parents=True, exist_ok=True)
    for child in src.iterdir():
        if child.name != Path(rel).name:
            (dst / child.name).symlink_to(child)
    (dst / Path(rel).name).write_bytes(data)
    return root


def cut_point(data: bytes, fraction: float) -> int:
    """A byte offset near ``fraction`` that falls inside a line (so the cut line is incomplete)."""
    cut = int(len(data) * fraction)
    if cut == 0:
        return 0
    while cut < len(data) - 1 and (data[cut : cut + 1] in (b"\n", b"\r", b" ") or data[cut - 1 : cut] == b"\n"):
        cut += 1
    return cut


@pytest.mark.parametrize("corpus,rel", SOURCES, ids=[f"{c}:{Path(r).name}" for c, r in SOURCES])
def test_a_truncated_source_fails_the_build_naming_file_and_position(shared_data, tmp_path, corpus, rel):
    data = (shared_data / rel).read_bytes()
    for fraction in FRACTIONS:
        cut = cut_point(data, fraction)
        root = mirror(shared_data, tmp_path / f"cut{cut}", rel, data[:cut])
        with pytest.raises(SourceError) as err:
            build_corpus(corpus, root)
        msg = str(err.value)
        assert Path(rel).name in msg, msg
        assert re.search(r"line \d+|byte \d+", msg) or "empty file" in msg, msg
        assert "\n" not in msg


def test_the_cli_build_fails_in_one_line_and_keeps_the_stored_records(shared_data, tmp_path, capsys):
    assert main(["ambitab", "build", "--corpus", "ambrosia", "--data", str(shared_data)]) == 0
    good = latest_path("ambitab_records", "ambrosia")
    rel = "ambrosia/ambrosia_resplit_test.jsonl"
    data = (shared_data / rel).read_bytes()
    root = mirror(shared_data, tmp_path / "cut", rel, data[: cut_point(data, 0.6)])
    capsys.readouterr()
    assert main(["ambitab", "build", "--corpus", "ambrosia", "--data", str(root)]) == 1
    err = capsys.readouterr().err
    assert "ambrosia_resplit_test.jsonl" in err and re.search(r"line \d+ is not valid JSON", err), err
    assert "Traceback" not in err
    assert latest_path("ambitab_records", "ambrosia") == good
