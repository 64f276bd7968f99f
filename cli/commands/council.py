"""``quandary council check`` and ``quandary council calls``.

- ``check`` pings every configured member (the embedded model by default) with a small structured
  request, bypassing the cache, and prints ok/failed, latency and the parsed reply per member; exit
  status 1 if any member fails.
- ``calls`` summarizes the call log ($QUANDARY_HOME/llm_calls.sqlite): calls, cache hits, failures,
  tokens, cost and latency percentiles, per member and per tag (stage).
"""

import json
import sys
import time
from typing import Literal

from pydantic import BaseModel


class Pong(BaseModel):
    status: Literal["ok"]
    answer: int


PING = [
    {"role": "system", "content": "You are a health check. Reply with a JSON object only."},
    {"role": "user", "content": 'What is 2 + 3? Reply exactly like {"status": "ok", "answer": <number>}.'},
]


def register(subparsers) -> None:
    p = subparsers.add_parser("council", help="inspect the LLM council (members, call log)")
    sub = p.add_subparsers(dest="council_command", required=True, metavar="SUBCOMMAND")
    check = sub.add_parser("check", help="ping every configured member with a structured request")
    check.add_argument(
        "--config", default=None, help="council config file (default: $QUANDARY_COUNCIL_CONFIG or embedded)"
    )
    check.add_argument("--role", default=None, help="only the members of this role")
    check.add_argument("--json", action="store_true", help="machine-readable output")
    check.set_defaults(func=cmd_check)
    calls = sub.add_parser("calls", help="summarize the LLM call log")
    calls.add_argument("--by", choices=["member", "tag", "both"], default="both")
    calls.add_argument("--db", default=None, help="only the calls made for this registered database id")
    calls.add_argument(
        "--log",
        default=None,
        help="call log file (default: the deployment's call log: "
        "$QUANDARY_HOME/llm_calls.sqlite, or PostgreSQL in distributed mode)",
    )
    calls.add_argument("--json", action="store_true", help="machine-readable output")
    calls.set_defaults(func=cmd_calls)


def cmd_check(args) -> int:
    from resources.llm import Council, load_council_config
    from resources.llm.config import missing_key
    from resources.llm.registry import call_log

    try:
        cfg = load_council_config(args.config)
    except Exception as e:  # noqa: BLE001 - a CLI prints errors, it does not trace back
        print(f"council config error: {e}")
        return 2
    if args.role and args.role not in cfg.councils:
        print(f"unknown role {args.role!r}; roles: {', '.join(sorted(cfg.councils))}", file=sys.stderr)
        return 2
    names = cfg.councils[args.role] if args.role else list(cfg.members)
    members = [cfg.members[n] for n in dict.fromkeys(names)]
    missing = [msg for m in members if (msg := missing_key(m)) is not None]
    if missing:  # found from the environment alone: no member is pinged without its key
        print(f"council config: {cfg.source}")
        for msg in missing:
            print(f"missing API key: {msg}", file=sys.stderr)
        return 2
    council = Council("check", members, call_log())
    print(f"council config: {cfg.source}")
    t0 = time.perf_counter()
    results = council.ask_all(PING, Pong, tag={"stage": "council_check"}, use_cache=False)  # a real ping
    rows = []
    for m, r in zip(members, results):
        rows.append(
            {
                "member": m.name,
                "model": m.model,
                "ok": r.ok,
                "latency_ms": round(r.latency_ms, 1),
                "attempts": r.attempts,
                "parsed": r.parsed.model_dump() if r.parsed else None,
                "error": r.error,
                "raw_text": None if r.ok else (r.raw_text or "")[:200],
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        width = max(len(r["member"]) for r in rows)
        for r in rows:
            status = "ok    " if r["ok"] else "FAILED"
            detail = json.dumps(r["parsed"]) if r["ok"] else f"{r['error']}  raw={r['raw_text']!r}"
            print(f"{r['member']:<{width}}  {status}  {r['latency_ms']:>8.1f} ms  {r['model']}  {detail}")
        print(f"{sum(r['ok'] for r in rows)}/{len(rows)} members ok in {time.perf_counter() - t0:.1f}s")
    return 0 if all(r["ok"] for r in rows) else 1


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    idx = min(len(values) - 1, max(0, round(q * (len(values) - 1))))
    return values[idx]


def summarize(rows: list[dict], key) -> list[dict]:
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(key(r) or "(none)", []).append(r)
    out = []
    for name, rs in sorted(groups.items()):
        lat = [r["latency_ms"] for r in rs if r["latency_ms"]]
        out.append(
            {
                "group": name,
                "calls": len(rs),
                "cache_hits": sum(r["cache_hits"] or 0 for r in rs),
                "failures": sum(1 for r in rs if r["status"] != "ok"),
                "call_failed": sum(1 for r in rs if r["status"] == "call_failed"),
                "repaired": sum(r["repaired"] or 0 for r in rs),
                "attempts": sum(r["attempts"] or 0 for r in rs),
                "prompt_tokens": sum(r["prompt_tokens"] or 0 for r in rs),
                "completion_tokens": sum(r["completion_tokens"] or 0 for r in rs),
                "cost": round(sum(r["cost"] or 0.0 for r in rs), 6),
                "p50_ms": round(_percentile(lat, 0.5), 1),
                "p90_ms": round(_percentile(lat, 0.9), 1),
                "p99_ms": round(_percentile(lat, 0.99), 1),
            }
        )
    return out


_COLS = [
    "group",
    "calls",
    "cache_hits",
    "failures",
    "prompt_tokens",
    "completion_tokens",
    "cost",
    "p50_ms",
    "p90_ms",
    "p99_ms",
]


def _table(title: str, stats: list[dict]) -> str:
    head = [title] + _COLS[1:]
    cells = [[str(s[c]) for c in _COLS] for s in stats]
    widths = [max(len(h), *(len(row[i]) for row in cells)) if cells else len(h) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(head, widths)))]
    for row in cells:
        lines.append("  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths))))
    return "\n".join(lines)


def _item_ids_of_database(db_id: str) -> set[str]:
    """Every id a call of this database is tagged with (generation requests, NLQ objects,
    candidates), from the audit catalog."""
    from storage.audit import list_views, open_audit

    con = open_audit()
    try:
        views = set(list_views(con))
        ids: set[str] = set()
        for view, col in (
            ("generation_requests", "request_id"),
            ("nlq_objects", "object_id"),
            ("candidates", "candidate_id"),
            ("candidates", "object_id"),
        ):
            if view in views:
                ids |= {r[0] for r in con.execute(f'SELECT "{col}" FROM "{view}" WHERE db_id = ?', [db_id]).fetchall()}
        return ids
    finally:
        con.close()


def cmd_calls(args) -> int:
    from pathlib import Path

    from storage.llm_log import CallLogError, open_call_log
    from storage.paths import llm_calls_path
    from storage.state_db import state_url

    path = Path(args.log) if args.log else None
    if args.db:
        from resources.catalog import Catalog

        if args.db not in Catalog().ids():
            known = ", ".join(Catalog().ids()) or "none"
            print(
                f"database {args.db!r} is not registered (registered: {known}); for a call log file use --log PATH",
                file=sys.stderr,
            )
            return 2
    if path is None and not state_url():
        path = llm_calls_path()
    if path is not None and not path.exists():
        print(f"no call log at {path} (no LLM calls yet)")
        return 0
    try:
        log = open_call_log(path)
        try:
            rows = log.rows()
        finally:
            log.close()
    except CallLogError as exc:  # damaged pages, no permission, database down ...: one line naming it
        print(" ".join(str(exc).split()), file=sys.stderr)
        return 1
    path = log.path
    if args.db:
        ids = _item_ids_of_database(args.db)
        rows = [r for r in rows if r["tag_candidate_id"] in ids]
    report = {"path": str(path), **({"db": args.db} if args.db else {})}
    if args.by in ("member", "both"):
        report["by_member"] = summarize(rows, lambda r: r["member"])
    if args.by in ("tag", "both"):
        report["by_tag"] = summarize(rows, lambda r: r["tag_stage"])
    report["total"] = summarize(rows, lambda r: "total")
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"call log: {path}")
    for key, title in (("by_member", "member"), ("by_tag", "stage"), ("total", "all")):
        if key in report:
            print()
            print(_table(title, report[key]))
    return 0
