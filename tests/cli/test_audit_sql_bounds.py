"""Issue 23 item 8: `quandary audit sql` is bounded like the other untrusted paths — a worker process
with an address-space limit (DuckDB's memory_limit does not count string functions such as
repeat), a deadline (`--timeout`, bad values refused), and an immediate Ctrl-C with one line.

Memory-heavy cases run with a small budget (QUANDARY_AUDIT_MEMORY_MB) so they stay cheap."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from resources.sql.audit_runner import run_audit_query
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
CLI = "import sys; from cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("QUANDARY_HOME", str(tmp_path / "qhome"))
    monkeypatch.setenv("QUANDARY_AUDIT_MEMORY_MB", "256")
    return tmp_path / "qhome"


def _cli(*args, **kw):
    return subprocess.run([sys.executable, "-c", CLI, *args], capture_output=True, text=True, timeout=300, **kw)


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1"])
def test_bad_timeouts_are_refused(home, value):
    r = _cli("audit", "sql", "SELECT 1", f"--timeout={value}")
    assert r.returncode == 2
    assert "timeout" in r.stderr and "Traceback" not in r.stderr


def test_runaway_query_stops_at_the_deadline(home):
    start = time.monotonic()
    out = run_audit_query("SELECT sum(a % 7) FROM range(1000000000000) t(a)", timeout_s=1.0)
    assert not out.ok and out.kind == "timeout", out
    assert out.elapsed_s <= 1.25 + 0.5, out.elapsed_s  # the query's own wall time, kill at 1.25x
    assert time.monotonic() - start < 120


def test_string_functions_cannot_take_the_machine(home):
    out = run_audit_query(
        "SELECT length(a) + length(b) + length(c) FROM "
        "(SELECT repeat('x', 1000000000) a, repeat('y', 1000000000) b, repeat('z', 1000000000) c)",
        timeout_s=30.0,
    )
    assert not out.ok and out.kind == "too_large", out
    assert "memory" in out.message


def test_plain_query_still_answers(home):
    out = run_audit_query("SELECT 41 + 1 AS answer", timeout_s=30.0)
    assert out.ok and out.columns == ["answer"] and out.rows == [(42,)]


def test_cli_timeout_is_one_line(home):
    r = _cli("audit", "sql", "SELECT sum(a % 7) FROM range(1000000000000) t(a)", "--timeout", "1")
    assert r.returncode == 1
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "timeout" in lines[0] and "--timeout" in lines[0], r.stderr


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def _busy_worker(pid: int) -> int | None:
    """The audit worker of ``pid`` once it is running the query (it has used CPU time)."""
    for child in _children(pid):
        try:
            cmd = Path(f"/proc/{child}/cmdline").read_bytes()
            stat = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if b"audit_worker" in cmd and int(stat[11]) + int(stat[12]) > 50:  # utime + stime > 0.5 s
            return child
    return None


def test_ctrl_c_stops_at_once_with_one_line(home):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            CLI,
            "audit",
            "sql",
            "SELECT sum(a % 7) FROM range(1000000000000) t(a)",
            "--timeout",
            "600",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        cwd=REPO,
    )
    try:
        worker = wait_until(
            lambda: _busy_worker(proc.pid), 180, "the audit worker running the query", alive=lambda: proc.poll() is None
        )
        sent = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)  # what the terminal sends on Ctrl-C
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("interrupted"), err
    assert took < 10, took
    assert not Path(f"/proc/{worker}").exists() or "Z" in Path(f"/proc/{worker}/stat").read_text().split()[2]
