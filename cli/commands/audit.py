"""`quandary audit ...`: query every artifact through the DuckDB audit catalog (`sql`, `views`), and
the trail behind one result: a question (ABISS), an episode (AmbiTab), a conversation (interaction)."""

import json
import sys
from datetime import UTC

from cli.logged_calls import print_logged_call
from cli.output import render
from resources.sql.results import timeout_arg
from storage.audit import query_frame


def _audit_sql(args) -> int:
    """The query runs in a sandbox worker (memory cap, deadline, Ctrl-C kills it at once)."""
    from resources.sql.audit_runner import run_audit_query

    args.path = args.path or args.out
    if args.format == "parquet" and not args.path:
        print(
            "--format parquet writes a file: quandary audit sql QUERY --format parquet --out PATH "
            "(or QUERY PATH --format parquet)",
            file=sys.stderr,
        )
        return 2
    try:
        out = run_audit_query(
            args.query, timeout_s=args.timeout, warn=lambda m: print(f"warning: {' '.join(m.split())}", file=sys.stderr)
        )
    except KeyboardInterrupt:
        print("interrupted: the audit query was stopped (nothing is written by audit sql)", file=sys.stderr)
        return 130
    if not out.ok:
        if out.kind == "timeout":
            print(
                f"query failed: timeout: {out.message}; narrow the query or raise --timeout (now {args.timeout:g} s)",
                file=sys.stderr,
            )
        elif out.kind == "too_large":
            print(
                f"query failed: too large: {out.message}; narrow the query or add a LIMIT "
                "(memory: QUANDARY_AUDIT_MEMORY_MB)",
                file=sys.stderr,
            )
        elif out.kind == "query":
            views = ", ".join(out.views) or "none yet (materialize something first)"
            print(f"query failed: {out.message}\navailable views: {views}", file=sys.stderr)
        else:
            print(f"query failed: {out.message}", file=sys.stderr)
        return 1
    if args.format == "parquet":
        return _write_parquet(out.columns, out.rows, args.path)
    print(render(args.format, out.columns, out.rows))
    return 0


def _write_parquet(columns: list, rows: list, path: str) -> int:
    """The sandbox's result (columns, rows) as a Parquet file, for a notebook (#24)."""
    from pathlib import Path

    import polars as pl

    try:
        frame = pl.DataFrame([list(r) for r in rows], schema=list(columns), orient="row", infer_schema_length=None)
    except (pl.exceptions.PolarsError, TypeError, ValueError) as exc:
        print(
            f"cannot write the result as Parquet: {' '.join(str(exc).split())[:300]} "
            "(give duplicate or mixed-type columns distinct names / one type with AS and CAST)",
            file=sys.stderr,
        )
        return 1
    out = Path(path)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        frame.write_parquet(out)
    except OSError as exc:
        print(f"cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"wrote {frame.height} rows × {frame.width} columns to {out} (polars.read_parquet / pandas.read_parquet)")
    return 0


def _audit_views(args) -> int:
    from storage.audit import list_views, open_audit

    con = open_audit()
    for name in list_views(con):
        n = con.execute(f'SELECT COUNT(*) FROM "{name}"').fetchall()[0][0]
        print(f"{name:<32} {n:>8} rows")
    con.close()
    return 0


def _audit_versions(args) -> int:
    """The version history of a stored table, per partition (``store.versions``: versions.jsonl on one
    machine, the shared-state table in distributed mode)."""
    from datetime import datetime

    from storage.stores import artifact_store, latest_partitions

    store = artifact_store()
    parts = [args.partition] if args.partition else latest_partitions(store, args.asset)
    rows = []
    for part in parts:
        for v in store.versions(args.asset, part):
            at = datetime.fromtimestamp(v["at"], UTC).strftime("%Y-%m-%d %H:%M:%S") if v.get("at") else ""
            rows.append([part, v["seq"], v["hash"][:16], v.get("rows"), v.get("size"), at, v.get("run_id") or ""])
    if not rows:
        print(
            f"no versions of {args.asset}"
            + (f" for {args.partition!r}" if args.partition else "")
            + f" in {store.url}",
            file=sys.stderr,
        )
        return 1
    print(render(args.format, ["partition", "seq", "hash", "rows", "bytes", "written (UTC)", "run"], rows))
    return 0


def register(sub) -> None:
    audit = sub.add_parser("audit", help="audit artifacts, votes and LLM calls").add_subparsers(
        dest="audit_command", required=True
    )
    q = audit.add_parser("sql", help="run SQL over every artifact's latest version (one view per asset)")
    q.add_argument("query")
    q.add_argument("path", nargs="?", help="with --format parquet: the file to write (or --out PATH)")
    q.add_argument("--format", choices=["table", "csv", "json", "parquet"], default="table")
    q.add_argument("--out", "-o", dest="out", help="with --format parquet: the file to write")
    q.add_argument(
        "--timeout",
        type=timeout_arg,
        default=60.0,
        help="seconds the query may run (default 60, at most 86400); it runs in a sandbox with a memory cap "
        "(QUANDARY_AUDIT_MEMORY_MB, default 1024)",
    )
    q.set_defaults(func=_audit_sql)
    audit.add_parser("views", help="list the audit views and their row counts").set_defaults(func=_audit_views)
    v = audit.add_parser("versions", help="the version history of a stored table (every partition, or one)")
    v.add_argument("asset")
    v.add_argument("--partition", "--db", dest="partition", help="one partition (database id, corpus, scenario)")
    v.add_argument("--format", choices=["table", "csv", "json"], default="table")
    v.set_defaults(func=_audit_versions)
    t = audit.add_parser("question", help="trail of one candidate: decisions, votes, prompts, raw answers")
    t.add_argument("id", help="candidate id (a unique prefix is enough)")
    t.add_argument(
        "--prompts", action="store_true", help="also print the whole prompt behind each vote (system and user messages)"
    )
    t.add_argument("--width", type=int, default=None, help="cut each prompt message and answer to this many characters")
    t.set_defaults(func=audit_question)
    ep = audit.add_parser("episode", help="one AmbiTab episode: turns, credits, responses, SQL, verdict, prompts")
    ep.add_argument("id", help="episode id (a unique prefix is enough)")
    ep.add_argument("--prompts", action="store_true", help="also print the prompt behind each LLM call")
    ep.add_argument(
        "--width", type=int, default=None, help="cut each prompt message and answer to this many characters"
    )
    ep.set_defaults(func=audit_episode)
    register_audit(audit)


def audit_question(args) -> int:
    from storage.audit import list_views, open_audit

    con = open_audit()
    try:
        views = set(list_views(con))
        if "candidates" not in views:
            print("no candidates materialized yet; run the ABISS job first", file=sys.stderr)
            return 1
        cand = con.execute(
            "SELECT candidate_id, db_id, subcategory, style, difficulty, generator, question, evidence, sql, "
            "hidden_knowledge, feedback, group_id FROM candidates WHERE candidate_id = ? OR candidate_id LIKE ? "
            "OR object_id = ? LIMIT 2",
            [args.id, args.id + "%", args.id],
        ).fetchall()
        if not cand:
            print(f"no candidate {args.id!r}", file=sys.stderr)
            return 1
        if len(cand) > 1:
            print(f"{args.id!r} is ambiguous: give more of the id", file=sys.stderr)
            return 1
        (cid, db_id, sub, style, diff, gen, question, evidence, sql, hk, fb, group_id) = cand[0]
        print(f"candidate {cid}  (db {db_id}, group {group_id})")
        print(f"  subcategory {sub} · style {style} · difficulty {diff} · generator {gen}")
        print(f"  question: {question}")
        for label, value in (("evidence", evidence), ("sql", sql), ("hidden knowledge", hk), ("feedback", fb)):
            if value:
                print(f"  {label}: {value}")
        stage_views = sorted(v for v in views if v.startswith("s") and v[1:3].isdigit())
        print("\nstage decisions:")
        last_passed = True
        for view in stage_views:
            row = con.execute(f'SELECT passed, applies, reason FROM "{view}" WHERE candidate_id = ?', [cid]).fetchall()
            if not row:
                print(
                    f"  {view:<32} (did not enter: rejected earlier)" if not last_passed else f"  {view:<32} (not run)"
                )
                continue
            passed, applies, reason = row[0]
            status = "PASS" if passed else "REJECT"
            if not applies:
                status = "n/a"
            print(f"  {view:<32} {status:<7} {reason}")
            last_passed = passed
        if "council_votes" in views:
            has_calls = "llm_calls" in views
            join = "LEFT JOIN llm_calls c ON c.call_id = v.llm_call_id" if has_calls else ""
            cols = "c.request_json, c.raw_response" if has_calls else "NULL, NULL"
            votes = con.execute(
                f"SELECT v.stage, v.member, v.comparison, v.vote, v.parsed_ok, v.llm_call_id, {cols} "
                f"FROM council_votes v {join} WHERE v.candidate_id = ? ORDER BY v.stage, v.seq",
                [cid],
            ).fetchall()
            print(f"\ncouncil votes ({len(votes)}):")
            for stage, member, comparison, vote, parsed_ok, call_id, request, raw in votes:
                cmp = f" [{comparison}]" if comparison else ""
                print(
                    f"  {stage:<30} {member:<14}{cmp} → {vote}{'' if parsed_ok else ' (unparseable)'}  call {call_id}"
                )
                print_logged_call(request, raw, width=args.width, prompts=args.prompts)
        return 0
    finally:
        con.close()


def _find_episode(prefix: str):
    import polars as pl

    from pipelines.ambitab.record import CORPORA
    from storage.stores import artifact_store, latest_frame

    store = artifact_store()
    hits = []
    for corpus in CORPORA:
        df = latest_frame("ambitab_episodes", corpus, store)
        if df is None:
            continue
        df = df.filter(pl.col("episode_id").str.starts_with(prefix))
        hits += df.to_dicts()
    return hits


def audit_episode(args) -> int:
    from resources.llm.registry import call_log

    hits = _find_episode(args.id)
    if not hits:
        print(f"no episode {args.id!r} (materialize ambitab_episodes first: `quandary ambitab eval`)", file=sys.stderr)
        return 1
    if len(hits) > 1:
        print(f"{args.id!r} matches {len(hits)} episodes: give more of the id", file=sys.stderr)
        return 1
    ep = hits[0]
    log = call_log()
    w = args.width

    def call(call_id: str | None, label: str):
        if not call_id:
            return
        rec = log.get(call_id)
        if rec is None:
            print(f"      {label} call {call_id[:16]}: not in the call log")
            return
        print(f"      {label} call {call_id[:16]} · {rec.member} · {rec.status}")
        print_logged_call(
            json.dumps(rec.request or {}),
            rec.raw_response or rec.error or "",
            width=w,
            prompts=args.prompts,
            indent="        ",
        )

    donor = f" · spec donor {ep['spec_donor']}" if ep["spec_donor"] else ""
    print(
        f"episode {ep['episode_id']}  ({ep['corpus']}, record {ep['record_id']}, AVT {ep['avt_id']}, seed {ep['seed']})"
    )
    print(
        f"  asker {ep['asker']}{' / ' + ep['prompt'] if ep['prompt'] else ''} · oracle {ep['oracle']} · "
        f"solver {ep['solver']}{donor}"
    )
    print(
        f"  |Amb| {ep['n_amb']} · questions {ep['n_questions']} · credited {ep['credited']}"
        + (" · clarification skipped (|Amb| = 0)" if ep["skipped_clarification"] else "")
    )

    def fmt(v):
        return "–" if v is None else f"{v:.2f}"

    print(f"  recall {fmt(ep['recall'])} · precision {fmt(ep['precision'])} · F1 {fmt(ep['f1'])}")
    for t in json.loads(ep["turns_json"]):
        credit = ",".join(t["credited"]) or "∅"
        mark = "new" if t["new_credit"] else ("repeat" if t["credited"] else "none")
        print(f"\n  turn {t['turn']}: Q: {t['question'][:w]}")
        print(
            f"    credit {credit} ({mark}; {t['match_reason']})"
            + (f" · action {t['action']}" if t.get("action") else "")
        )
        print(f"    A: {' '.join(str(t['response']).split())[:w]}" + ("  [refusal]" if t["refused"] else ""))
        call(t.get("asker_call_id"), "asker")
        for cid in t.get("oracle_call_ids") or []:
            call(cid, "oracle")
    if ep["fallback_stop"]:
        print(f"\n  fallback stop: {ep['fallback_reason']}")
    for cid in ep["asker_call_ids"] or []:
        if not any(cid == t.get("asker_call_id") for t in json.loads(ep["turns_json"])):
            call(cid, "asker (stop)")
    print(f"\n  SQL: {ep['sql'] or '(none)'}")
    call(ep["solver_call_id"], "solver")
    verdict = {1: "PASS", 0: "FAIL", None: "NOT VERIFIED"}[ep["verdict"]]
    print(f"  verdict: {verdict} — {ep['verdict_reason']}")
    return 0


def vote_outcome(value, vote: dict) -> str:
    """``→ value``, or for a vote that has none, why (the call's status and error)."""
    if value is not None:
        return f"→ {value}"
    status = vote.get("status") or ("parse_failed" if vote.get("parsed_ok") is False else "no vote")
    return f"→ no vote ({status}{': ' + vote['error'] if vote.get('error') else ''})"


def audit_conversation(args) -> int:
    from storage.audit import list_views, open_audit

    con = open_audit()
    try:
        if "interaction_conversations" not in list_views(con):
            print("no conversations materialized yet; run `quandary interact` first", file=sys.stderr)
            return 1
        ids = [
            r[0]
            for r in con.execute(
                "SELECT DISTINCT conversation_id FROM interaction_conversations WHERE conversation_id LIKE ?",
                [args.id + "%"],
            ).fetchall()
        ]
        if len(ids) != 1:
            print(
                f"no conversation {args.id!r}" if not ids else f"{args.id!r} is ambiguous: give more of the id",
                file=sys.stderr,
            )
            return 1
        turns = query_frame(
            con, "SELECT * FROM interaction_conversations WHERE conversation_id = ? ORDER BY step", [ids[0]]
        ).to_dicts()
        has_calls = "llm_calls" in list_views(con)

        def call(call_id):
            if not has_calls or not call_id:
                return None, None
            r = con.execute("SELECT request_json, raw_response FROM llm_calls WHERE call_id = ?", [call_id]).fetchall()
            return r[0] if r else (None, None)

        def show(call_id, indent="      "):
            req, raw = call(call_id)
            print_logged_call(req, raw, width=args.width, prompts=args.prompts, indent=indent)

        t0 = turns[0]
        q = (
            con.execute(
                "SELECT question, evidence, sql, hidden_knowledge, feedback, subcategory FROM interaction_subset "
                "WHERE question_id = ? LIMIT 1",
                [t0["question_id"]],
            ).fetchall()
            if "interaction_subset" in list_views(con)
            else []
        )
        print(f"conversation {ids[0]}  agent {t0['agent']} · mode {t0['mode']} · db {t0['db_id']} · ends {t0['end']}")
        if q:
            question, evidence, sql, hk, fb, sub = q[0]
            print(f"  question ({sub}): {question}")
            for label, v in (("evidence", evidence), ("gold sql", sql), ("hidden knowledge", hk), ("feedback", fb)):
                if v:
                    print(f"  {label}: {v}")
        if t0["mode"] == "predicted":
            print(
                f"  classification: {t0['predicted_subcategory']} ({t0['classification_status']})  "
                f"call {t0['classification_call_id']}"
            )
            show(t0["classification_call_id"], "    ")
        for t in turns:
            kind = (
                "question"
                if t["system_question"]
                else "sql"
                if t["system_sql"]
                else "feedback"
                if t["system_feedback"]
                else "no answer"
            )
            print(
                f"\nturn {t['step'] + 1} system [{kind}, {t['system_status']}]: {t['system_question'] or t['system_sql'] or t['system_feedback'] or ''}"
                f"  call {t['system_call_id']}"
            )
            show(t["system_call_id"])
            if t["relevance"] is None and t.get("user_status") != "failed":
                continue
            sc = " (short-circuit, no LLM call)" if t["short_circuit"] else ""
            if t.get("user_status") == "failed":
                print(f"  user turn NOT PRODUCED (not scored; a rerun retries the failed calls): {t.get('user_error')}")
            else:
                print(f"  user [{t['relevance']}]{sc}: {t['user_response']}")
            if t.get("invalid_node_ids"):
                print(f"    stage-1 node ids not in the query (dropped): {t['invalid_node_ids']}")
            for v in t["label_votes"] or []:
                print(
                    f"    label vote {v['member']:<14} {vote_outcome(v['label'], v)} nodes {v['node_ids']}  "
                    f"call {v['llm_call_id']}"
                )
                show(v["llm_call_id"])
            if t["fragments"]:
                print(f"    technical fragments: {t['fragments']}")
            for c in t["candidates"] or []:
                print(f"    candidate  {c['member']:<14} {vote_outcome(c['answer'], c)}  call {c['llm_call_id']}")
                show(c["llm_call_id"])
            for j in t["tournament"] or []:
                print(
                    f"    judge      {j['judge']:<14} {j['candidate_a']} vs {j['candidate_b']} "
                    f"{vote_outcome(j['winner'], j)}  "
                    f"call {j['llm_call_id']}"
                )
        if "interaction_scores" in list_views(con):
            s = con.execute(
                "SELECT recognition, classification, solved, ex_reason, explained, fb_reason, fb_votes "
                "FROM interaction_scores WHERE conversation_id = ?",
                [ids[0]],
            ).fetchall()
            if s:
                rec, cls, solved, exr, expl, fbr, fbv = s[0]
                print(f"\nscores: recognition {rec} · classification {cls} · EX {solved} ({exr}) · FB {expl} ({fbr})")
                for v in fbv or []:
                    print(f"    feedback vote {v['member']} {vote_outcome(v['vote'], v)}  call {v['llm_call_id']}")
                    show(v["llm_call_id"])
        return 0
    finally:
        con.close()


def register_audit(audit_subparsers) -> None:
    c = audit_subparsers.add_parser("conversation", help="one dialogue with every vote and the prompt behind it")
    c.add_argument("id", help="conversation id (a unique prefix is enough)")
    c.add_argument("--prompts", action="store_true", help="also print the prompt behind each call")
    c.add_argument("--width", type=int, default=None, help="cut each prompt message and answer to this many characters")
    c.set_defaults(func=audit_conversation)
