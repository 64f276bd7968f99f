"""Scores per conversation and the paper's tables (ABISS §5.3, §6, Appendix D).

Per conversation (reference evaluators, ``None`` = not counted):

* ``recognition`` (predicted mode only): the predicted group (answerable / ambiguous /
  unanswerable) equals the gold group; ``classification``: the predicted subcategory equals the
  gold one. A failed classification counts as wrong for both; an agent without a classification
  phase has neither.
* ``solved`` (EX): no SQL on an unanswerable question → None; no SQL on an answerable or ambiguous
  question (feedback, give-up) → False; SQL on an unanswerable question → False; otherwise the
  relaxed equivalence of :mod:`pipelines.sqltools.equivalence` (a failing query → False).
* ``explained`` (FB): feedback on an answerable / ambiguous question → False, none → None; an
  unanswerable question without feedback → False; otherwise a strict-majority council vote against
  the expected feedback (a tie rejects).

A rate is ``#True / (#True + #False)``, so the denominators are exactly the paper's: EX over all
answerable + ambiguous conversations plus unanswerable ones that produced SQL; FB over all
unanswerable conversations plus answerable / ambiguous ones that produced feedback.

Dialogue statistics (ambiguous conversations only): Avg.Turns = mean number of system turns;
Clar.% = share of conversations with at least one clarification question; Rel./Tech./Irrel. =
shares of the labelled user turns, pooled over turns. **AIR** (answer incorporation rate) =
#cases whose next system turn is terminal / #cases, where a *case* is every user turn labelled
Relevant in an ambiguous conversation (it is always followed by a system turn); terminal = that
turn gives SQL or feedback (an empty or failed answer is not terminal). A Relevant answer to the
third clarification is terminal by construction (the final turn allows no question).

Across agents, Table 5 / Table 6 average the per-agent rates (macro, as the paper's "averaged
across models"); ``pooled`` rows give the micro average of the reference analysis script.
"""

from __future__ import annotations

from collections import defaultdict

from pipelines.interaction.modes import LABELS as MODE_LABELS
from pipelines.interaction.modes import MODES
from pipelines.taxonomy import SUBCATEGORIES, SUBCATEGORY_BY_ID, Group, subcategory


# ----------------------------------------------------------------------------- per conversation


def recognition(gold_sub: str, predicted_sub: str | None) -> bool:
    return predicted_sub is not None and subcategory(predicted_sub).group is subcategory(gold_sub).group


def ex_outcome(gold_sub: str, pred_sql: str | None) -> str:
    """'skip' (not counted), 'false' (a failure without executing), or 'compare'."""
    solvable = subcategory(gold_sub).solvable
    if pred_sql is None:
        return "false" if solvable else "skip"
    return "compare" if solvable else "false"


def fb_outcome(gold_sub: str, pred_feedback: str | None) -> str:
    solvable = subcategory(gold_sub).solvable
    if solvable:
        return "false" if pred_feedback is not None else "skip"
    return "false" if pred_feedback is None else "judge"


def score_conversation(conv: dict, q: dict, db_path: str, feedback_judge=None, order_sensitive: bool = False,
                       schema_context: str = "", timeout_s: float = 3.0) -> dict:
    from pipelines.sqltools.equivalence import sql_equivalent

    gold = q["subcategory"]
    out = {k: conv[k] for k in ("conversation_id", "question_id", "db_id", "agent", "mode", "end", "n_turns",
                                "predicted_subcategory", "predicted_sql", "predicted_feedback")}
    out.update(subcategory=gold, group=subcategory(gold).group.value, style=q.get("style"),
               difficulty=q.get("difficulty"))
    predicted_mode = conv["mode"] == "predicted"
    out["recognition"] = recognition(gold, conv["predicted_subcategory"]) if predicted_mode else None
    out["classification"] = (conv["predicted_subcategory"] == gold) if predicted_mode else None
    ex = ex_outcome(gold, conv["predicted_sql"])
    if ex == "skip":
        out["solved"], out["ex_reason"] = None, "no SQL on an unanswerable question"
    elif ex == "false":
        out["solved"] = False
        out["ex_reason"] = ("SQL on an unanswerable question" if conv["predicted_sql"] else f"no SQL ({conv['end']})")
    else:
        v = sql_equivalent(db_path, q["sql"], conv["predicted_sql"], order_sensitive=order_sensitive,
                           timeout_s=timeout_s)
        out["solved"], out["ex_reason"] = bool(v.equivalent), v.reason
    fb = fb_outcome(gold, conv["predicted_feedback"])
    out["fb_votes"] = []
    if fb == "skip":
        out["explained"], out["fb_reason"] = None, "no feedback on a solvable question"
    elif fb == "false":
        out["explained"] = False
        out["fb_reason"] = "feedback on a solvable question" if conv["predicted_feedback"] else f"no feedback ({conv['end']})"
    elif feedback_judge is None:
        out["explained"], out["fb_reason"] = None, "no feedback judge configured"
    else:
        decision, votes = feedback_judge(q, conv["predicted_feedback"])
        out["explained"], out["fb_votes"] = bool(decision), votes
        out["fb_reason"] = f"council: {sum(v['vote'] == 'Yes' for v in votes)} yes of {len(votes)}"
    turns = conv["turns"]
    out["n_clarifications"] = sum(1 for t in turns if t["system_question"])
    labels = [t["relevance"] for t in turns if t["relevance"] is not None]
    for lab in ("Relevant", "Technical", "Irrelevant"):
        out[f"n_{lab.lower()}"] = labels.count(lab)
    cases = terminal = 0
    for i, t in enumerate(turns[:-1]):
        if t["relevance"] == "Relevant":
            cases += 1
            terminal += bool(turns[i + 1]["system_sql"] or turns[i + 1]["system_feedback"])
    out["air_cases"], out["air_terminal"] = cases, terminal
    return out


def council_feedback_judge(council, schema_context: str):
    """A ``feedback_judge`` backed by a council: strict majority, tie rejects, abstentions are not yes."""
    from pipelines.interaction import prompts

    def judge(q: dict, feedback: str):
        outcome = council.vote(prompts.feedback_messages(schema_context, q, feedback), prompts.FeedbackMatch,
                               extract=lambda p: p.matches, rule="strict_majority",
                               tag=dict(stage="interaction_feedback", candidate_id=q["question_id"]))
        votes = [{"member": v.member, "vote": None if v.vote is None else ("Yes" if v.vote else "No"),
                  "parsed_ok": v.parsed_ok, "llm_call_id": v.call_id} for v in outcome.votes]
        return outcome.decision, votes

    return judge


# ----------------------------------------------------------------------------- aggregates


def rate(values) -> tuple[float | None, int, int]:
    vals = [v for v in values if v is not None]
    n = len(vals)
    k = sum(1 for v in vals if v)
    return (k / n if n else None), k, n


def _row(table, agent, mode, sub, metric, values) -> dict:
    value, k, n = rate(values)
    return {"table": table, "agent": agent, "mode": mode, "subcategory": sub, "metric": metric, "value": value,
            "numerator": k, "denominator": n}


def _mean_row(table, agent, mode, sub, metric, value, k, n) -> dict:
    return {"table": table, "agent": agent, "mode": mode, "subcategory": sub, "metric": metric, "value": value,
            "numerator": k, "denominator": n}


def _dialogue_rows(table, agent, mode, convs: list[dict]) -> list[dict]:
    amb = [c for c in convs if c["group"] == Group.AMBIGUOUS.value]
    rows = []
    n = len(amb)
    turns = sum(c["n_turns"] for c in amb)
    rows.append(_mean_row(table, agent, mode, None, "avg_turns", turns / n if n else None, turns, n))
    rows.append(_row(table, agent, mode, None, "clar_pct", [c["n_clarifications"] > 0 for c in amb]))
    labelled = sum(c["n_relevant"] + c["n_technical"] + c["n_irrelevant"] for c in amb)
    for lab in ("relevant", "technical", "irrelevant"):
        k = sum(c[f"n_{lab}"] for c in amb)
        rows.append(_mean_row(table, agent, mode, None, f"{lab}_pct", k / labelled if labelled else None, k, labelled))
    cases = sum(c["air_cases"] for c in amb)
    term = sum(c["air_terminal"] for c in amb)
    rows.append(_mean_row(table, agent, mode, None, "air", term / cases if cases else None, term, cases))
    return rows


def metric_rows(scores: list[dict]) -> list[dict]:
    """The long metrics table: one row per (table, agent, mode, subcategory, metric)."""
    by = defaultdict(list)
    for s in scores:
        by[(s["agent"], s["mode"])].append(s)
    agents = sorted({s["agent"] for s in scores})
    rows = []
    for agent in agents:
        pred = by.get((agent, "predicted"), [])
        rows.append(_row("table4", agent, "predicted", None, "rec", [s["recognition"] for s in pred]))
        rows.append(_row("table4", agent, "predicted", None, "cls", [s["classification"] for s in pred]))
        for mode in MODES:
            convs = by.get((agent, mode), [])
            if not convs:
                continue
            rows.append(_row("table4", agent, mode, None, "ex", [s["solved"] for s in convs]))
            rows.append(_row("table4", agent, mode, None, "fb", [s["explained"] for s in convs]))
            rows.append(_row("table5", agent, mode, None, "ans_ex",
                             [s["solved"] for s in convs if s["group"] == "answerable"]))
            rows.append(_row("table5", agent, mode, None, "amb_ex",
                             [s["solved"] for s in convs if s["group"] == "ambiguous"]))
            rows.append(_row("table5", agent, mode, None, "fb", [s["explained"] for s in convs]))
            rows += _dialogue_rows("table6", agent, mode, convs)
            for sub in SUBCATEGORIES:
                sc = [s for s in convs if s["subcategory"] == sub.id]
                if sc:
                    metric = "ex" if sub.solvable else "fb"
                    rows.append(_row("figure2", agent, mode, sub.id, metric,
                                     [s["solved"] if sub.solvable else s["explained"] for s in sc]))
        rows += _dialogue_rows("appendix_d", agent, "all", [s for s in scores if s["agent"] == agent])
    # across agents: macro average of the per-agent rates, and the pooled (micro) rate
    for table, metrics in (("table5", ("ans_ex", "amb_ex", "fb")),
                           ("table6", ("avg_turns", "clar_pct", "relevant_pct", "technical_pct", "irrelevant_pct", "air"))):
        for mode in MODES:
            for metric in metrics:
                per = [r for r in rows if r["table"] == table and r["mode"] == mode and r["metric"] == metric]
                vals = [r["value"] for r in per if r["value"] is not None]
                k, n = sum(r["numerator"] for r in per), sum(r["denominator"] for r in per)
                if per:
                    rows.append(_mean_row(table, "mean", mode, None, metric, sum(vals) / len(vals) if vals else None, k, n))
                    pooled = (k / n if n else None) if metric != "avg_turns" else (k / n if n else None)
                    rows.append(_mean_row(table, "pooled", mode, None, metric, pooled, k, n))
    return rows


# ----------------------------------------------------------------------------- rendering


def _pct(v) -> str:
    return "  –  " if v is None else f"{100 * v:5.1f}"


def _get(rows, table, agent, mode, metric, sub=None):
    for r in rows:
        if (r["table"], r["agent"], r["mode"], r["metric"], r["subcategory"]) == (table, agent, mode, metric, sub):
            return r["value"]
    return None


def table4_lines(rows: list[dict]) -> list[str]:
    agents = sorted({r["agent"] for r in rows if r["table"] == "table4"})
    out = [f"{'agent':<24} {'Rec.':>6} {'Cls.':>6} {'EX (GT)':>15} {'FB (GT)':>15}"]
    for a in agents:
        ex = f"{_pct(_get(rows, 'table4', a, 'predicted', 'ex'))} ({_pct(_get(rows, 'table4', a, 'ground_truth', 'ex')).strip()})"
        fb = f"{_pct(_get(rows, 'table4', a, 'predicted', 'fb'))} ({_pct(_get(rows, 'table4', a, 'ground_truth', 'fb')).strip()})"
        out.append(f"{a:<24} {_pct(_get(rows, 'table4', a, 'predicted', 'rec')):>6} "
                   f"{_pct(_get(rows, 'table4', a, 'predicted', 'cls')):>6} {ex:>15} {fb:>15}")
    return out


def table5_lines(rows: list[dict], agent: str = "mean") -> list[str]:
    out = [f"{'mode':<16} {'Ans. EX':>8} {'Amb. EX':>8} {'FB':>8}"]
    for mode in MODES:
        if _get(rows, "table5", agent, mode, "fb") is None and _get(rows, "table5", agent, mode, "ans_ex") is None \
                and _get(rows, "table5", agent, mode, "amb_ex") is None:
            continue
        out.append(f"{MODE_LABELS[mode]:<16} {_pct(_get(rows, 'table5', agent, mode, 'ans_ex')):>8} "
                   f"{_pct(_get(rows, 'table5', agent, mode, 'amb_ex')):>8} {_pct(_get(rows, 'table5', agent, mode, 'fb')):>8}")
    return out


def _dialogue_line(label, rows, table, agent, mode) -> str:
    turns = _get(rows, table, agent, mode, "avg_turns")
    vals = [_pct(_get(rows, table, agent, mode, m)) for m in ("clar_pct", "relevant_pct", "technical_pct",
                                                               "irrelevant_pct", "air")]
    return f"{label:<24} {('–' if turns is None else f'{turns:.2f}'):>9} " + " ".join(f"{v:>7}" for v in vals)


DIALOGUE_HEADER = f"{'':<24} {'Avg.Turns':>9} {'Clar.%':>7} {'Rel.':>7} {'Tech.':>7} {'Irrel.':>7} {'AIR':>7}"


def table6_lines(rows: list[dict], agent: str = "mean") -> list[str]:
    return [DIALOGUE_HEADER.replace(" " * 24, f"{'mode':<24}", 1)] + [
        _dialogue_line(MODE_LABELS[m], rows, "table6", agent, m) for m in MODES
        if any(r["table"] == "table6" and r["mode"] == m for r in rows)]


def appendix_d_lines(rows: list[dict]) -> list[str]:
    agents = sorted({r["agent"] for r in rows if r["table"] == "appendix_d"})
    return [DIALOGUE_HEADER.replace(" " * 24, f"{'agent (all modes)':<24}", 1)] + [
        _dialogue_line(a, rows, "appendix_d", a, "all") for a in agents]


def report_text(rows: list[dict]) -> str:
    parts = ["Table 4 — per agent: predicted mode (ground truth in parentheses), %", *table4_lines(rows), "",
             "Table 5 — per mode, mean over agents, %", *table5_lines(rows), "",
             "Table 6 — dialogue statistics on ambiguous questions, mean over agents", *table6_lines(rows), "",
             "Appendix D — dialogue statistics per agent", *appendix_d_lines(rows)]
    return "\n".join(parts)


def figure2_png(rows: list[dict], path) -> object:
    """Per-subcategory EX (solvable) / FB (unanswerable) by mode, pooled over agents, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig2 = [r for r in rows if r["table"] == "figure2"]
    subs = [s.id for s in SUBCATEGORIES if any(r["subcategory"] == s.id for r in fig2)]
    modes = [m for m in MODES if any(r["mode"] == m for r in fig2)]
    fig, ax = plt.subplots(figsize=(9, 0.45 * max(1, len(subs)) + 1.5))
    height = 0.8 / max(1, len(modes))
    for j, mode in enumerate(modes):
        vals = []
        for s in subs:
            rs = [r for r in fig2 if r["subcategory"] == s and r["mode"] == mode]
            k, n = sum(r["numerator"] for r in rs), sum(r["denominator"] for r in rs)
            vals.append(100 * k / n if n else 0.0)
        ax.barh([i + j * height for i in range(len(subs))], vals, height=height, label=MODE_LABELS[mode])
    ax.set_yticks([i + 0.4 - height / 2 for i in range(len(subs))])
    ax.set_yticklabels([f"{SUBCATEGORY_BY_ID[s].name} ({'EX' if SUBCATEGORY_BY_ID[s].solvable else 'FB'})"
                        for s in subs], fontsize=8)
    ax.set_xlim(0, 100)
    ax.set_xlabel("%")
    ax.set_title("Per-subcategory EX / FB by category usage mode")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
