"""Issue 45 item 3: `quandary audit benchmark` reads only regular files within stated limits (size,
nesting, text lengths, records), each refused in one line before a run exists; a gold SQL the
parser could not take is refused the same way; Ctrl-C stops a run within seconds."""

import json
import os
import signal
import subprocess

import pytest

from cli import main
from cli.runs import get_instance
from pipelines.benchmark_audit import records as R
from tests.benchmark_audit.conftest import write_shop
from tests.cli.conftest import QUANDARY, REPO

pytestmark = pytest.mark.integration

OK = {"db_id": "shop", "question": "How many products?", "SQL": "SELECT count(*) FROM product"}


def _json(path, records):
    path.write_text(json.dumps(records))
    return path


def _cases(tmp):
    nested = "[" * 100_000 + "]" * 100_000
    yield "deep_file", _write(tmp / "deep.json", nested), "nested more than 64 levels"
    yield (
        "deep_value",
        _write(tmp / "deepv.json", json.dumps([OK])[:-2] + ', "x": ' + nested + "}]"),
        "nested more than 64 levels",
    )
    yield (
        "deep_jsonl_line",
        _write(tmp / "deep.jsonl", json.dumps(OK) + '\n{"x": ' + nested + "}\n"),
        "line 2 is nested more than 64 levels",
    )
    yield "long_db_id", _json(tmp / "db.json", [{**OK, "db_id": "d" * 300}]), "db_id is 300 characters"
    yield "long_question", _json(tmp / "q.json", [{**OK, "question": "q" * 100_000}]), "question is 100,000 characters"
    huge_sql = "SELECT count(*) FROM product WHERE " + " OR ".join(["unit_price > 1"] * 70_000)
    yield "huge_gold_sql", _json(tmp / "sql.json", [{**OK, "SQL": huge_sql}]), "gold SQL is 1,260,031 characters"
    deep_sql = "SELECT " + "(" * 60 + "1" + ")" * 60
    yield "deep_gold_sql", _json(tmp / "dsql.json", [{**OK, "SQL": deep_sql}]), "nests parentheses 60 deep"
    yield (
        "lone_surrogate",
        _write(tmp / "s.json", '[{"db_id": "shop", "question": "q\\ud800", "SQL": "SELECT 1"}]'),
        "lone surrogate",
    )
    yield "too_many_items", _json(tmp / "n.json", [OK] * (R.MAX_ITEMS + 1)), "50,001 records, more than"
    yield "dev_zero", "/dev/zero", "a device or special file, not a regular file"
    fifo = tmp / "fifo.json"
    os.mkfifo(fifo)
    yield "fifo", str(fifo), "a FIFO, not a regular file"
    yield "folder", str(tmp), "a folder, not a regular file"


def _write(path, text):
    path.write_text(text)
    return path


def test_hostile_files_are_refused_in_one_line_before_a_run(tmp_path, capsys):
    dbs = tmp_path / "dbs"
    write_shop(dbs / "shop" / "shop.sqlite")
    (tmp_path / "in").mkdir()
    for name, path, needle in _cases(tmp_path / "in"):
        assert main(["audit", "benchmark", str(path), "--dbs", str(dbs)]) == 2, name
        err = capsys.readouterr().err.strip()
        assert needle in err and len(err.splitlines()) == 1 and "Traceback" not in err, (name, err[:500])
    assert not get_instance().get_runs()


def test_oversized_file_is_refused_without_reading_it(tmp_path, capsys):
    big = tmp_path / "big.json"
    with big.open("wb") as fh:  # sparse: no disk used, no byte read by the check
        fh.truncate(R.MAX_FILE_BYTES + 1)
    assert main(["audit", "benchmark", str(big), "--dbs", str(tmp_path)]) == 2
    assert "larger than 100 MB" in capsys.readouterr().err


def test_ctrl_c_stops_an_audit_within_seconds(tmp_path, isolated_home):
    """A gold query that would run for 10 minutes; SIGINT once the run shows progress ends the
    command with 130 and a resume line (not after the query's deadline)."""
    dbs = tmp_path / "dbs"
    write_shop(dbs / "shop" / "shop.sqlite")
    slow = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    path = _json(tmp_path / "slow.json", [{**OK, "question": f"q{i}", "SQL": slow} for i in range(3)])
    env = {**os.environ, "PYTHONPATH": str(REPO), "QUANDARY_HOME": str(isolated_home)}
    env.update(DAGSTER_HOME=str(tmp_path / "dagster_home"), QUANDARY_PROGRESS="1")
    proc = subprocess.Popen(
        [QUANDARY, "audit", "benchmark", str(path), "--dbs", str(dbs), "--timeout", "600"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen = []
    for line in proc.stdout:  # the event: the step reports its progress (the gold query is running)
        seen.append(line)
        if "benchmark_audit_findings: 0/3" in line:
            break
    else:
        pytest.fail("no progress line: " + "".join(seen)[-2000:])
    proc.send_signal(signal.SIGINT)
    try:
        rest, _ = proc.communicate(timeout=60)  # far below the query's 600 s deadline
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("Ctrl-C did not stop the audit within 60 s")
    assert proc.returncode == 130, rest[-2000:]
    assert "interrupted" in rest and "Traceback" not in rest
