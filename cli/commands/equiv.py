"""``quandary equiv DB_PATH GOLD_SQL PRED_SQL``: relaxed result equivalence (ABISS Appendix A).

Prints ``equivalent`` (exit 0) or ``not equivalent: <reason>`` (exit 1); when a query does not
execute, prints ``error: <gold|pred> failed: <reason>`` on stderr and exits 2.
"""

from __future__ import annotations

import argparse
import sys

from pipelines.sqltools.equivalence import sql_equivalent
from resources.sql import DEFAULT_TIMEOUT_S, timeout_arg

EXIT_EQUIVALENT, EXIT_NOT_EQUIVALENT, EXIT_QUERY_FAILED = 0, 1, 2


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "equiv",
        help="compare two queries' results with the relaxed equivalence of ABISS Appendix A",
        description=(
            "Run GOLD_SQL and PRED_SQL read-only on DB_PATH and compare the results, tolerating "
            "row order, column names, column order and extra predicted columns. "
            "Exit 0 equivalent, 1 not equivalent, 2 a query failed."
        ),
    )
    parser.add_argument("db_path", metavar="DB_PATH", help="SQLite or DuckDB database file")
    parser.add_argument("gold_sql", metavar="GOLD_SQL", help="gold (reference) query")
    parser.add_argument("pred_sql", metavar="PRED_SQL", help="predicted query")
    parser.add_argument(
        "--order-sensitive",
        action="store_true",
        help="row order must match when GOLD_SQL has a top-level ORDER BY (default: order-insensitive)",
    )
    parser.add_argument(
        "--timeout",
        type=timeout_arg,
        default=DEFAULT_TIMEOUT_S,
        metavar="S",
        help=f"per-query timeout in seconds (default {DEFAULT_TIMEOUT_S:g}, at most 86400)",
    )
    parser.set_defaults(func=run_equiv)


def run_equiv(args: argparse.Namespace) -> int:
    from assets.shared.preflight import PreflightError, check_database_file

    try:
        check_database_file(args.db_path)
    except PreflightError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_QUERY_FAILED
    verdict = sql_equivalent(
        args.db_path,
        args.gold_sql,
        args.pred_sql,
        order_sensitive=args.order_sensitive,
        timeout_s=args.timeout,
    )
    if verdict.failed:
        print(f"error: {verdict.reason}", file=sys.stderr)
        return EXIT_QUERY_FAILED
    if verdict.equivalent:
        print("equivalent")
        return EXIT_EQUIVALENT
    print(f"not equivalent: {verdict.reason}")
    return EXIT_NOT_EQUIVALENT
