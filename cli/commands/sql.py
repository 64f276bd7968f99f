"""`quandary sql DB_PATH "SQL"`: run one query through the safe executor."""

import json
import sys

from cli.output import render_table
from resources.sql import DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_S, execute_sql, timeout_arg


def _run(args) -> int:
    from assets.shared.preflight import PreflightError, check_database_file

    try:
        check_database_file(args.db_path)
    except PreflightError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 1
    outcome = execute_sql(args.db_path, args.sql, timeout_s=args.timeout, max_rows=args.max_rows)
    if not outcome.ok:
        print(f"refused or failed: {outcome.one_line()}", file=sys.stderr)
        return 1
    if args.json:
        print(
            json.dumps(
                {
                    "columns": outcome.columns,
                    "rows": outcome.rows,
                    "row_count": outcome.row_count,
                    "elapsed_ms": outcome.elapsed_ms,
                },
                default=str,
            )
        )
    else:
        print(render_table(outcome.columns, outcome.rows))
        print(f"({outcome.row_count} rows, {outcome.elapsed_ms:.1f} ms)")
    return 0


def register(sub) -> None:
    p = sub.add_parser("sql", help="run one read-only query through the safe executor")
    p.add_argument("db_path")
    p.add_argument("sql")
    p.add_argument("--timeout", type=timeout_arg, default=DEFAULT_TIMEOUT_S, help="seconds (default 3, at most 86400)")
    p.add_argument("--max-rows", type=int, default=DEFAULT_MAX_ROWS)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_run)
