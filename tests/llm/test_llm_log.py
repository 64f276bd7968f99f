"""The SQLite call cache + log: keys, statuses, upserts, concurrent writers."""

import multiprocessing as mp
import sqlite3

import pytest

from storage.llm_log import (
    AUDIT_COLUMNS,
    COLUMN_SPEC,
    CallLog,
    CallRecord,
    call_key,
    call_log_location,
    lease_seconds,
    open_call_log,
)
from storage.paths import llm_calls_path
from tests.waiting import wait_until


def _rec(call_id, status="ok", **kw):
    base = dict(
        member="m",
        model="openai/x",
        request={"messages": []},
        parsed={"a": 1} if status == "ok" else None,
        raw_response='{"a": 1}',
        attempts=1,
        tag={"stage": "s1", "candidate_id": "c1"},
    )
    return CallRecord(call_id=call_id, status=status, **{**base, **kw})


def test_key_is_canonical_and_sensitive():
    msgs = [{"role": "user", "content": "hi"}]
    k = call_key("m", msgs, {"seed": 1, "temperature": 0.0}, {"type": "object"})
    assert k == call_key("m", [{"content": "hi", "role": "user"}], {"temperature": 0.0, "seed": 1}, {"type": "object"})
    assert k != call_key("m", msgs, {"seed": 2, "temperature": 0.0}, {"type": "object"})
    assert k != call_key("m2", msgs, {"seed": 1, "temperature": 0.0}, {"type": "object"})
    assert k != call_key("m", msgs, {"seed": 1, "temperature": 0.0}, {"type": "array"})
    assert len(k) == 64


def test_lives_in_quandary_home_as_plain_wal_table():
    log = CallLog(llm_calls_path())
    log.record(_rec("k1"))
    conn = sqlite3.connect(llm_calls_path())
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    cols = {r[1]: r[2] for r in conn.execute("PRAGMA table_info(llm_calls)")}
    pk = [r[1] for r in conn.execute("PRAGMA table_info(llm_calls)") if r[5]]
    assert pk == ["call_id"]
    assert set(cols.values()) <= {"TEXT", "INTEGER", "REAL"}
    for c in (
        "request_json",
        "raw_response",
        "parsed_json",
        "prompt_tokens",
        "completion_tokens",
        "latency_ms",
        "cost",
        "error",
        "tag_stage",
        "tag_candidate_id",
        "member",
        "created_at",
        "attempts",
    ):
        assert c in cols
    row = conn.execute("SELECT tag_stage, tag_candidate_id, ok FROM llm_calls").fetchone()
    assert row == ("s1", "c1", 1)


def test_lookup_hits_only_cacheable_statuses_and_counts_hits(tmp_path):
    log = CallLog(tmp_path / "c.sqlite")
    log.record(_rec("ok1"))
    log.record(_rec("bad", status="parse_failed", error="unparseable"))
    log.record(_rec("down", status="call_failed", error="HTTP 503", attempts=5))
    assert log.lookup("ok1").parsed == {"a": 1}
    assert log.lookup("bad") is None  # unparseable answers are asked again, never served as final
    assert log.lookup("down") is None  # transport failures are retried by the next run
    assert log.lookup("missing") is None
    log.lookup("ok1")
    assert log.get("ok1").cache_hits == 2


def test_retried_failure_is_overwritten_and_attempts_accumulate(tmp_path):
    log = CallLog(tmp_path / "c.sqlite")
    log.record(_rec("k", status="call_failed", error="HTTP 503", attempts=5, parsed=None))
    log.record(_rec("k", attempts=2))
    rec = log.get("k")
    assert rec.status == "ok" and rec.error is None and rec.attempts == 7
    assert log.count() == 1


def _writer(path, start, n):
    log = CallLog(path)
    for i in range(start, start + n):
        log.record(_rec(f"k{i}", latency_ms=float(i)))
        log.lookup(f"k{i}")


def test_concurrent_processes_write_safely(tmp_path):
    path = tmp_path / "shared.sqlite"
    CallLog(path)  # create schema once; writers race on everything else
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(path), p * 100, 60)) for p in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    log = CallLog(path)
    assert log.count() == 240
    assert log.count("cache_hits = 1") == 240


# --- leases (single flight across processes and machines) ----------------------------------------


def _set_claim(log, call_id, owner, lease_from_now_s):
    log._execute(
        f"UPDATE llm_calls SET owner = :o, lease_until = {log.NOW} + :s WHERE call_id = :k",
        {"o": owner, "s": lease_from_now_s, "k": call_id},
    )


def test_another_hosts_claim_waits_for_its_lease(tmp_path):
    """No os.kill can see an owner on another machine: its key is busy while the lease lives and
    taken over once it has lapsed."""
    log = CallLog(tmp_path / "c.sqlite")
    assert log.claim("k", "m", "openai/x", 60) == "claimed"
    _set_claim(log, "k", "elsewhere:4242:abcd", 30)
    assert log.claim("k", "m", "openai/x", 60) == "busy"
    _set_claim(log, "k", "elsewhere:4242:abcd", -1)
    assert log.claim("k", "m", "openai/x", 60) == "claimed"
    row = log._row("k")
    assert row["owner"] == log.owner_id() and row["status"] == "in_flight"


def test_heartbeat_renews_only_held_keys_until_their_longest_duration(tmp_path):
    log = CallLog(tmp_path / "c.sqlite", lease_s=1.0)  # a beat every third of a second
    for k in ("a", "b"):
        log.claim(k, "m", "openai/x", 60)
    log.record(_rec("b"))  # answered: no longer held, never renewed again
    first = log._row("a")["lease_until"]
    wait_until(lambda: log._row("a")["lease_until"] > first + 0.5, 30, "the heartbeat renewing a's lease")
    assert log._row("b")["lease_until"] is None and log.heartbeats >= 1
    log._held["a"] = 0.0  # past the call's longest duration: the heartbeat drops it, the lease lapses
    wait_until(lambda: "a" not in log._held, 30, "the heartbeat dropping an overdue key", interval_s=0.01)
    log.close()


def test_a_log_from_before_leases_opens_and_its_claims_are_taken(tmp_path):
    path = tmp_path / "old.sqlite"
    con = sqlite3.connect(path)

    con.execute("CREATE TABLE llm_calls (" + ", ".join(" ".join(c) for c in COLUMN_SPEC) + ")")  # no lease columns
    con.execute("INSERT INTO llm_calls (call_id, status, ok, error) VALUES ('k', 'in_flight', 0, 'gone:1')")
    con.commit()
    con.close()
    log = CallLog(path)
    assert {"owner", "lease_until"} <= {r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(llm_calls)")}
    assert log.claim("k", "m", "openai/x", 60) == "claimed"


def test_rows_are_the_audit_columns(tmp_path):
    log = CallLog(tmp_path / "c.sqlite")
    log.claim("k", "m", "openai/x", 60)
    log.record(_rec("k"))
    assert tuple(log.rows()[0]) == AUDIT_COLUMNS and "owner" not in AUDIT_COLUMNS
    assert log.rows(columns=("call_id",), newest=1) == [{"call_id": "k"}]
    assert log.count("status = ? AND tag_stage = ?", ("ok", "s1")) == 1


def test_lease_variable_is_checked(monkeypatch, tmp_path):
    monkeypatch.setenv("QUANDARY_CALL_LEASE_S", "5")
    assert lease_seconds() == 5.0 and CallLog(tmp_path / "c.sqlite").heartbeat_s == 5.0 / 3
    monkeypatch.setenv("QUANDARY_CALL_LEASE_S", "soon")
    with pytest.raises(ValueError, match="QUANDARY_CALL_LEASE_S='soon'"):
        lease_seconds()


def test_one_factory_chooses_the_backend(monkeypatch, tmp_path):
    monkeypatch.delenv("QUANDARY_STATE_URL", raising=False)
    monkeypatch.delenv("QUANDARY_DAGSTER_PG_URL", raising=False)
    log = open_call_log()
    assert isinstance(log, CallLog) and log.path == llm_calls_path()
    monkeypatch.setenv("QUANDARY_DAGSTER_PG_URL", "postgresql://u:secret@db.example:5432/q")
    assert call_log_location() == "postgresql+psycopg2://u:***@db.example:5432/q (table quandary_llm_calls)"
    named = open_call_log(tmp_path / "mine.sqlite")  # a file named outright stays a file
    assert isinstance(named, CallLog) and call_log_location(tmp_path / "mine.sqlite") == str(named.path)
