"""``quandary generate <generator> ...`` — candidate generators.

``generate`` is a group: ``programmatic`` is the schema/data-driven generator (zero LLM calls);
other generators (e.g. ``llm``) register further sub-commands on the same group by adding a
parser to ``GENERATE_SUBPARSERS`` (see :func:`register`).

    quandary generate programmatic DB_PATH [--per-subcategory N] [--seed S] [--json]
        [--style STYLE ...] [--subcategory ID ...] [--db-id ID]

With ``--json`` every candidate is one JSON line on stdout and the skipped subcategories (with
reasons) go to stderr; without it a readable table is printed.
"""

from __future__ import annotations

import argparse
import json
import sys

from pipelines.abiss.taxonomy import STYLES, SUBCATEGORIES

GENERATE_SUBPARSERS: dict[str, argparse._SubParsersAction] = {}


def register(subparsers: argparse._SubParsersAction) -> None:
    gen = subparsers.add_parser(
        "generate",
        help="generate candidate NLQ objects for a database",
        description="Generate candidate NLQ objects (question, evidence, SQL, hidden knowledge or feedback).",
    )
    group = gen.add_subparsers(dest="generator", required=True, metavar="GENERATOR")
    GENERATE_SUBPARSERS["generate"] = group

    p = group.add_parser(
        "programmatic",
        help="schema- and data-driven candidates verified by execution (no LLM)",
        description="Build candidates for every ABISS subcategory the database supports, verified by execution.",
    )
    p.add_argument("db_path", metavar="DB_PATH", help="SQLite or DuckDB file")
    p.add_argument("--per-subcategory", type=int, default=2, metavar="N", help="questions per subcategory (default 2)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object per candidate (JSON lines)")
    p.add_argument("--style", action="append", choices=[s.id for s in STYLES], help="restrict styles (repeatable)")
    p.add_argument(
        "--subcategory",
        action="append",
        choices=[s.id for s in SUBCATEGORIES],
        help="restrict subcategories (repeatable)",
    )
    p.add_argument("--db-id", default=None, help="database id (default: file stem)")
    p.set_defaults(func=_run_programmatic)


def _short(text: str | None, width: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _run_programmatic(args: argparse.Namespace) -> int:
    from pipelines.abiss.programmatic import generate_candidates
    from resources.catalog import BadDatabaseError

    if args.per_subcategory < 0:
        print("error: --per-subcategory must be >= 0", file=sys.stderr)
        return 2
    try:
        report = generate_candidates(
            args.db_path,
            per_subcategory=args.per_subcategory,
            seed=args.seed,
            styles=args.style,
            subcategories=args.subcategory,
            db_id=args.db_id,
        )
    except BadDatabaseError as exc:
        print(f"error: {args.db_path}: {exc}", file=sys.stderr)
        return 2
    out = sys.stdout
    if args.json:
        for c in report.candidates:
            out.write(json.dumps(c.to_dict(), ensure_ascii=False, default=str) + "\n")
        for sub, why in report.skipped.items():
            print(f"skipped {sub}: {why}", file=sys.stderr)
        return 0
    header = f"{'subcategory':<27} {'#':>2} {'style':<13} {'difficulty':<14} question"
    out.write(f"{report.db_id}: {len(report.candidates)} candidates, {len(report.covered)}/13 subcategories\n")
    out.write(header + "\n" + "-" * len(header) + "\n")
    for c in report.candidates:
        idx = "" if c.interpretation_index is None else str(c.interpretation_index)
        out.write(f"{c.subcategory:<27} {idx:>2} {c.style:<13} {(c.difficulty or '-'):<14} {_short(c.question, 80)}\n")
        detail = c.sql or c.feedback or ""
        out.write(f"{'':<27} {'':>2} {'':<13} {'':<14}   {'SQL' if c.sql else 'feedback'}: {_short(detail, 100)}\n")
        if c.hidden_knowledge:
            out.write(f"{'':<27} {'':>2} {'':<13} {'':<14}   hidden: {_short(c.hidden_knowledge, 100)}\n")
        if c.evidence and c.interpretation_index in (None, 0):
            out.write(f"{'':<27} {'':>2} {'':<13} {'':<14}   evidence: {_short(c.evidence, 100)}\n")
    if report.skipped:
        out.write("\nskipped:\n")
        for sub, why in report.skipped.items():
            out.write(f"  {sub}: {why}\n")
    return 0
