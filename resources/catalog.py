"""Seed-database catalog: inspect SQLite/DuckDB files and keep a registry of them.

* :func:`inspect_database` reads tables, columns, types, primary/foreign keys, row counts and five
  sample rows of one file (read through the SQL sandbox). Rendering them as a prompt's schema
  context is domain work: :mod:`pipelines.sqltools.schema_context`.
* :func:`discover` walks a folder in the BIRD/Spider layout ``<root>/<db_id>/<db_id>.sqlite``
  (plus any ``*.sqlite``/``*.db``/``*.duckdb`` file below it); broken files are returned as
  :class:`SkippedDatabase` with a reason, never raised.
* :class:`Catalog` persists ``db_id -> path`` in ``$QUANDARY_HOME/catalog.json`` (in distributed
  mode: a table of the shared-state database, :mod:`storage.catalog_db`); every entry is one dynamic
  partition of the Dagster assets.
* :func:`local_seed` is the file a step reads: the registered path if it holds the registered bytes;
  in distributed mode otherwise the copy fetched by content hash from the shared store
  (:mod:`storage.seeds`, uploaded by ``register``).

Plain Python, no Dagster import.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from resources.sql import execute_sql
from resources.sql.engines import open_duckdb_readonly, open_sqlite_readonly
from resources.sql.results import DUCKDB_SUFFIXES, SQLITE_SUFFIXES, engine_of
from storage.paths import quandary_home
from storage.sqlnames import quote_ident

SAMPLE_ROWS = 5
_DB_ID_RE = re.compile(r"[^A-Za-z0-9_]+")


class BadDatabaseError(Exception):
    """The file is not a usable database (not a database, empty, unreadable)."""


@dataclass(frozen=True)
class ColumnInfo:
    name: str
    type: str
    not_null: bool = False
    primary_key: bool = False


@dataclass(frozen=True)
class ForeignKey:
    column: str
    ref_table: str
    ref_column: str


@dataclass
class TableInfo:
    name: str
    columns: list[ColumnInfo]
    primary_key: list[str]
    foreign_keys: list[ForeignKey]
    row_count: int
    ddl: str
    sample_columns: list[str] = field(default_factory=list)
    sample_rows: list[tuple] = field(default_factory=list)

    def column(self, name: str) -> ColumnInfo | None:
        return next((c for c in self.columns if c.name.lower() == name.lower()), None)


@dataclass
class DatabaseInfo:
    db_id: str
    path: str
    engine: str
    tables: list[TableInfo]
    size_bytes: int
    sha256: str

    def table(self, name: str) -> TableInfo | None:
        return next((t for t in self.tables if t.name.lower() == name.lower()), None)

    @property
    def total_rows(self) -> int:
        return sum(t.row_count for t in self.tables)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class SkippedDatabase:
    path: str
    reason: str


def sanitize_db_id(name: str) -> str:
    """Dagster partition keys must be simple: keep letters, digits and underscores."""
    cleaned = _DB_ID_RE.sub("_", name).strip("_")
    return cleaned or "db"


MAX_DB_ID = 100  # a partition key and a folder name in every store (storage.paths.MAX_SEGMENT is 200)


def derived_db_id(stem: str) -> str:
    """The id a file name gives: cleaned to the id rule and cut to :data:`MAX_DB_ID` characters."""
    return sanitize_db_id(stem)[:MAX_DB_ID].strip("_") or "db"


def check_db_id(db_id: str, given: bool = True) -> str:
    """``db_id`` if it is usable as it is: letters, digits and ``_``, not starting or ending with
    ``_``, at most :data:`MAX_DB_ID` characters, and a safe folder name by the storage's own rule
    (:func:`storage.paths.path_segment`). A given id is never changed silently (issue 34 item 8):
    :class:`BadDatabaseError` says what is wrong and proposes the cleaned id."""
    from storage.paths import UnsafePathError, path_segment

    what = "--db-id" if given else "the id derived from the file name"
    cleaned = sanitize_db_id(db_id)[:MAX_DB_ID].strip("_") or "db"
    if db_id != cleaned or len(db_id) > MAX_DB_ID:
        shown = db_id if len(db_id) <= 60 else db_id[:57] + "..."
        raise BadDatabaseError(
            f"{what} {shown!r} is not a usable database id (letters, digits and _ only, not starting or ending "
            f"with _, at most {MAX_DB_ID} characters); use e.g. --db-id {cleaned}"
        )
    try:
        path_segment(db_id, "database id")
    except UnsafePathError as exc:
        raise BadDatabaseError(str(exc)) from None
    return db_id


class AlreadyRegisteredError(ValueError):
    """``db register`` of an existing id with a different file, without --replace; ``changed`` lists
    ``(db_id, old entry, new DatabaseInfo)`` for each such id."""

    def __init__(self, message: str, changed: list | None = None):
        super().__init__(message)
        self.changed = changed or []


def _rebinds(old: dict | None, info: DatabaseInfo) -> bool:
    """Whether registering ``info`` would rebind an id stored as ``old`` to another file or content."""
    return bool(old) and (old.get("path"), old.get("sha256")) != (info.path, info.sha256)


def _binding(path, sha256) -> str:
    return f"{path} (sha256 {str(sha256)[:16]}…)"


class SeedChangedError(ValueError):
    """A seed database's bytes no longer match the sha256 recorded for it (issue 23 item 6)."""


_hash_cache: dict[tuple, str] = {}


def check_seed_unchanged(path: str | Path, recorded_sha256: str | None, db_id: str) -> None:
    """Refuse a seed file whose sha256 differs from the one recorded at registration (or when a run
    read it): a run or rerun would mix two versions of the data. Hashes are cached per
    (path, size, mtime) so steps of one run hash a file once."""
    if not recorded_sha256:
        return
    p = Path(path)
    if not p.is_file():
        return  # a missing file is the reader's error to report ("not a file: ...")
    try:
        current = _cached_sha256(p)
    except OSError as exc:
        raise SeedChangedError(f"seed database {db_id!r} ({p}) cannot be read: {exc.strerror or exc}") from None
    if current != recorded_sha256:
        raise SeedChangedError(
            f"seed database {db_id!r} ({p}) changed since it was registered or read by this run: recorded sha256 "
            f"{recorded_sha256[:16]}…, now {current[:16]}…; to use the new data re-register it "
            f"(`quandary db register {p} --db-id {db_id} --replace`) and start a new run, or restore the old file"
        )


def _cached_sha256(p: Path) -> str:
    from storage.artifacts import (
        file_sha256,  # here, not at the top: importing the catalog stays polars-free
    )

    st = p.stat()
    key = (str(p), st.st_size, st.st_mtime_ns)
    return _hash_cache.get(key) or _hash_cache.setdefault(key, file_sha256(p))


def local_seed(path: str | Path, recorded_sha256: str | None, db_id: str) -> str:
    """The file to read for seed ``db_id``, checked against its registered hash before any step reads it.

    On one machine: ``path``, refused by :func:`check_seed_unchanged` if its bytes changed. In
    distributed mode (a shared store): ``path`` if it holds the registered bytes, else — missing on
    this node, or other bytes — the copy fetched by hash from the store into ``$QUANDARY_HOME/seeds``
    (verified); a seed in neither place is refused naming both and what to do."""
    # lazy: keeps `quandary` start-up light (the object store)
    from storage.seeds import SeedUnavailableError, fetch_seed, seed_backend

    backend = seed_backend() if recorded_sha256 else None
    if backend is None:
        check_seed_unchanged(path, recorded_sha256, db_id)
        return str(path)
    p = Path(path)
    try:
        if p.is_file() and _cached_sha256(p) == recorded_sha256:
            return str(p)
    except OSError:
        pass
    try:
        return str(fetch_seed(recorded_sha256, p.suffix, backend, verified=_cached_sha256))
    except SeedUnavailableError as exc:
        state = "is missing on this node" if not p.is_file() else "holds other bytes than were registered"
        raise SeedChangedError(
            f"seed database {db_id!r}: {p} {state}, and the registered bytes (sha256 {recorded_sha256[:16]}…) "
            f"cannot be fetched from the shared store: {exc}; run `quandary db register {p} --db-id {db_id}` "
            "on a node that has the registered file"
        ) from None


# ----------------------------------------------------------------------------- inspection


def inspect_database(path: str | Path, db_id: str | None = None) -> DatabaseInfo:
    """Read schema, keys, row counts and sample rows; raise BadDatabaseError with a reason."""
    p = Path(path)
    if not p.is_file():
        raise BadDatabaseError(f"not a file: {p}")
    size = p.stat().st_size
    if size == 0:
        raise BadDatabaseError("empty file (0 bytes)")
    if not os.access(p, os.R_OK):
        raise BadDatabaseError("file is not readable")
    engine = engine_of(p)
    try:
        tables = _inspect_sqlite(p) if engine == "sqlite" else _inspect_duckdb(p)
    except BadDatabaseError:
        raise
    except Exception as exc:  # driver errors differ per engine; all mean "unusable"
        raise BadDatabaseError(f"cannot read as {engine}: {exc}") from exc
    if not tables:
        raise BadDatabaseError("database has no tables")
    from storage.artifacts import (
        file_sha256,  # here, not at the top: importing the catalog stays polars-free
    )

    return DatabaseInfo(
        # a given id is checked, never changed; one derived from the file name is cleaned (and the
        # CLI says so when that changed it)
        db_id=check_db_id(db_id) if db_id else derived_db_id(p.stem),
        path=str(p.resolve()),
        engine=engine,
        tables=tables,
        size_bytes=size,
        sha256=file_sha256(p),
    )


def _inspect_sqlite(path: Path) -> list[TableInfo]:
    with open(path, "rb") as fh:
        if not fh.read(16).startswith(b"SQLite format 3\x00"):
            raise BadDatabaseError("not a SQLite database (bad header)")
    con = open_sqlite_readonly(path)
    try:
        rows = con.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        ).fetchall()
        tables = []
        for name, ddl in rows:
            q = quote_ident(name)
            cols_raw = con.execute(f"PRAGMA table_info({q})").fetchall()
            columns = [
                ColumnInfo(name=c[1], type=(c[2] or "").upper(), not_null=bool(c[3]), primary_key=c[5] > 0)
                for c in cols_raw
            ]
            pk = [c[1] for c in sorted((c for c in cols_raw if c[5] > 0), key=lambda c: c[5])]
            fks = []
            for fk in con.execute(f"PRAGMA foreign_key_list({q})").fetchall():
                ref_col = fk[4]
                if ref_col is None:  # FK to the referenced table's primary key
                    ref_pk = [c[1] for c in con.execute(f"PRAGMA table_info({quote_ident(fk[2])})") if c[5] > 0]
                    ref_col = ref_pk[0] if ref_pk else ""
                fks.append(ForeignKey(column=fk[3], ref_table=fk[2], ref_column=ref_col))
            row_count = con.execute(f"SELECT COUNT(*) FROM {q}").fetchall()[0][0]
            sample_cols, sample = _sample_rows(path, q, [c.name for c in columns])
            tables.append(TableInfo(name, columns, pk, fks, row_count, (ddl or "").strip(), sample_cols, sample))
        return tables
    finally:
        con.close()


def _inspect_duckdb(path: Path) -> list[TableInfo]:
    con = open_duckdb_readonly(path)
    try:
        names = [
            r[0]
            for r in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE NOT internal ORDER BY table_name"
            ).fetchall()
        ]
        tables = []
        for name in names:
            q = quote_ident(name)
            cols = con.execute(
                "SELECT column_name, data_type, NOT is_nullable FROM duckdb_columns() "
                "WHERE table_name = ? ORDER BY column_index",
                [name],
            ).fetchall()
            cons = con.execute(
                "SELECT constraint_type, constraint_column_names, referenced_table, "
                "referenced_column_names FROM duckdb_constraints() WHERE table_name = ?",
                [name],
            ).fetchall()
            pk: list[str] = []
            fks: list[ForeignKey] = []
            for ctype, ccols, rtable, rcols in cons:
                if ctype == "PRIMARY KEY":
                    pk = list(ccols)
                elif ctype == "FOREIGN KEY" and rtable:
                    fks.extend(ForeignKey(c, rtable, r) for c, r in zip(ccols, rcols or []))
            columns = [ColumnInfo(c[0], c[1].upper(), bool(c[2]), c[0] in pk) for c in cols]
            ddl = con.execute("SELECT sql FROM duckdb_tables() WHERE table_name = ?", [name]).fetchall()[0][0]
            row_count = con.execute(f"SELECT COUNT(*) FROM {q}").fetchall()[0][0]
            sample_cols, sample = _sample_rows(path, q, [c.name for c in columns])
            tables.append(TableInfo(name, columns, pk, fks, row_count, (ddl or "").strip(), sample_cols, sample))
        return tables
    finally:
        con.close()


SAMPLE_MAX_BYTES = 4 << 20
SAMPLE_TIMEOUT_S = 10.0


def _sample_rows(path: Path, quoted_table: str, column_names: list[str]) -> tuple[list[str], list[tuple]]:
    """Up to five sample rows, read through the sandboxed executor: a hostile database (e.g. a
    generated ``zeroblob(1e9)`` column) costs a bounded amount of memory and time, and then simply
    has no sample rows."""

    out = execute_sql(
        path,
        f"SELECT * FROM {quoted_table} LIMIT {SAMPLE_ROWS}",
        timeout_s=SAMPLE_TIMEOUT_S,
        max_bytes=SAMPLE_MAX_BYTES,
    )
    if not out.ok:
        return column_names, []
    return out.columns, out.rows


# ------------------------------------------------------------------------------ discovery

_CANDIDATE_SUFFIXES = SQLITE_SUFFIXES | DUCKDB_SUFFIXES


def discover(root: str | Path) -> tuple[list[DatabaseInfo], list[SkippedDatabase]]:
    """Walk ``root`` for database files; return the good ones and the skipped ones with reasons.

    In the BIRD/Spider layout ``<root>/<db_id>/<db_id>.sqlite`` the folder name is the db_id;
    other files take their stem. Duplicate ids get a numeric suffix so no file is lost.
    """
    root = Path(root)
    found: list[DatabaseInfo] = []
    skipped: list[SkippedDatabase] = []
    if not root.is_dir():
        return found, [SkippedDatabase(str(root), "not a directory")]
    seen: set[str] = set()
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.suffix.lower() not in _CANDIDATE_SUFFIXES:
            continue
        base_id = derived_db_id(path.parent.name if path.stem == path.parent.name else path.stem)
        db_id, n = base_id, 2
        while db_id in seen:
            db_id, n = f"{base_id}_{n}", n + 1
        try:
            info = inspect_database(path, db_id)
        except BadDatabaseError as exc:
            skipped.append(SkippedDatabase(str(path), str(exc)))
            continue
        seen.add(db_id)
        found.append(info)
    return found, skipped


# -------------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class CatalogEntry:
    db_id: str
    path: str
    engine: str
    sha256: str


class Catalog:
    """``db_id -> file`` registry persisted as JSON under ``$QUANDARY_HOME``, or — in distributed mode,
    when no ``path`` is given — as rows of the shared-state database every node sees
    (:mod:`storage.catalog_db`).

    Concurrent writers (several ``db register`` at once) are serialized by an exclusive file lock
    around read-modify-write (a PostgreSQL advisory lock in distributed mode), so no registration is
    lost; the slow inspection of a database happens outside the lock. File writes are tmp file +
    fsync + rename, so readers never see half a file. With a shared store, registering also uploads
    the file by its hash (:func:`storage.seeds.upload_seed`) before the entry is written.
    """

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else quandary_home() / "catalog.json"
        self._engine = None
        if path is None:
            from storage.state_db import state_engine  # lazy: sqlalchemy, only in distributed mode

            self._engine = state_engine()

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    def _load(self) -> dict[str, dict]:
        if self._engine is not None:
            from storage.catalog_db import load  # lazy: sqlalchemy, only in distributed mode

            return load(self._engine)
        if not self.path.exists():
            return {}
        from storage.faults import CORRUPT, StorageError, storage_error  # lazy: light start-up

        try:
            data = json.loads(self.path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            # one line naming the file and the fix (issue 34 item 6), never a traceback: the CLI prints it
            raise StorageError(
                f"catalog file {self.path} is damaged ({' '.join(str(exc).split())[:120]}); move it away or "
                "restore it from a backup, then register the databases again (`quandary db register PATH`)",
                CORRUPT,
                self.path,
            ) from None
        except OSError as exc:
            raise storage_error(exc, self.path, "catalog file") from None
        if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
            raise StorageError(
                f"catalog file {self.path} is damaged (not a mapping of database ids to entries); move it away "
                "or restore it from a backup, then register the databases again (`quandary db register PATH`)",
                CORRUPT,
                self.path,
            )
        return data

    def _save(self, data: dict[str, dict]) -> None:
        from storage.faults import storage_error  # lazy: light start-up

        tmp = self.path.with_suffix(f".tmp{os.getpid()}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "w") as fh:
                fh.write(json.dumps(data, indent=2, sort_keys=True))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)  # atomic: readers never see a half-written catalog
        except OSError as exc:  # full, read-only or not ours: one line naming the file and the fix
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                pass
            raise storage_error(exc, self.path, "catalog file") from None

    def _update(self, change) -> None:
        """Apply ``change(data)`` to the stored catalog under the inter-process lock."""
        if self._engine is not None:
            from storage.catalog_db import update  # lazy: sqlalchemy, only in distributed mode

            return update(self._engine, change)
        from resources.locks import file_lock  # lazy: keeps `quandary` start-up light
        from storage.faults import storage_error

        lock = file_lock(self.lock_path)
        try:
            lock.__enter__()
        except OSError as exc:  # an unwritable or read-only folder: one line, not a traceback
            raise storage_error(exc, self.lock_path, "catalog lock file") from None
        try:
            data = self._load()
            change(data)
            self._save(data)
        finally:
            lock.__exit__(None, None, None)

    def entries(self) -> list[CatalogEntry]:
        return [CatalogEntry(**v) for _, v in sorted(self._load().items())]

    def ids(self) -> list[str]:
        return [e.db_id for e in self.entries()]

    def get(self, db_id: str) -> CatalogEntry:
        data = self._load()
        if db_id not in data:
            known = ", ".join(sorted(data)) or "none"
            raise KeyError(f"database {db_id!r} is not registered (registered: {known})")
        return CatalogEntry(**data[db_id])

    def register(self, path: str | Path, db_id: str | None = None, *, replace: bool = True) -> DatabaseInfo:
        """Register (or re-register) ``path``; with ``replace=False`` an id already bound to another
        file or other content raises :class:`AlreadyRegisteredError` instead of rebinding it."""
        info = inspect_database(path, db_id)
        entry = asdict(CatalogEntry(info.db_id, info.path, info.engine, info.sha256))
        _share_seed(info)

        def change(data):
            old = data.get(info.db_id)
            if not replace and _rebinds(old, info):
                raise AlreadyRegisteredError(
                    f"database id {info.db_id!r} is already registered to "
                    f"{_binding(old.get('path'), old.get('sha256'))}; pass --replace to rebind it to {_binding(info.path, info.sha256)}, which starts a new "
                    "version of its partition",
                    [(info.db_id, old, info)],
                )
            data[info.db_id] = entry

        self._update(change)
        return info

    def register_folder(
        self, root: str | Path, *, replace: bool = True
    ) -> tuple[list[DatabaseInfo], list[SkippedDatabase]]:
        """Register every database :func:`discover` finds under ``root``. With ``replace=False``,
        if any id is already bound to another file or content, nothing is registered and
        :class:`AlreadyRegisteredError` lists each such id (old and new file and sha256)."""
        found, skipped = discover(root)
        for info in found:
            _share_seed(info)

        def add(data):
            changed = [(info.db_id, data[info.db_id], info) for info in found if _rebinds(data.get(info.db_id), info)]
            if changed and not replace:
                lines = [
                    f"  {db_id}: {_binding(old.get('path'), old.get('sha256'))} -> {_binding(info.path, info.sha256)}"
                    for db_id, old, info in changed
                ]
                raise AlreadyRegisteredError(
                    f"{len(changed)} database id(s) under {root} are already registered to another file or "
                    "content; nothing registered:\n"
                    + "\n".join(lines)
                    + "\npass --replace to rebind them (each starts a new version of its partition)",
                    changed,
                )
            for info in found:
                data[info.db_id] = asdict(CatalogEntry(info.db_id, info.path, info.engine, info.sha256))

        self._update(add)
        return found, skipped

    def remove(self, db_id: str) -> None:
        self._update(lambda data: data.pop(db_id, None))


def _share_seed(info: DatabaseInfo) -> None:
    """In distributed mode: the seed's bytes in the shared store under their hash, so a node without
    the file fetches them (:func:`local_seed`); on one machine nothing."""
    # lazy: keeps `quandary` start-up light (the object store)
    from storage.seeds import SeedUnavailableError, upload_seed

    try:
        upload_seed(info.path, info.sha256)
    except SeedUnavailableError as exc:
        raise BadDatabaseError(str(exc)) from None
