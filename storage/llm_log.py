"""The LLM call cache and call log: one SQLite table ``llm_calls`` in ``$QUANDARY_HOME/llm_calls.sqlite``.

Why one table for both: a cache hit *is* the audit record of the answer a stage used, and a
resumed run finds every finished call by its key and makes no request for it.

- ``call_id`` (primary key) = sha256 of the canonical JSON of (model, messages, sampling params incl.
  seed, output schema) — see :func:`call_key`. The server address is not part of it, so the
  embedded server's random port does not invalidate the cache.
- ``status``: ``ok`` (parsed), ``parse_failed`` (the model answered but unusably) or ``call_failed``
  (transport failure after retries). Only ``ok`` is a cache hit: a provider that answered HTTP 200
  with garbage must not poison the cache, so a later run asks again and overwrites the row, adding
  to ``attempts`` (issue #13 item 5).
- Every write is one transaction. WAL + ``busy_timeout`` + a retry loop make concurrent writers
  (several processes of one Dagster run) safe. Columns are plain TEXT/INTEGER/REAL (JSON as TEXT)
  so the audit catalog can expose the table as a view.
"""

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import random
import socket
import sqlite3
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from storage.faults import CORRUPT, StorageError, storage_cause, storage_message

TABLE = "llm_calls"
CACHEABLE_STATUSES = ("ok",)

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    call_id            TEXT PRIMARY KEY,
    status             TEXT NOT NULL,
    ok                 INTEGER NOT NULL,
    member             TEXT,
    model              TEXT,
    api_base           TEXT,
    schema_name        TEXT,
    request_json       TEXT,
    raw_response       TEXT,
    first_raw_response TEXT,
    parsed_json        TEXT,
    error              TEXT,
    prompt_tokens      INTEGER DEFAULT 0,
    completion_tokens  INTEGER DEFAULT 0,
    latency_ms         REAL DEFAULT 0,
    cost               REAL DEFAULT 0,
    attempts           INTEGER DEFAULT 0,
    repaired           INTEGER DEFAULT 0,
    cache_hits         INTEGER DEFAULT 0,
    tag_stage          TEXT,
    tag_candidate_id   TEXT,
    tag_json           TEXT,
    created_at         TEXT,
    updated_at         TEXT
);
CREATE INDEX IF NOT EXISTS {TABLE}_stage ON {TABLE}(tag_stage);
CREATE INDEX IF NOT EXISTS {TABLE}_member ON {TABLE}(member);
"""

_COLUMNS = (
    "call_id status ok member model api_base schema_name request_json raw_response first_raw_response "
    "parsed_json error prompt_tokens completion_tokens latency_ms cost attempts repaired tag_stage "
    "tag_candidate_id tag_json created_at updated_at"
).split()


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def call_key(model: str, messages: list[dict], params: dict, output_schema: dict | None) -> str:
    """The cache key: everything that determines the answer, nothing that does not (no api_base)."""
    payload = {"model": model, "messages": messages, "params": params, "schema": output_schema}
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass
class CallRecord:
    call_id: str
    status: str
    member: str
    model: str
    request: dict
    api_base: str | None = None
    schema_name: str | None = None
    raw_response: str | None = None
    first_raw_response: str | None = None
    parsed: dict | None = None
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    cost: float = 0.0
    attempts: int = 0
    repaired: bool = False
    tag: dict = field(default_factory=dict)
    cache_hits: int = 0
    created_at: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class CallLogError(StorageError):
    """The call log cannot be read or written; ``cause`` says why (storage.faults), the message names
    the file and the remedy. Only :class:`CallLogDamaged` means the file itself is damaged."""


class CallLogDamaged(CallLogError):
    """The call log file is not a usable SQLite database (the message names it and says what to do)."""


def spill_dir() -> Path:
    """Where answers go whose log write failed (no space, read-only): ``$QUANDARY_SPILL_DIR`` or a
    folder in the system temp dir (usually another file system than ``$QUANDARY_HOME``)."""
    env = os.environ.get("QUANDARY_SPILL_DIR")
    return Path(env) if env else Path(tempfile.gettempdir()) / "quandary-unlogged"


class CallLog:
    """Thread-safe handle on the call log. One SQLite connection per thread (sqlite3 objects are
    not shareable across threads); each write is a single short transaction."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._pending: dict[str, CallRecord] = {}  # answers whose write failed (no space ...), by call_id
        self._pending_lock = threading.Lock()
        self._spill_key = hashlib.sha256(str(self.path.resolve()).encode()).hexdigest()[:16]
        try:
            self._retry(self._init_schema)
        except (sqlite3.Error, OSError) as exc:
            raise self._storage_error(exc) from exc
        self._merge_spilled()

    def _storage_error(self, exc: BaseException) -> BaseException:
        """``exc`` as a :class:`CallLogError` naming the file and the cause (or ``exc`` itself when it
        is not a storage fault, e.g. a lock held too long)."""
        cause = storage_cause(exc, self.path)
        if cause is None:
            return exc
        if cause == CORRUPT:
            return CallLogDamaged(
                f"local storage error: the call log {self.path} is damaged ({exc}); move it away (its cached "
                "answers are lost) or restore it, then rerun", cause, self.path)
        return CallLogError("local storage error: " + storage_message(exc, self.path, "call log", cause),
                            cause, self.path)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            conn.execute("PRAGMA busy_timeout=30000")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # durable at checkpoint; atomic always (WAL)
            conn.row_factory = sqlite3.Row
            self._local.conn = conn
        return conn

    def _init_schema(self) -> None:
        self._conn().executescript(_SCHEMA)

    @staticmethod
    def _retry(fn, *args, attempts: int = 8):
        # busy_timeout covers most contention; WAL checkpoints and schema creation can still report
        # "database is locked" immediately, so retry those with jittered backoff.
        for i in range(attempts):
            try:
                return fn(*args)
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) and "busy" not in str(e) or i == attempts - 1:
                    raise
                time.sleep(min(2.0, 0.05 * 2**i) * (0.5 + random.random()))

    # --- cache -----------------------------------------------------------------------------
    def lookup(self, call_id: str) -> CallRecord | None:
        """The cached record for ``call_id`` if it is a cacheable outcome; counts the hit."""

        held = self._pending.get(call_id)
        if held is not None and held.status in CACHEABLE_STATUSES:
            return held  # answered, not yet written (no space): never ask again

        def _do():
            conn = self._conn()
            row = conn.execute(f"SELECT * FROM {TABLE} WHERE call_id = ?", (call_id,)).fetchone()
            if row is None or row["status"] not in CACHEABLE_STATUSES:
                return None
            try:
                conn.execute(
                    f"UPDATE {TABLE} SET cache_hits = cache_hits + 1, updated_at = ? WHERE call_id = ?",
                    (_now(), call_id),
                )
            except (sqlite3.Error, OSError) as exc:  # a full disk must not turn a hit into a failure
                if storage_cause(exc, self.path) in (None, CORRUPT):
                    raise
            return _row_to_record(row)

        return self._guard(self._retry, _do)

    def _guard(self, fn, *args):
        try:
            return fn(*args)
        except (sqlite3.Error, OSError) as exc:
            err = self._storage_error(exc)
            if err is exc:
                raise
            raise err from exc

    def get(self, call_id: str) -> CallRecord | None:
        row = self._retry(lambda: self._conn().execute(f"SELECT * FROM {TABLE} WHERE call_id = ?", (call_id,)).fetchone())
        return _row_to_record(row) if row else None

    # --- cross-process single flight ---------------------------------------------------------
    # A process about to send an uncached request first claims its call_id with an ``in_flight``
    # row naming itself; another process wanting the same call waits for that row to turn into an
    # answer instead of sending the request twice. A claim whose owner is gone (kill -9) or older
    # than ``stale_after_s`` is taken over.

    @staticmethod
    def owner_id() -> str:
        return f"{socket.gethostname()}:{os.getpid()}"

    def claim(self, call_id: str, member: str, model: str, stale_after_s: float) -> str:
        """``claimed`` (send it), ``cached`` (an ok answer exists) or ``busy`` (another owner is on it)."""
        me = self.owner_id()

        def _do():
            conn = self._conn()
            now = _now()
            cur = conn.execute(
                f"INSERT INTO {TABLE} (call_id, status, ok, member, model, error, attempts, created_at, updated_at) "
                f"VALUES (?, 'in_flight', 0, ?, ?, ?, 0, ?, ?) ON CONFLICT(call_id) DO NOTHING",
                (call_id, member, model, me, now, now))
            if cur.rowcount == 1:
                return "claimed"
            row = conn.execute(f"SELECT status, error, updated_at FROM {TABLE} WHERE call_id = ?",
                               (call_id,)).fetchone()
            if row is None:
                return "busy"  # deleted in between: try again
            if row["status"] == "ok":
                return "cached"
            if row["status"] == "in_flight" and not _claim_is_stale(row["error"], row["updated_at"], stale_after_s):
                return "busy"
            # a failed / unparseable / abandoned call: take it over atomically (only one winner)
            cur = conn.execute(
                f"UPDATE {TABLE} SET status = 'in_flight', error = ?, updated_at = ? "
                f"WHERE call_id = ? AND status = ? AND COALESCE(error, '') = COALESCE(?, '')",
                (me, now, call_id, row["status"], row["error"]))
            return "claimed" if cur.rowcount == 1 else "busy"

        return self._guard(self._retry, _do)

    def release(self, call_id: str) -> None:
        """Drop our claim when no answer was recorded (cancelled call)."""
        me = self.owner_id()
        self._retry(lambda: self._conn().execute(
            f"DELETE FROM {TABLE} WHERE call_id = ? AND status = 'in_flight' AND error = ?", (call_id, me)))

    # --- log -------------------------------------------------------------------------------
    def record(self, rec: CallRecord) -> None:
        """Insert (or, for a retried failed call, update) one call atomically.

        If the write fails for lack of space, a read-only folder or permissions, the answer is kept
        (in memory for this process's lookups, and in a spill file under :func:`spill_dir` for the
        next run) and written by the next successful write or the next open of the log; the raised
        :class:`CallLogError` names the cause. Answered calls are never requested again for it."""
        try:
            self._write(rec)
        except (sqlite3.Error, OSError) as exc:
            err = self._storage_error(exc)
            if err is exc:
                raise
            if rec.status in CACHEABLE_STATUSES:
                with self._pending_lock:
                    self._pending[rec.call_id] = rec
                kept = self._spill(rec)
                err = type(err)(f"{err}; the answer is kept ({kept}) and written to the log once it can be",
                                err.cause, self.path)
            raise err from exc
        if self._pending:
            self._flush_pending()

    def _spill(self, rec: CallRecord) -> str:
        path = spill_dir() / f"{self._spill_key}-{os.getpid()}.jsonl"
        line = json.dumps({"log": str(self.path.resolve()), "record": dataclasses.asdict(rec)}, default=str) + "\n"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            for _ in range(8):
                with open(path, "a", encoding="utf-8") as fh:
                    # a merger claims a file by renaming it, then locks it: append only under the lock,
                    # and only to the file that still has the spill name (else the line would land in a
                    # file that is already read and about to be removed)
                    fcntl.flock(fh, fcntl.LOCK_EX)
                    if _same_file(fh, path):
                        fh.write(line)
                        fh.flush()
                        os.fsync(fh.fileno())
                        return f"in {path}"
        except OSError:
            pass
        return "in memory only, until this process ends"

    def _flush_pending(self) -> None:
        with self._pending_lock:
            held = list(self._pending.values())
        for rec in held:
            try:
                self._write_unless_cached(rec)
            except (sqlite3.Error, OSError):
                return  # still no space: keep them
            with self._pending_lock:
                self._pending.pop(rec.call_id, None)
        self._merge_spilled()

    def _write_unless_cached(self, rec: CallRecord) -> None:
        row = self._retry(lambda: self._conn().execute(
            f"SELECT status FROM {TABLE} WHERE call_id = ?", (rec.call_id,)).fetchone())
        if row is None or row["status"] not in CACHEABLE_STATUSES:
            self._write(rec)

    def _merge_spilled(self) -> None:
        """Write the answers a run could not log (spill files of this log), then drop the files.

        A merger claims a file by renaming it to a name of its own and holds an exclusive lock on it
        while it merges; the answers go in one durable transaction and the file is removed only
        after the commit. A merge that fails (still no space) or dies (kill -9) leaves the claimed
        file unlocked under its ``.merging-`` name, which the next merge takes over: no answer is
        dropped and no file is left behind for good. Merging twice is harmless (logged answers are
        skipped)."""
        folder = spill_dir()
        try:
            fresh = sorted(folder.glob(f"{self._spill_key}-*.jsonl"))
            abandoned = sorted(folder.glob(f"{self._spill_key}-*.jsonl.merging-*"))
        except OSError:
            return
        for path in fresh + abandoned:
            claimed = self._claim_spill(path, abandoned=path in abandoned)
            if claimed is None:
                continue
            fh, mine = claimed
            with fh:
                try:
                    self._merge_spill_lines(fh.read().decode("utf-8", errors="replace"))
                except (sqlite3.Error, OSError):
                    return  # still cannot write: the claimed file stays for the next merge
                mine.unlink(missing_ok=True)  # after the commit, still under our lock

    @staticmethod
    def _claim_spill(path: Path, abandoned: bool):
        """``(open locked file, its new name)`` once ``path`` is renamed to a name of ours; None if
        another merger has it. A fresh file is renamed first (one winner), then locked (waiting out
        an append in progress); an abandoned claim is locked first (a live merger may still hold
        it), then renamed."""
        mine = path.with_name(f"{path.name.split('.merging-')[0]}.merging-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        fh = None
        try:
            if abandoned:
                fh = open(path, "rb")
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.rename(path, mine)
            if fh is None:
                fh = open(mine, "rb")
                fcntl.flock(fh, fcntl.LOCK_EX)
        except OSError:
            if fh is not None:
                fh.close()
            return None
        return fh, mine

    def _merge_spill_lines(self, text: str) -> None:
        """Every answer of this log among the spilled lines, written in one durable transaction."""
        records = []
        for line in text.splitlines():
            try:
                entry = json.loads(line)
                rec = CallRecord(**entry["record"])
            except (ValueError, TypeError, KeyError):
                continue  # a torn last line
            if entry.get("log") == str(self.path.resolve()):
                records.append(rec)
        if not records:
            return
        conn = self._conn()
        conn.execute("PRAGMA synchronous=FULL")  # the commit reaches the disk before the file goes
        try:
            self._retry(conn.execute, "BEGIN IMMEDIATE")
            try:
                for rec in records:
                    self._write_unless_cached(rec)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        finally:
            conn.execute("PRAGMA synchronous=NORMAL")


    def _write(self, rec: CallRecord) -> None:
        now = _now()
        values = {
            "call_id": rec.call_id,
            "status": rec.status,
            "ok": int(rec.ok),
            "member": rec.member,
            "model": rec.model,
            "api_base": rec.api_base,
            "schema_name": rec.schema_name,
            "request_json": canonical_json(rec.request),
            "raw_response": rec.raw_response,
            "first_raw_response": rec.first_raw_response,
            "parsed_json": canonical_json(rec.parsed) if rec.parsed is not None else None,
            "error": rec.error,
            "prompt_tokens": int(rec.prompt_tokens or 0),
            "completion_tokens": int(rec.completion_tokens or 0),
            "latency_ms": float(rec.latency_ms or 0.0),
            "cost": float(rec.cost or 0.0),
            "attempts": int(rec.attempts or 0),
            "repaired": int(bool(rec.repaired)),
            "tag_stage": _opt_str(rec.tag.get("stage")),
            "tag_candidate_id": _opt_str(rec.tag.get("candidate_id")),
            "tag_json": canonical_json(rec.tag) if rec.tag else None,
            "created_at": now,
            "updated_at": now,
        }
        cols = ", ".join(_COLUMNS)
        marks = ", ".join("?" for _ in _COLUMNS)
        keep = ("call_id", "created_at", "attempts")
        updates = ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS if c not in keep)
        sql = (
            f"INSERT INTO {TABLE} ({cols}) VALUES ({marks}) ON CONFLICT(call_id) DO UPDATE SET {updates}, "
            f"attempts = {TABLE}.attempts + excluded.attempts"
        )
        self._retry(lambda: self._conn().execute(sql, [values[c] for c in _COLUMNS]))

    @contextlib.contextmanager
    def transaction(self):
        """This thread's log operations inside the block share one transaction (one commit): the
        council's log thread batches the claims and records that queued up meanwhile. Rolled back
        if the block raises."""
        conn = self._conn()
        self._guard(self._retry, conn.execute, "BEGIN IMMEDIATE")
        try:
            yield
            self._guard(self._retry, conn.execute, "COMMIT")
        except BaseException:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise

    # --- queries ---------------------------------------------------------------------------
    # Claims (``in_flight`` rows) are not calls yet: queries leave them out.
    def rows(self, where: str = "", params: tuple = ()) -> list[dict]:
        sql = f"SELECT * FROM {TABLE} WHERE status != 'in_flight' {('AND (' + where + ')') if where else ''} ORDER BY created_at"
        return [dict(r) for r in self._guard(self._retry, lambda: self._conn().execute(sql, params).fetchall())]

    def count(self, where: str = "", params: tuple = ()) -> int:
        sql = f"SELECT COUNT(*) FROM {TABLE} WHERE status != 'in_flight' {('AND (' + where + ')') if where else ''}"
        return int(self._guard(self._retry, lambda: self._conn().execute(sql, params).fetchone()[0]))

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


def _same_file(fh, path: Path) -> bool:
    """Whether the open file ``fh`` is still the one named ``path`` (not renamed away meanwhile)."""
    try:
        a, b = os.fstat(fh.fileno()), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _claim_is_stale(owner: str | None, updated_at: str | None, stale_after_s: float) -> bool:
    host, _, pid = (owner or "").rpartition(":")
    if host == socket.gethostname() and pid.isdigit() and int(pid) != os.getpid():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True  # the owner died (kill -9) without answering
        except PermissionError:
            pass
    try:
        age = (datetime.now(UTC) - datetime.fromisoformat(updated_at)).total_seconds()
    except (TypeError, ValueError):
        return True
    return age > stale_after_s


def _opt_str(v: Any) -> str | None:
    return None if v is None else str(v)


def _row_to_record(row: sqlite3.Row) -> CallRecord:
    return CallRecord(
        call_id=row["call_id"],
        status=row["status"],
        member=row["member"],
        model=row["model"],
        request=json.loads(row["request_json"] or "{}"),
        api_base=row["api_base"],
        schema_name=row["schema_name"],
        raw_response=row["raw_response"],
        first_raw_response=row["first_raw_response"],
        parsed=json.loads(row["parsed_json"]) if row["parsed_json"] else None,
        error=row["error"],
        prompt_tokens=row["prompt_tokens"] or 0,
        completion_tokens=row["completion_tokens"] or 0,
        latency_ms=row["latency_ms"] or 0.0,
        cost=row["cost"] or 0.0,
        attempts=row["attempts"] or 0,
        repaired=bool(row["repaired"]),
        tag=json.loads(row["tag_json"]) if row["tag_json"] else {},
        cache_hits=row["cache_hits"] or 0,
        created_at=row["created_at"],
    )
