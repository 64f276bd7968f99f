"""`quandary audit sql "SELECT ..."`: query every artifact through the DuckDB audit catalog."""

import sys

from pipelines.cli._output import render


def _audit_sql(args) -> int:
    import duckdb

    from storage.audit import AuditQueryError, audit_query, list_views, open_audit

    con = open_audit()
    try:
        cur = audit_query(con, args.query)
        columns = [d[0] for d in cur.description or []]
        rows = cur.fetchall()
    except (duckdb.Error, AuditQueryError) as exc:
        views = ", ".join(list_views(con)) or "none yet (materialize something first)"
        print(f"query failed: {' '.join(str(exc).split())}\navailable views: {views}", file=sys.stderr)
        return 1
    finally:
        con.close()
    print(render(args.format, columns, rows))
    return 0


def _audit_views(args) -> int:
    from storage.audit import list_views, open_audit

    con = open_audit()
    for name in list_views(con):
        n = con.execute(f'SELECT COUNT(*) FROM "{name}"').fetchall()[0][0]
        print(f"{name:<32} {n:>8} rows")
    con.close()
    return 0


def register(sub) -> None:
    audit = sub.add_parser("audit", help="audit artifacts, votes and LLM calls").add_subparsers(
        dest="audit_command", required=True)
    q = audit.add_parser("sql", help="run SQL over every artifact's latest version (one view per asset)")
    q.add_argument("query")
    q.add_argument("--format", choices=["table", "csv", "json"], default="table")
    q.set_defaults(func=_audit_sql)
    audit.add_parser("views", help="list the audit views and their row counts").set_defaults(func=_audit_views)
    from pipelines.cli.abiss import audit_question

    t = audit.add_parser("question", help="trail of one candidate: decisions, votes, prompts, raw answers")
    t.add_argument("id", help="candidate id (a unique prefix is enough)")
    t.add_argument("--prompts", action="store_true",
                   help="also print the whole prompt behind each vote (system and user messages)")
    t.add_argument("--width", type=int, default=None, help="cut each prompt message and answer to this many characters")
    t.set_defaults(func=audit_question)
    from pipelines.cli.ambitab_eval import audit_episode

    ep = audit.add_parser("episode", help="one AmbiTab episode: turns, credits, responses, SQL, verdict, prompts")
    ep.add_argument("id", help="episode id (a unique prefix is enough)")
    ep.add_argument("--prompts", action="store_true", help="also print the prompt behind each LLM call")
    ep.add_argument("--width", type=int, default=None, help="cut each prompt message and answer to this many characters")
    ep.set_defaults(func=audit_episode)
    from pipelines.cli.interaction import register_audit

    register_audit(audit)
