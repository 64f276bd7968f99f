"""The SQLite call cache + log: keys, statuses, upserts, concurrent writers."""

import multiprocessing as mp
import sqlite3

from storage.paths import llm_calls_path
from storage.llm_log import CallLog, CallRecord, call_key


def _rec(call_id, status="ok", **kw):
    base = dict(member="m", model="openai/x", request={"messages": []}, parsed={"a": 1} if status == "ok" else None,
                raw_response='{"a": 1}', attempts=1, tag={"stage": "s1", "candidate_id": "c1"})
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
    for c in ("request_json", "raw_response", "parsed_json", "prompt_tokens", "completion_tokens", "latency_ms",
              "cost", "error", "tag_stage", "tag_candidate_id", "member", "created_at", "attempts"):
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
