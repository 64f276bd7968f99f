"""Leakage diagnostics on dialogues (issue 22; a row no anchor has): how much the simulated user
reveals beyond what a real user would say, after the idea of AmbiTab's ΔJresp / ΔRecnone.

Per user answer (every candidate answer a council member wrote, for a user turn that was produced
by the council — short-circuits and failed turns are not answers):

* ``leak_value`` — the answer contains a **gold-only value**: a literal of the gold SQL (a string
  of ≥ 2 characters or a number of ≥ 2 digits, compared case-insensitively as a whole token) that
  the question and evidence do not contain. The user holds the intent, not the query, so a value
  only the query has is a hint about the query;
* ``leak_hidden`` — the answer contains the hidden knowledge **verbatim** (case and whitespace
  folded, final punctuation dropped): parroting instead of answering;
* ``leak`` — either.

Rates are reported **per member** (all candidate answers the member wrote) and **per label** (the
answers the system actually received, i.e. the selected ones), plus ``all`` (selected answers),
each with a 95% percentile bootstrap interval that resamples questions (an ambiguous question's
readings, and every turn about it, move together) — the cluster bootstrap of
:mod:`pipelines.core.stats`, shared with AmbiTab. It is a diagnostic, not a defect count: under the
Relevant label revealing the intended reading is the point (a gold-only value is often exactly
that), while under Technical and Irrelevant any leak is a simulator fault.
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp

from pipelines.core.stats import DEFAULT_RESAMPLES, cluster_bootstrap

FLAGS = ("leak", "leak_value", "leak_hidden")


def _norm(text: str | None) -> str:
    return " ".join((text or "").lower().split()).rstrip(" .!?;:")


def gold_only_values(sql: str | None, question: str | None, evidence: str | None) -> list[str]:
    """The gold SQL's literals that the question and evidence do not mention (lower-cased, sorted)."""
    if not sql:
        return []

    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except Exception:  # noqa: BLE001 - an unparseable gold has no values to leak
        return []
    if tree is None:
        return []
    said = _norm(f"{question or ''} {evidence or ''}")
    out = set()
    for lit in tree.find_all(exp.Literal):
        v = str(lit.this).strip().lower()
        long_enough = len(v) >= 2 if lit.is_string else len(v.lstrip("-").replace(".", "")) >= 2
        if v and long_enough and not contains_value(said, v):
            out.add(v)
    return sorted(out)


def contains_value(text: str, value: str) -> bool:
    """``value`` occurs in ``text`` as a whole token (both lower-cased by the caller)."""
    return re.search(rf"(?<![0-9a-z]){re.escape(value)}(?![0-9a-z])", text) is not None


def answer_leaks(answer: str | None, values: list[str], hidden_knowledge: str | None) -> tuple[bool, bool]:
    """(contains a gold-only value, contains the hidden knowledge verbatim)."""
    text = _norm(answer)
    hidden = _norm(hidden_knowledge)
    return any(contains_value(text, v) for v in values), bool(hidden) and hidden in text


def observations(turns: list[dict], questions: dict[str, dict]) -> list[dict]:
    """One row per candidate answer of every produced user turn (turn rows of the conversations table)."""
    out = []
    for t in turns:
        if t.get("user_status") != "ok" or not t.get("candidates"):
            continue
        q = questions.get(t["question_id"])
        if q is None:
            continue
        values = gold_only_values(q.get("sql"), q.get("question"), q.get("evidence"))
        cluster = f"{q.get('db_id')}\x1f{q.get('question')}"
        for c in t["candidates"]:
            if not c.get("answer"):
                continue
            lv, lh = answer_leaks(c["answer"], values, q.get("hidden_knowledge"))
            out.append(
                {
                    "cluster": cluster,
                    "member": c["member"],
                    "label": t["relevance"],
                    "selected": c["member"] == t.get("winner_member") and c["answer"] == t.get("user_response"),
                    "leak_value": lv,
                    "leak_hidden": lh,
                    "leak": lv or lh,
                }
            )
    return out


def leakage_rows(obs: list[dict], n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> list[dict]:
    """Metric rows (table ``leakage``): per member, per label and overall, each flag as a rate with
    its bootstrap interval (``low`` / ``high``); an empty slice has no row."""
    slices = [("all", [o for o in obs if o["selected"]])]
    slices += [(f"member={m}", [o for o in obs if o["member"] == m]) for m in sorted({o["member"] for o in obs})]
    slices += [
        (f"label={lab}", [o for o in obs if o["selected"] and o["label"] == lab])
        for lab in ("Relevant", "Technical", "Irrelevant")
    ]
    rows = []
    for name, sel in slices:
        if not sel:
            continue
        for flag in FLAGS:
            ci = cluster_bootstrap(
                [o["cluster"] for o in sel], [float(o[flag]) for o in sel], n_resamples=n_resamples, seed=seed
            )
            k = sum(1 for o in sel if o[flag])
            rows.append(
                {
                    "table": "leakage",
                    "agent": "all",
                    "mode": "all",
                    "subcategory": None,
                    "metric": f"{flag}_pct",
                    "slice": name,
                    "value": k / len(sel),
                    "numerator": k,
                    "denominator": len(sel),
                    "low": ci.low,
                    "high": ci.high,
                }
            )
    return rows


def leakage_lines(rows: list[dict]) -> list[str]:
    leak = [r for r in rows if r["table"] == "leakage"]
    if not leak:
        return []
    out = [f"{'answers':<22} {'n':>5} {'any leak':>22} {'gold-only value':>22} {'hidden verbatim':>22}"]

    def cell(r):
        if r is None or r["value"] is None:
            return "–"
        lo, hi = r.get("low"), r.get("high")
        ci = f" [{100 * lo:.0f}, {100 * hi:.0f}]" if lo is not None and hi is not None else ""
        return f"{100 * r['value']:.1f}{ci}"

    for name in dict.fromkeys(r["slice"] for r in leak):
        got = {r["metric"]: r for r in leak if r["slice"] == name}
        n = got["leak_pct"]["denominator"]
        out.append(f"{name:<22} {n:>5} " + " ".join(f"{cell(got.get(f'{f}_pct')):>22}" for f in FLAGS))
    return out
