"""The call log's rules, once for every backend (storage/llm_log.py: SQLite and the factory;
storage/llm_log_pg.py: PostgreSQL): the key, the record, the schema, what is a cache hit, single
flight by leases renewed by a heartbeat, answers kept when a write fails, and the queries.

See storage/llm_log.py for what the table is and why; this module only holds the shared code, so
that the PostgreSQL backend does not import the SQLite one.
"""

import dataclasses
import fcntl
import hashlib
import json
import os
import secrets
import socket
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from storage.faults import CORRUPT, StorageError, storage_message

TABLE = "llm_calls"
CACHEABLE_STATUSES = ("ok",)
LEASE_ENV = "QUANDARY_CALL_LEASE_S"
DEFAULT_LEASE_S = 30.0

# (column, type, extra) — the one schema both backends create (PostgreSQL maps the types)
COLUMN_SPEC = (
    ("call_id", "TEXT", "PRIMARY KEY"),
    ("status", "TEXT", "NOT NULL"),
    ("ok", "INTEGER", "NOT NULL"),
    ("member", "TEXT", ""),
    ("model", "TEXT", ""),
    ("api_base", "TEXT", ""),
    ("schema_name", "TEXT", ""),
    ("request_json", "TEXT", ""),
    ("raw_response", "TEXT", ""),
    ("first_raw_response", "TEXT", ""),
    ("parsed_json", "TEXT", ""),
    ("error", "TEXT", ""),
    ("prompt_tokens", "INTEGER", "DEFAULT 0"),
    ("completion_tokens", "INTEGER", "DEFAULT 0"),
    ("latency_ms", "REAL", "DEFAULT 0"),
    ("cost", "REAL", "DEFAULT 0"),
    ("attempts", "INTEGER", "DEFAULT 0"),
    ("repaired", "INTEGER", "DEFAULT 0"),
    ("cache_hits", "INTEGER", "DEFAULT 0"),
    ("tag_stage", "TEXT", ""),
    ("tag_candidate_id", "TEXT", ""),
    ("tag_json", "TEXT", ""),
    ("created_at", "TEXT", ""),
    ("updated_at", "TEXT", ""),
)
AUDIT_COLUMNS = tuple(c for c, _, _ in COLUMN_SPEC)  # what rows() and the audit view show
LEASE_COLUMNS = ("owner", "lease_until")  # single-flight bookkeeping, left out of the audit view

_COLUMNS = [c for c in AUDIT_COLUMNS if c != "cache_hits"]  # what a record writes


def schema_sql(table: str, types: dict[str, str], lease_type: str) -> list[str]:
    """CREATE statements for ``table``; ``types`` maps the generic types to the dialect's."""
    cols = [f"{c} {types.get(t, t)} {extra}".strip() for c, t, extra in COLUMN_SPEC]
    cols += [f"owner {types.get('TEXT', 'TEXT')}", f"lease_until {lease_type}"]
    return [
        f"CREATE TABLE IF NOT EXISTS {table} (\n    " + ",\n    ".join(cols) + "\n)",
        f"CREATE INDEX IF NOT EXISTS {table}_stage ON {table}(tag_stage)",
        f"CREATE INDEX IF NOT EXISTS {table}_member ON {table}(member)",
    ]


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def call_key(model: str, messages: list[dict], params: dict, output_schema: dict | None) -> str:
    """The cache key: everything that determines the answer, nothing that does not (no api_base)."""
    payload = {"model": model, "messages": messages, "params": params, "schema": output_schema}
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def lease_seconds() -> float:
    """``$QUANDARY_CALL_LEASE_S`` (default 30): how long a claim lives without a heartbeat."""
    raw = os.environ.get(LEASE_ENV, "").strip()
    if not raw:
        return DEFAULT_LEASE_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 1.0 <= value <= 3600.0:
        raise ValueError(
            f"{LEASE_ENV}={raw!r} is not a number of seconds between 1 and 3600 "
            f"(how long an LLM call's claim lives without a heartbeat; default {DEFAULT_LEASE_S:g})"
        )
    return value


_tokens: dict[int, str] = {}


def owner_id() -> str:
    """This process as a claim owner: ``host:pid:nonce`` (the nonce tells a reused pid apart)."""
    pid = os.getpid()
    token = _tokens.get(pid) or _tokens.setdefault(pid, secrets.token_hex(4))
    return f"{socket.gethostname()}:{pid}:{token}"


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
    the file (or database) and the remedy. Only :class:`CallLogDamaged` means the file is damaged."""


class CallLogDamaged(CallLogError):
    """The call log file is not a usable SQLite database (the message names it and says what to do)."""


def spill_dir() -> Path:
    """Where answers go whose log write failed (no space, read-only): ``$QUANDARY_SPILL_DIR`` or a
    folder in the system temp dir (usually another file system than ``$QUANDARY_HOME``)."""
    env = os.environ.get("QUANDARY_SPILL_DIR")
    return Path(env) if env else Path(tempfile.gettempdir()) / "quandary-unlogged"


def _named(where: str, params) -> tuple[str, dict]:
    """A caller's ``where`` with ``?`` marks as named parameters (both backends take ``:name``)."""
    if isinstance(params, dict):
        return where, params
    parts = where.split("?")
    if len(parts) - 1 != len(params):
        raise ValueError(f"{len(parts) - 1} '?' in {where!r} for {len(params)} parameters")
    sql = parts[0] + "".join(f":w{i}{rest}" for i, rest in enumerate(parts[1:]))
    return sql, {f"w{i}": v for i, v in enumerate(params)}


class CallLogRules:
    """The cache, single-flight and record rules, once for every backend.

    A backend sets ``path`` (what messages name), ``table``, ``NOW`` (SQL for the database clock, in
    the unit of ``lease_until``), ``LEASE_UNTIL`` (SQL for now + ``:lease_s``), ``DB_ERRORS``, and
    implements :meth:`_fetch` / :meth:`_execute` (one statement each, retried where the backend
    needs it) and :meth:`_cause`; :meth:`_owner_is_dead` may know a dead owner before its lease ends.
    """

    path: Any
    table: str
    NOW: str
    LEASE_UNTIL: str
    DB_ERRORS: tuple = ()

    def _init_rules(self, location: str, lease_s: float | None) -> None:
        self.location = location
        self.lease_s = float(lease_s) if lease_s is not None else lease_seconds()
        self.heartbeat_s = self.lease_s / 3  # two beats may be missed before the lease lapses
        self._pending: dict[str, CallRecord] = {}  # answers whose write failed (no space ...), by call_id
        self._pending_lock = threading.Lock()
        self._spill_key = hashlib.sha256(location.encode()).hexdigest()[:16]
        self._held: dict[str, float] = {}  # keys this process is sending -> monotonic time to stop renewing
        self._held_lock = threading.Lock()
        self._beat: threading.Thread | None = None
        self._beat_stop = threading.Event()
        self.heartbeats = 0  # renewals written (tests, diagnostics)

    # --- backend hooks ------------------------------------------------------------------------
    def _fetch(self, sql: str, params: dict) -> list[dict]:
        raise NotImplementedError

    def _execute(self, sql: str, params: dict) -> int:
        raise NotImplementedError

    def _cause(self, exc: BaseException) -> str | None:
        """The storage cause of a backend error (storage.faults), or None when it is not one."""
        raise NotImplementedError

    def _describe(self, exc: BaseException, cause: str) -> CallLogError:
        return CallLogError(
            "local storage error: " + storage_message(exc, self.path, "call log", cause), cause, self.path
        )

    def _owner_is_dead(self, owner: str | None) -> bool:
        return False

    # --- errors -------------------------------------------------------------------------------
    def _storage_error(self, exc: BaseException) -> BaseException:
        """``exc`` as a :class:`CallLogError` naming the log and the cause (or ``exc`` itself when it
        is not a storage fault, e.g. a lock held too long)."""
        cause = self._cause(exc)
        return exc if cause is None else self._describe(exc, cause)

    def _guard(self, fn, *args):
        try:
            return fn(*args)
        except self.DB_ERRORS as exc:
            err = self._storage_error(exc)
            if err is exc:
                raise
            raise err from exc

    def _row(self, call_id: str, columns: str = "*") -> dict | None:
        rows = self._fetch(f"SELECT {columns} FROM {self.table} WHERE call_id = :call_id", {"call_id": call_id})
        return rows[0] if rows else None

    # --- cache -----------------------------------------------------------------------------
    def lookup(self, call_id: str) -> CallRecord | None:
        """The cached record for ``call_id`` if it is a cacheable outcome; counts the hit."""
        held = self._pending.get(call_id)
        if held is not None and held.status in CACHEABLE_STATUSES:
            return held  # answered, not yet written (no space): never ask again

        def _do():
            row = self._row(call_id)
            if row is None or row["status"] not in CACHEABLE_STATUSES:
                return None
            try:
                self._execute(
                    f"UPDATE {self.table} SET cache_hits = cache_hits + 1, updated_at = :now WHERE call_id = :call_id",
                    {"now": _now(), "call_id": call_id},
                )
            except self.DB_ERRORS as exc:  # a full disk must not turn a hit into a failure
                if self._cause(exc) in (None, CORRUPT):
                    raise
            return _row_to_record(row)

        return self._guard(_do)

    def get(self, call_id: str) -> CallRecord | None:
        row = self._guard(self._row, call_id)
        return _row_to_record(row) if row else None

    # --- single flight ------------------------------------------------------------------------
    # A claim is an ``in_flight`` row with an owner and a lease. The INSERT ... ON CONFLICT below is
    # one atomic statement on both backends: it creates the row, or takes over a failed row or an
    # expired lease, or changes nothing (someone else's live claim, or an ok answer).

    @staticmethod
    def owner_id() -> str:
        return owner_id()

    def claim(self, call_id: str, member: str, model: str, stale_after_s: float) -> str:
        """``claimed`` (send it), ``cached`` (an ok answer exists) or ``busy`` (another owner's
        lease is live: poll again). The heartbeat renews our lease for at most ``stale_after_s``
        (the longest the call can take), so a stuck owner cannot hold a key for ever."""
        me = owner_id()
        t = self.table
        sql = (
            f"INSERT INTO {t} (call_id, status, ok, member, model, attempts, owner, lease_until, created_at, "
            f"updated_at) VALUES (:call_id, 'in_flight', 0, :member, :model, 0, :owner, {self.LEASE_UNTIL}, :now, "
            f":now) ON CONFLICT (call_id) DO UPDATE SET status = 'in_flight', owner = :owner, "
            f"lease_until = {self.LEASE_UNTIL}, updated_at = :now WHERE {t}.status <> 'ok' AND "
            f"({t}.status <> 'in_flight' OR {t}.lease_until IS NULL OR {t}.lease_until < {self.NOW}) "
            f"RETURNING call_id"
        )
        params = {
            "call_id": call_id,
            "member": member,
            "model": model,
            "owner": me,
            "now": _now(),
            "lease_s": self.lease_s,
        }

        def _do():
            for _ in range(2):
                if self._fetch(sql, params):
                    return "claimed"
                row = self._row(call_id, "status, owner")
                if row is None:
                    return "busy"  # deleted in between: poll again
                if row["status"] == "ok":
                    return "cached"
                if row["status"] != "in_flight" or not self._owner_is_dead(row["owner"]):
                    return "busy"
                # its owner is known dead (SQLite: a gone local pid): end its lease now, then claim
                self._execute(
                    f"UPDATE {t} SET lease_until = NULL WHERE call_id = :call_id AND "
                    f"status = 'in_flight' AND owner = :owner",
                    {"call_id": call_id, "owner": row["owner"]},
                )
            return "busy"

        state = self._guard(_do)
        if state == "claimed":
            self._hold(call_id, stale_after_s)
        return state

    def release(self, call_id: str) -> None:
        """Drop our claim when no answer was recorded (cancelled call)."""
        self._forget(call_id)
        self._guard(
            self._execute,
            f"DELETE FROM {self.table} WHERE call_id = :call_id AND status = 'in_flight' AND owner = :owner",
            {"call_id": call_id, "owner": owner_id()},
        )

    def _hold(self, call_id: str, max_s: float) -> None:
        with self._held_lock:
            self._held[call_id] = time.monotonic() + max(max_s, self.lease_s)
            if self._beat is None or not self._beat.is_alive():  # (a forked child has no thread)
                self._beat_stop.clear()
                self._beat = threading.Thread(target=self._heartbeat, name="call-log-heartbeat", daemon=True)
                self._beat.start()

    def _forget(self, call_id: str) -> None:
        with self._held_lock:
            self._held.pop(call_id, None)

    def _heartbeat(self) -> None:
        """Renew the leases of the keys this process is sending, every ``heartbeat_s``."""
        while not self._beat_stop.wait(self.heartbeat_s):
            now = time.monotonic()
            with self._held_lock:
                for k in [k for k, until in self._held.items() if until < now]:
                    del self._held[k]  # past the call's longest duration: let the lease lapse
                keys = list(self._held)
            try:
                self.renew(keys)
            except Exception:  # noqa: BLE001 - a missed beat is retried; the lease has room for two
                pass

    def renew(self, keys: list[str]) -> int:
        """Extend our leases on ``keys`` by ``lease_s`` from now (the database's clock)."""
        n = 0
        for i in range(0, len(keys), 200):
            chunk = keys[i : i + 200]
            marks = ", ".join(f":k{j}" for j in range(len(chunk)))
            n += self._execute(
                f"UPDATE {self.table} SET lease_until = {self.LEASE_UNTIL} WHERE status = 'in_flight' "
                f"AND owner = :owner AND call_id IN ({marks})",
                {"owner": owner_id(), "lease_s": self.lease_s, **{f"k{j}": k for j, k in enumerate(chunk)}},
            )
        if keys:
            self.heartbeats += 1
        return n

    # --- log -------------------------------------------------------------------------------
    def record(self, rec: CallRecord) -> None:
        """Insert (or, for a retried failed call, update) one call atomically.

        If the write fails for lack of space, a read-only folder or permissions, the answer is kept
        (in memory for this process's lookups, and in a spill file under :func:`spill_dir` for the
        next run) and written by the next successful write or the next open of the log; the raised
        :class:`CallLogError` names the cause. Answered calls are never requested again for it."""
        self._forget(rec.call_id)
        try:
            self._write(rec)
        except self.DB_ERRORS as exc:
            err = self._storage_error(exc)
            if err is exc:
                raise
            if rec.status in CACHEABLE_STATUSES:
                with self._pending_lock:
                    self._pending[rec.call_id] = rec
                kept = self._spill(rec)
                err = type(err)(
                    f"{err}; the answer is kept ({kept}) and written to the log once it can be", err.cause, self.path
                )
            raise err from exc
        if self._pending:
            self._flush_pending()

    def _spill(self, rec: CallRecord) -> str:
        path = spill_dir() / f"{self._spill_key}-{os.getpid()}.jsonl"
        line = json.dumps({"log": self.location, "record": dataclasses.asdict(rec)}, default=str) + "\n"
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
            except self.DB_ERRORS:
                return  # still no space: keep them
            with self._pending_lock:
                self._pending.pop(rec.call_id, None)
        self._merge_spilled()

    def _write_unless_cached(self, rec: CallRecord) -> None:
        row = self._row(rec.call_id, "status")
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
            claimed = _claim_spill(path, abandoned=path in abandoned)
            if claimed is None:
                continue
            fh, mine = claimed
            with fh:
                try:
                    self._merge_spill_lines(fh.read().decode("utf-8", errors="replace"))
                except (*self.DB_ERRORS, OSError):
                    return  # still cannot write: the claimed file stays for the next merge
                mine.unlink(missing_ok=True)  # after the commit, still under our lock

    def _merge_spill_lines(self, text: str) -> None:
        """Every answer of this log among the spilled lines, written in one durable transaction."""
        records = []
        for line in text.splitlines():
            try:
                entry = json.loads(line)
                rec = CallRecord(**entry["record"])
            except (ValueError, TypeError, KeyError):
                continue  # a torn last line
            if entry.get("log") == self.location:
                records.append(rec)
        if not records:
            return
        with self.durable_transaction():
            for rec in records:
                self._write_unless_cached(rec)

    def durable_transaction(self):
        """A transaction whose commit is on disk when the block ends (the backend's own default
        when its commits already are; SQLite in WAL mode overrides it)."""
        return self.transaction()

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
        marks = ", ".join(f":{c}" for c in _COLUMNS)
        keep = ("call_id", "created_at", "attempts")
        updates = ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS if c not in keep)
        sql = (
            f"INSERT INTO {self.table} ({cols}) VALUES ({marks}) ON CONFLICT (call_id) DO UPDATE SET {updates}, "
            f"attempts = {self.table}.attempts + excluded.attempts, owner = NULL, lease_until = NULL"
        )
        self._execute(sql, values)

    # --- queries ---------------------------------------------------------------------------
    # Claims (``in_flight`` rows) are not calls yet: queries leave them out. ``where`` is SQL over
    # the audit columns with ``?`` marks for ``params``.
    def rows(self, where: str = "", params=(), *, columns=None, newest: int | None = None) -> list[dict]:
        """Calls as dicts of the audit columns (or ``columns``), oldest first, or the ``newest`` N."""
        where, named = _named(where, params)
        order = "created_at DESC, call_id DESC LIMIT :newest" if newest is not None else "created_at, call_id"
        if newest is not None:
            named = {**named, "newest": int(newest)}
        sql = (
            f"SELECT {', '.join(columns or AUDIT_COLUMNS)} FROM {self.table} WHERE status <> 'in_flight' "
            f"{('AND (' + where + ')') if where else ''} ORDER BY {order}"
        )
        return self._guard(self._fetch, sql, named)

    def count(self, where: str = "", params=()) -> int:
        where, named = _named(where, params)
        sql = (
            f"SELECT COUNT(*) AS n FROM {self.table} WHERE status <> 'in_flight' "
            f"{('AND (' + where + ')') if where else ''}"
        )
        return int(self._guard(self._fetch, sql, named)[0]["n"])

    def close(self) -> None:
        self._beat_stop.set()
        beat = self._beat
        if beat is not None and beat is not threading.current_thread():
            beat.join(5)
        self._beat = None


def _opt_str(v: Any) -> str | None:
    return None if v is None else str(v)


def _row_to_record(row) -> CallRecord:
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


def _same_file(fh, path: Path) -> bool:
    """Whether the open file ``fh`` is still the one named ``path`` (not renamed away meanwhile)."""
    try:
        a, b = os.fstat(fh.fileno()), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _claim_spill(path: Path, abandoned: bool):
    """``(open locked file, its new name)`` once ``path`` is renamed to a name of ours; None if
    another merger has it. A fresh file is renamed first (one winner), then locked (waiting out an
    append in progress); an abandoned claim is locked first (a live merger may still hold it), then
    renamed."""
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
