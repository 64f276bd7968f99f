"""Deterministic diffs between executions (spec §4.3): evidence for the judge, and EX itself.

* :func:`result_diff` — full (Q_g vs Q_c) and relational (S_g vs S_c): set and multiset equality,
  row counts, symmetric-difference size, containment either way. Order is ignored unless the gold
  query has a top-level ORDER BY; floats are rounded to 1e-6; column names are ignored.
* :func:`probe_agreement` — per aligned AI call: both calls evaluated on the *same* bounded probe
  set, the union of rows reaching the operator in S_g and S_c, capped at N by a seeded hash order.
  Boolean operators report positives, overlap, Jaccard and agreement; value operators MAE or the
  exact-match rate.

Cells, row modes and the ORDER BY rule are the one result comparison every job shares
(:mod:`pipelines.sqltools.results`) with this job's documented tolerance: floats rounded to 6
decimals (:data:`~pipelines.sqltools.results.AISQL_DECIMALS`), no significant-digit rounding. From
that module this job also gets its handling of NaN (matches NaN), Decimal, bytes and unhashable
cells, where the copy it replaced never matched NaN and failed on unhashable cells; and its
ORDER BY rule looks through parentheses around the whole query, as the cascade's always did.
"""

from sqlglot import exp

from pipelines.aisql.execute import run_duckdb_sql
from pipelines.aisql.rewrite import AI_OPERATORS, ai_calls, operator_name, to_duckdb_tree
from pipelines.aisql.splitter import AIPart, placeholder
from pipelines.sqltools.results import AISQL_DECIMALS, normalize_rows, tree_has_top_level_order_by
from pipelines.sqltools.results import rows_match as compare_rows

PROBE_N = 100
# EX compares unordered results as bags of rows (duplicates count): dropping a DISTINCT is a difference.
EX_UNORDERED_MODE = "bag"


def norm_rows(rows) -> list[tuple]:
    return normalize_rows(rows, significant_digits=None, decimals=AISQL_DECIMALS)


def result_diff(a, b, ordered: bool = False) -> dict:
    """Compare two RunRecords (a = gold side)."""
    if not (a.ok and b.ok):
        return {"comparable": False, "gold_status": a.status, "candidate_status": b.status}
    ra, rb = norm_rows(a.rows), norm_rows(b.rows)
    sa, sb = set(ra), set(rb)
    return {
        "comparable": True,
        "ordered": ordered,
        "set_equal": compare_rows(ra, rb, "set"),
        "multiset_equal": compare_rows(ra, rb, "bag"),
        "ordered_equal": compare_rows(ra, rb, "ordered"),
        "gold_rows": len(ra),
        "candidate_rows": len(rb),
        "sym_diff": len(sa ^ sb),
        "gold_subset_of_candidate": sa <= sb,
        "candidate_subset_of_gold": sb <= sa,
        "same_width": (len(ra[0]) if ra else None) == (len(rb[0]) if rb else None) or not ra or not rb,
    }


def has_top_level_order(sql_duckdb: str) -> bool:
    try:
        tree = to_duckdb_tree(sql_duckdb, "thalamusdb")
    except Exception:  # noqa: BLE001 - unparsable: treat as unordered
        return False
    return tree_has_top_level_order_by(tree)


EX_RULE = (
    "EX: accept iff both queries run and their results are equal as bags of rows (duplicates count; "
    "column names ignored; floats rounded to 1e-6); in order when the gold query has a top-level ORDER BY"
)


def rows_match(gold_rows, cand_rows, ordered: bool = False) -> bool:
    """The one result-equality rule (bag semantics): equal as multisets of normalised row tuples,
    and as sequences when ``ordered`` (the gold has a top-level ORDER BY). Dropping a DISTINCT over
    duplicate rows (66 vs 132 rows) is a difference; so is the same rows in another order under
    ORDER BY. Ties under ORDER BY are not special-cased (``threads=1`` keeps runs reproducible)."""
    return compare_rows(norm_rows(gold_rows), norm_rows(cand_rows), "ordered" if ordered else EX_UNORDERED_MODE)


def differing_rows(gold_rows, cand_rows, ordered: bool = False, limit: int = 5) -> dict:
    """The rows that tell two results apart (#39 item 1: a witness shows what differs, not the first
    rows, which are often the same on both sides): each side's rows the other lacks, counted as bags;
    under ORDER BY, the first position where the sequences part."""
    from collections import Counter

    ga, cb = norm_rows(gold_rows), norm_rows(cand_rows)
    out: dict = {"gold_rows": len(ga), "candidate_rows": len(cb)}
    if ordered and Counter(ga) == Counter(cb):
        i = next((i for i, (x, y) in enumerate(zip(ga, cb)) if x != y), min(len(ga), len(cb)))
        out.update(first_difference_at=i, gold_from_there=[list(map(str, r)) for r in ga[i : i + limit]])
        out["candidate_from_there"] = [list(map(str, r)) for r in cb[i : i + limit]]
        return out
    only_g, only_c = Counter(ga) - Counter(cb), Counter(cb) - Counter(ga)
    out["only_in_gold"] = [
        [*map(str, r), f"x{n}"] if n > 1 else list(map(str, r)) for r, n in list(only_g.items())[:limit]
    ]
    out["only_in_candidate"] = [
        [*map(str, r), f"x{n}"] if n > 1 else list(map(str, r)) for r, n in list(only_c.items())[:limit]
    ]
    return out


def ex_equal(gold, cand, ordered: bool = False) -> bool:
    """Execution accuracy: both ran and :func:`rows_match` (bag semantics, ordered under a gold ORDER BY)."""
    if not (gold.ok and cand.ok):
        return False
    return rows_match(gold.rows, cand.rows, ordered)


# ----------------------------------------------------------------------------- probe set


def _call_select(tree: exp.Expression, index: int) -> tuple[exp.Anonymous, exp.Select]:
    call = ai_calls(tree)[index]  # the splitter's order (document order)
    return call, call.find_ancestor(exp.Select)


def _correlated(select: exp.Select) -> bool:
    """The SELECT reads a column of an outer query (a correlated subquery, EXISTS)."""
    own = {t.alias_or_name.lower() for t in select.find_all(exp.Table)}
    own |= {s.alias.lower() for s in select.find_all(exp.Subquery) if s.alias}
    return any(c.table and c.table.lower() not in own for c in select.find_all(exp.Column))


def _reach_from_part(part: AIPart, alias_cols: dict[str, list[str]]) -> str:
    """Rows reaching the call, from the split's AI part (#33 item 3): its own FROM (the inputs'
    tables, with the outer alias's table for a correlated call), without the call and its LIMIT."""
    sel = to_duckdb_tree(part.sql, "thalamusdb")
    for node in list(sel.walk()):
        if isinstance(node, exp.Anonymous) and operator_name(node):
            node.replace(placeholder(AI_OPERATORS[operator_name(node)]))
    sel.set("expressions", [exp.column(c, table=a) for a in part.aliases for c in alias_cols[a]])
    for k in ("group", "having", "order", "limit", "offset", "qualify", "distinct"):
        sel.set(k, None)
    return sel.sql("duckdb", copy=False)  # sel is our copy


def _reach_sql(tree: exp.Expression, part: AIPart, alias_cols: dict[str, list[str]]) -> str:
    """Rows reaching the call: its SELECT's FROM/JOIN/WHERE (AI calls → placeholders), inputs' tables
    only; for a call that reads an outer query's columns, the split's AI part."""
    _, select = _call_select(tree, part.index)
    if _correlated(select):
        return _reach_from_part(part, alias_cols)
    sel = select.copy()
    for node in list(sel.walk()):
        if isinstance(node, exp.Anonymous) and operator_name(node):
            node.replace(placeholder(AI_OPERATORS[operator_name(node)]))
    proj = [exp.column(c, table=a) for a in part.aliases for c in alias_cols[a]]
    sel.set("expressions", proj)
    for k in ("group", "having", "order", "limit", "offset", "qualify", "distinct"):
        sel.set(k, None)
    w = tree.args.get("with") or tree.args.get("with_")
    if isinstance(w, exp.With) and not (sel.args.get("with") or sel.args.get("with_")):
        sel.set("with_" if "with_" in exp.Select.arg_types else "with", w.copy())
    return sel.sql("duckdb", copy=False)  # sel is our copy


def _call_over_probe(tree: exp.Expression, part: AIPart, alias_cols: dict[str, list[str]], offsets: dict[str, int]):
    call, _ = _call_select(tree, part.index)
    c = call.copy()
    for node in list(c.walk()):
        if node is not c and isinstance(node, exp.Anonymous) and operator_name(node):
            node.replace(placeholder(AI_OPERATORS[operator_name(node)]))
    for col in list(c.find_all(exp.Column)):
        alias = col.table or (part.aliases[0] if len(part.aliases) == 1 else "")
        cols = [x.lower() for x in alias_cols.get(alias, [])]
        if alias not in offsets or col.name.lower() not in cols:
            raise KeyError(f"column {col.sql()} not in the probe")
        col.replace(exp.column(f"c{offsets[alias] + cols.index(col.name.lower())}", table="p"))
    return c


def _base_sources(part: AIPart, tree: exp.Expression) -> list[str]:
    """The part's sources, a CTE that only filters one table (``WITH picked AS (SELECT * FROM t
    WHERE …)``) read as that table: its rows are a subset of t's, with t's columns."""
    out = []
    ctes = {c.alias.lower(): c.this for c in tree.find_all(exp.CTE) if c.alias}
    for s in part.sources:
        body = ctes.get(s.lower())
        if (
            isinstance(body, exp.Select)
            and len(body.expressions) == 1
            and isinstance(body.expressions[0], exp.Star)
            and not any(body.args.get(k) for k in ("joins", "group", "having", "distinct", "laterals"))
        ):
            tables = list(body.find_all(exp.Table))
            if len(tables) == 1:
                out.append(".".join(p for p in (tables[0].db, tables[0].name) if p))
                continue
        out.append(s)
    return out


def _as_bool(v, kind: str) -> bool:
    """A call's answer as the boolean it encodes (a text answer: 'TRUE', any case and spacing)."""
    if kind == "bool":
        return bool(v)
    return str(v).strip().strip(".").upper() == "TRUE" if v is not None else False


def bool_stats(pairs) -> dict:
    """Positives of each call, their overlap and the 2x2 counts the AI layer decides on (#39 item 2):
    ``both`` / ``gold_only`` / ``candidate_only`` / ``neither`` (gold and candidate accepting)."""
    both = sum(1 for g, c in pairs if g and c)
    g_only = sum(1 for g, c in pairs if g and not c)
    c_only = sum(1 for g, c in pairs if c and not g)
    neither = len(pairs) - both - g_only - c_only
    union = both + g_only + c_only
    return {
        "positives_gold": both + g_only,
        "positives_candidate": both + c_only,
        "overlap": both,
        "jaccard": round(both / union, 4) if union else 1.0,
        "agreement": round((both + neither) / len(pairs), 4) if pairs else 1.0,
        "counts": [both, g_only, c_only, neither],
    }


def probe_agreement(
    db_path,
    runtime,
    gold_tree,
    gold_part: AIPart,
    cand_tree,
    cand_part: AIPart,
    table_columns: dict[str, list[str]],
    *,
    n: int = PROBE_N,
    seed: int = 0,
    budget=None,
    timeout_s: float = 600.0,
) -> dict:
    """Evaluate both calls on one shared probe set; returns agreement statistics (or why not)."""

    def cols_for(part, tree):
        out = {}
        for a, s in zip(part.aliases, _base_sources(part, tree)):
            cols = table_columns.get(s.lower()) or table_columns.get(s.split(".")[-1].lower())
            if cols is None:
                return None
            out[a] = cols
        return out

    gcols, ccols = cols_for(gold_part, gold_tree), cols_for(cand_part, cand_tree)
    gsig = [s.split(".")[-1].lower() for s in _base_sources(gold_part, gold_tree)]
    csig = [s.split(".")[-1].lower() for s in _base_sources(cand_part, cand_tree)]
    if gcols is None or ccols is None or gsig != csig:
        return {"comparable": False, "reason": "calls read different tables"}
    try:
        width = 0
        goff, coff = {}, {}
        for a in gold_part.aliases:
            goff[a] = width
            width += len(gcols[a])
        w2 = 0
        for a in cand_part.aliases:
            coff[a] = w2
            w2 += len(ccols[a])
        g_call = _call_over_probe(gold_tree, gold_part, gcols, goff)
        c_call = _call_over_probe(cand_tree, cand_part, ccols, coff)
        reach_g = _reach_sql(gold_tree, gold_part, gcols)
        reach_c = _reach_sql(cand_tree, cand_part, ccols)
    except (KeyError, IndexError) as exc:
        return {"comparable": False, "reason": str(exc)}
    names = ", ".join(f"c{i}" for i in range(width))
    sql = (
        f"SELECT {g_call.sql('duckdb')} AS g, {c_call.sql('duckdb')} AS c FROM ("
        f"SELECT * FROM (SELECT DISTINCT * FROM (({reach_g}) UNION ALL ({reach_c})) AS u) AS p0({names}) "
        f"ORDER BY hash({names}, {int(seed)}) LIMIT {int(n)}) AS p"
    )
    rec = run_duckdb_sql(db_path, sql, runtime, budget=budget, timeout_s=timeout_s)
    out = {
        "comparable": rec.ok,
        "probe_rows": rec.row_count,
        "status": rec.status,
        "error": rec.error,
        "calls": rec.calls,
    }
    if not rec.ok:
        return out
    pairs = rec.rows
    kind = gold_part.kind
    if kind != cand_part.kind and {kind, cand_part.kind} == {"bool", "text"}:
        # AI.GENERATE(... TRUE or FALSE).result compared with 'TRUE' is the boolean call (spec §3, §12.3)
        pairs = [(_as_bool(g, kind), _as_bool(c, cand_part.kind)) for g, c in pairs]
        out.update(bool_stats(pairs), mapped="text answers read as booleans (TRUE/FALSE)")
    elif kind == "bool" and cand_part.kind == "bool":
        out.update(bool_stats(pairs))
    elif kind == "score" and cand_part.kind == "score":
        vals = [(g, c) for g, c in pairs if g is not None and c is not None]
        out.update(mae=round(sum(abs(g - c) for g, c in vals) / len(vals), 4) if vals else None)
    else:
        out.update(exact_match=round(sum(str(g) == str(c) for g, c in pairs) / len(pairs), 4) if pairs else 1.0)
    return out
