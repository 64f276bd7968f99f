"""`quandary demo-db PATH` and `quandary db register|list|show`: seed databases."""

import json
import sys

from pipelines.abiss.demo_db import write_demo_db
from pipelines.sqltools.schema_context import render_schema_context
from resources.catalog import AlreadyRegisteredError, BadDatabaseError, Catalog, inspect_database


def _demo_db(args) -> int:
    path = write_demo_db(args.path)
    print(path)
    return 0


def _sync_partitions(db_ids: list[str]) -> None:
    """Add the dynamic partitions to the project instance now (the sensor would, later)."""

    if not db_ids:
        return
    from cli.runs import ensure_partitions, get_instance

    ensure_partitions(get_instance(), db_ids)


def _register(args) -> int:
    from pathlib import Path

    catalog = Catalog()
    if args.folder:
        try:
            found, skipped = catalog.register_folder(args.path, replace=args.replace)
        except AlreadyRegisteredError as exc:
            print(f"cannot register {args.path}: {exc}", file=sys.stderr)
            return 1
        for info in found:
            print(f"registered {info.db_id:<32} {len(info.tables):>3} tables  {info.path}")
            p = Path(info.path)
            named = p.parent.name if p.stem == p.parent.name else p.stem
            if info.db_id != named:
                print(f"note: {named!r} was changed to the database id {info.db_id!r}")
        for s in skipped:
            print(f"skipped    {s.path}: {s.reason}", file=sys.stderr)
        _sync_partitions([i.db_id for i in found])
        return 0 if found else 1
    if Path(args.path).is_dir():
        print(
            f"cannot register {args.path}: it is a folder; to register every <root>/<db_id>/<db_id>.sqlite "
            f"in it, run: quandary db register {args.path} --folder",
            file=sys.stderr,
        )
        return 1
    try:
        info = catalog.register(args.path, args.db_id, replace=args.replace)
    except (AlreadyRegisteredError, BadDatabaseError) as exc:
        print(f"cannot register {args.path}: {exc}", file=sys.stderr)
        return 1
    print(f"registered {info.db_id} ({info.engine}, {len(info.tables)} tables) {info.path}")
    if not args.db_id and info.db_id != Path(args.path).stem:
        print(f"note: the file name {Path(args.path).stem!r} was changed to the database id {info.db_id!r}")
    _sync_partitions([info.db_id])
    return 0


def _remove(args) -> int:
    """Forget a registration (the database file and existing artifacts are left alone)."""
    catalog = Catalog()
    if args.db_id not in catalog.ids():
        known = ", ".join(catalog.ids()) or "none"
        print(f"database {args.db_id!r} is not registered (registered: {known})", file=sys.stderr)
        return 1
    entry = catalog.get(args.db_id)
    catalog.remove(args.db_id)
    print(f"removed {args.db_id} from the catalog (the file {entry.path} and its artifacts are kept)")
    return 0


def _list(args) -> int:
    for e in Catalog().entries():
        print(f"{e.db_id:<32} {e.engine:<7} {e.path}")
    return 0


def _show(args) -> int:
    catalog = Catalog()
    try:
        entry = catalog.get(args.db_id)
        info = inspect_database(entry.path, entry.db_id)
    except (KeyError, BadDatabaseError) as exc:
        print(str(exc).strip("'\""), file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(info.to_dict(), default=str, indent=2))
    else:
        print(render_schema_context(info))
    return 0


def register(sub) -> None:
    p = sub.add_parser("demo-db", help="write the paper's university demo database")
    p.add_argument("path")
    p.set_defaults(func=_demo_db)

    db = sub.add_parser("db", help="register and inspect seed databases").add_subparsers(
        dest="db_command", required=True
    )
    r = db.add_parser("register", help="register a SQLite/DuckDB file, or a folder with --folder")
    r.add_argument("path")
    r.add_argument("--db-id", help="partition id (default: file stem)")
    r.add_argument(
        "--replace",
        action="store_true",
        help="rebind an id already registered to another file or content (a new partition version)",
    )
    r.add_argument(
        "--folder", action="store_true", help="walk a BIRD/Spider-style folder <root>/<db_id>/<db_id>.sqlite"
    )
    r.set_defaults(func=_register)
    db.add_parser("list", help="list registered databases").set_defaults(func=_list)
    rm = db.add_parser("remove", help="forget a registered database (its file and artifacts are kept)")
    rm.add_argument("db_id")
    rm.set_defaults(func=_remove)
    s = db.add_parser("show", help="print a database's prompt schema context")
    s.add_argument("db_id")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=_show)
