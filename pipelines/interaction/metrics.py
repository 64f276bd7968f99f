"""Scores per conversation and the paper's tables (ABISS §5.3, §6, Appendix D).

Per conversation (reference evaluators, ``None`` = not counted):

* ``recognition`` (predicted mode only): the predicted group (answerable / ambiguous /
  unanswerable) equals the gold group; ``classification``: the predicted subcategory equals the
  gold one. A failed classification counts as wrong for both; an agent without a classification
  phase has neither.
* ``solved`` (EX): no SQL on an unanswerable question → None; no SQL on an answerable or ambiguous
  question (feedback, give-up) → False; SQL on an unanswerable question → False; otherwise the
  relaxed equivalence of :mod:`pipelines.sqltools.equivalence` (a failing prediction → False).
  **Cannot decide → None, never False** (``ex_status="undecided"``): the gold query fails (it has
  its own, larger budget, :data:`GOLD_TIMEOUT_S`, and runs once per question for every agent and
  mode: :class:`GoldResults`), or the column-mapping search gives up. Results past the executor's
  row/byte cap are read to the end without being held and compared by row count and an
  order-independent digest (:func:`pipelines.sqltools.results.large_results_match`): different
  counts → False, equal digests → True, different digests with equal counts → None (a column
  mapping cannot be searched without the rows).
* ``explained`` (FB): feedback on an answerable / ambiguous question → False, none → None; an
  unanswerable question without feedback → False; otherwise the council of ``feedback_judges``
  votes against the expected feedback, reference rule yes > no (a tie rejects) — **decided only
  when the judges that answered fix that outcome whatever the missing ones would have said**
  (:func:`fb_decision`): with 3 judges two agreeing votes; 1 yes + 2 failed judges is
  ``undecided`` (None), counted apart, never "explained".
* A conversation that ended ``user_failed`` (a user turn could not be produced) or
  ``system_failed`` (the system's endpoint gave no answer after retries: an outage, not the
  agent's answer, #38 item 3) is *incomplete*: EX and FB are None (``ex_status = fb_status =
  "incomplete"``) and it is left out of every dialogue statistic and AIR; Rec / Cls, which rest on
  the classification alone, still count — unless the classification call itself got no answer
  (then they are None too).

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

Counted apart, per agent × mode (Table 4 rows ``incomplete``, ``ex_undecided``, ``fb_undecided``,
value = share of the conversations, and a "Not counted" block in the report): these never enter a
rate's numerator or denominator.

Across agents, Table 5 / Table 6 average the per-agent rates (macro, as the paper's "averaged
across models"); ``pooled`` rows give the micro average of the reference analysis script.
"""

from __future__ import annotations

import hashlib
import textwrap
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from pipelines.abiss.taxonomy import SUBCATEGORIES, SUBCATEGORY_BY_ID, Group, subcategory
from pipelines.interaction import prompts
from pipelines.interaction.ends import INCOMPLETE_ENDS, SYSTEM_FAILED, TRANSPORT_FAILURE, USER_FAILED
from pipelines.interaction.leakage import leakage_lines
from pipelines.interaction.modes import LABELS as MODE_LABELS
from pipelines.interaction.modes import MODES
from pipelines.interaction.same_rows import same_rows_in_database
from pipelines.sqltools.equivalence import has_top_level_order_by, results_equivalent
from pipelines.sqltools.results import large_results_match
from resources.llm.votes import decide, is_decided
from resources.sql import execute_sql
from resources.sql.results import FailureKind, engine_of
from resources.sql.values import digest_rows
from storage.charts import png_chart

FEEDBACK_ROLE = "feedback_judges"

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


GOLD_TIMEOUT_S = 60.0  # gold queries are trusted and run once per question: a larger budget (#30 item 4)
# #38 item 4: load never decides EX. A prediction gets at least this many times the gold's own
# time (a correct prediction of a 14 s gold was cut at 3 s), and one cut by its deadline is run
# once more with twice the budget before it is reported undecided.
GOLD_TIME_FACTOR = 2.0
RETRY_BUDGET_FACTOR = 2.0
GOLD_DIGEST_VERSION = "1"  # bump when the digest or the value normalisation changes


@dataclass(frozen=True)
class GoldSummary:
    """A gold result as stored in the ``interaction_gold`` artifact: row count and digests, no rows.
    Looks like a digested cap-exceeding result to :func:`large_results_match`."""

    columns: list
    row_total: int
    bag_digest: str
    ordered_digest: str
    beyond_cap: bool
    elapsed_s: float = 0.0  # how long the gold took when it was executed (0 when unknown)
    ok: bool = False
    digested: bool = True


def gold_key(gold_sql: str, db_path: str) -> tuple[str, str]:
    """What defines a stored gold result: the query's hash and the database file's fingerprint."""
    st = Path(db_path).stat()
    return hashlib.sha256(gold_sql.encode()).hexdigest(), f"{st.st_size}:{st.st_mtime_ns}"


class GoldResults:
    """Each gold query executed at most once (its own budget), reused by every agent and mode that
    scores a conversation about it; with ``stored`` summaries (the ``interaction_gold`` artifact,
    one per gold per database version) a gold is not executed again at all unless a comparison
    needs its rows (the digests differ). A result past the cap is kept as its digest only."""

    def __init__(self, db_path: str, timeout_s: float = GOLD_TIMEOUT_S, stored: list[dict] | None = None):
        self.db_path, self.timeout_s = db_path, timeout_s
        self._results: dict[str, object] = {}
        self._summaries: dict[tuple[str, str], GoldSummary] = {}
        for r in stored or []:
            if r.get("digest_version") == GOLD_DIGEST_VERSION:
                self._summaries[(r["gold_sha256"], r["db_fingerprint"])] = GoldSummary(
                    [None] * r["n_columns"],
                    r["row_total"],
                    r["bag_digest"],
                    r["ordered_digest"],
                    r["beyond_cap"],
                    r.get("elapsed_s") or 0.0,
                )
        self._elapsed: dict[str, float] = {}
        self.executed = 0
        self.reused = 0

    def get(self, gold_sql: str):
        """The gold's outcome with its rows (a QueryResult when it fits), executing it once."""
        if gold_sql not in self._results:
            self.executed += 1
            start = time.perf_counter()
            self._results[gold_sql] = execute_sql(
                self.db_path, gold_sql, timeout_s=self.timeout_s, digest_beyond_cap=True
            )
            self._elapsed[gold_sql] = time.perf_counter() - start
        return self._results[gold_sql]

    def elapsed_s(self, gold_sql: str) -> float:
        """How long the gold took (this run's execution, else the stored one; 0 when unknown)."""
        if gold_sql in self._elapsed:
            return self._elapsed[gold_sql]
        try:
            s = self._summaries.get(gold_key(gold_sql, self.db_path))
        except OSError:
            return 0.0
        return s.elapsed_s if s else 0.0

    def summary(self, gold_sql: str):
        """The stored summary when there is one, else the executed outcome (then summarised)."""
        try:
            key = gold_key(gold_sql, self.db_path)
        except OSError:  # no database file: the executor says so, nothing to store
            return self.get(gold_sql)
        if key in self._summaries and gold_sql not in self._results:
            self.reused += 1
            return self._summaries[key]
        out = self.get(gold_sql)
        if out.ok or getattr(out, "digested", False):
            self._summaries[key] = _summarise(out, self._elapsed.get(gold_sql, 0.0))
        return out

    def rows(self) -> list[dict]:
        """The summaries as stored rows (``interaction_gold``), keyed by gold hash and db fingerprint."""
        return [
            {
                "gold_sha256": sha,
                "db_fingerprint": fp,
                "digest_version": GOLD_DIGEST_VERSION,
                "n_columns": len(s.columns),
                "row_total": s.row_total,
                "bag_digest": s.bag_digest,
                "ordered_digest": s.ordered_digest,
                "beyond_cap": s.beyond_cap,
                "elapsed_s": s.elapsed_s,
            }
            for (sha, fp), s in self._summaries.items()
        ]


def _summarise(out, elapsed_s: float = 0.0) -> GoldSummary:
    if out.ok:
        d = digest_rows(out.rows)
        return GoldSummary(list(out.columns), out.row_count, d.bag, d.ordered, False, elapsed_s)
    return GoldSummary(list(out.columns or []), out.row_total, out.bag_digest, out.ordered_digest, True, elapsed_s)


def execution_match(
    db_path: str,
    gold_sql: str,
    pred_sql: str,
    order_sensitive: bool = False,
    timeout_s: float = 3.0,
    golds: GoldResults | None = None,
) -> tuple[bool | None, str]:
    """EX of one prediction: True / False, or None when the comparison cannot decide (see module doc).
    The gold runs under ``golds``' budget (default :data:`GOLD_TIMEOUT_S`), the prediction under
    ``timeout_s`` or :data:`GOLD_TIME_FACTOR` times the gold's own time, whichever is longer, and once
    more with twice that when the deadline cuts it; results past the executor's cap are compared
    inside the database when identical, else by row count and digest (#38 item 4)."""

    too_big = (FailureKind.TOO_MANY_ROWS, FailureKind.TOO_LARGE)
    golds = golds or GoldResults(db_path)
    gold = golds.summary(gold_sql)
    if not gold.ok and not getattr(gold, "digested", False) and gold.kind not in too_big:
        return None, f"cannot decide: gold failed: {gold.one_line()}"
    budget = max(timeout_s, GOLD_TIME_FACTOR * golds.elapsed_s(gold_sql))
    ordered = order_sensitive and has_top_level_order_by(gold_sql, dialect=engine_of(db_path))
    gold_beyond = gold.beyond_cap if isinstance(gold, GoldSummary) else not gold.ok
    if (
        gold_beyond
        and not ordered
        and same_rows_in_database(db_path, gold_sql, pred_sql, len(gold.columns or []), budget)
    ):
        return True, f"same {gold.row_total} rows (compared inside the database beyond the cap)"
    pred = execute_sql(db_path, pred_sql, timeout_s=budget, digest_beyond_cap=True)
    if not pred.ok and pred.kind is FailureKind.TIMEOUT:
        # the deadline says how busy the machine was, not whether the query is right: a correct
        # prediction (or its digest past the cap) can run past it on a loaded machine; once more
        budget *= RETRY_BUDGET_FACTOR
        pred = execute_sql(db_path, pred_sql, timeout_s=budget, digest_beyond_cap=True)
        if not pred.ok and pred.kind is FailureKind.TIMEOUT:
            return None, (
                f"cannot decide: the prediction ran past its budget twice (the second {budget:g} s; {pred.one_line()})"
            )
    if not pred.ok and pred.kind not in too_big:
        return False, f"pred failed: {pred.one_line()}"
    beyond = not pred.ok or gold_beyond
    if beyond:  # past the cap (rows or bytes): counted and digested, never held
        return large_results_match(gold, pred, ordered=ordered)
    if isinstance(gold, GoldSummary):  # stored digest: equal digests decide without the gold's rows
        verdict, reason = large_results_match(gold, pred, ordered=ordered)
        if verdict is True or (verdict is False and reason.startswith("row count differs")):
            return verdict, reason.replace(" (beyond the cap, counted)", "").replace(" beyond the cap", "")
        gold = golds.get(gold_sql)  # the digests differ: the exact rows decide (column mapping)
        if not gold.ok:
            return None, f"cannot decide: gold failed: {gold.one_line()}"
    v = results_equivalent(gold, pred, order_sensitive=ordered)
    if not v.equivalent and v.reason.startswith("column mapping search gave up"):
        return None, f"cannot decide: {v.reason}"
    return bool(v.equivalent), v.reason


def fb_decision(votes: list[bool | None], n_judges: int) -> bool | None:
    """The FB outcome, or None (undecided) unless the readable votes fix the full council's outcome.

    Reference rule on the full council: explained iff yes > no (a tie rejects). A judge whose call
    failed or whose answer could not be read may have said anything; the decision stands only if
    it is the same for every way those judges could have voted (with 3 judges: 2 agreeing votes)."""
    valid = [v for v in votes if v is not None]
    missing = n_judges - len(valid)
    if not is_decided(valid, missing, "strict_majority"):
        return None
    return decide(valid + [None] * missing, "strict_majority").decision


def feedback_role(councils) -> str:
    """The council that judges FB: its own role ``feedback_judges``; a council file without it uses
    the user council (the paper: "the same models as the user council"), never the AI-SQL ``judges``."""
    return FEEDBACK_ROLE if FEEDBACK_ROLE in councils else "user_simulator"


def score_conversation(
    conv: dict,
    q: dict,
    db_path: str,
    feedback_judge=None,
    order_sensitive: bool = False,
    schema_context: str = "",
    timeout_s: float = 3.0,
    golds: GoldResults | None = None,
) -> dict:
    gold = q["subcategory"]
    out = {
        k: conv[k]
        for k in (
            "conversation_id",
            "question_id",
            "db_id",
            "agent",
            "mode",
            "end",
            "n_turns",
            "predicted_subcategory",
            "predicted_sql",
            "predicted_feedback",
        )
    }
    out.update(
        subcategory=gold, group=subcategory(gold).group.value, style=q.get("style"), difficulty=q.get("difficulty")
    )
    # a classification whose call got no answer is no prediction to score (an outage, not a miss)
    predicted_mode = conv["mode"] == "predicted" and conv.get("classification_status") != TRANSPORT_FAILURE
    out["recognition"] = recognition(gold, conv["predicted_subcategory"]) if predicted_mode else None
    out["classification"] = (conv["predicted_subcategory"] == gold) if predicted_mode else None
    out["fb_votes"], out["fb_judges"], out["fb_unusable_judges"] = [], [], []
    if conv["end"] in INCOMPLETE_ENDS:
        reason = (
            "incomplete: a user turn could not be produced (a council call failed; run again to retry it)"
            if conv["end"] == USER_FAILED
            else "incomplete: the system's endpoint gave no answer (transport failure after retries; run again)"
        )
        out.update(
            solved=None,
            explained=None,
            ex_status="incomplete",
            fb_status="incomplete",
            ex_reason=reason,
            fb_reason=reason,
        )
    else:
        _score_ex(out, conv, q, gold, db_path, order_sensitive, timeout_s, golds)
        _score_fb(out, conv, q, gold, feedback_judge)
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


def _score_ex(out, conv, q, gold, db_path, order_sensitive, timeout_s, golds=None) -> None:
    ex = ex_outcome(gold, conv["predicted_sql"])
    out["ex_status"] = "scored"
    if ex == "skip":
        out["solved"], out["ex_reason"], out["ex_status"] = None, "no SQL on an unanswerable question", "not_applicable"
    elif ex == "false":
        out["solved"] = False
        out["ex_reason"] = "SQL on an unanswerable question" if conv["predicted_sql"] else f"no SQL ({conv['end']})"
    else:
        out["solved"], out["ex_reason"] = execution_match(
            db_path, q["sql"], conv["predicted_sql"], order_sensitive, timeout_s, golds
        )
        if out["solved"] is None:
            out["ex_status"] = "undecided"


def _score_fb(out, conv, q, gold, feedback_judge) -> None:
    fb = fb_outcome(gold, conv["predicted_feedback"])
    out["fb_status"] = "scored"
    if fb == "skip":
        out["explained"], out["fb_reason"], out["fb_status"] = (
            None,
            "no feedback on a solvable question",
            "not_applicable",
        )
    elif fb == "false":
        out["explained"] = False
        out["fb_reason"] = (
            "feedback on a solvable question" if conv["predicted_feedback"] else f"no feedback ({conv['end']})"
        )
    elif feedback_judge is None:
        out["explained"], out["fb_reason"], out["fb_status"] = (
            None,
            "cannot decide: no feedback judge configured",
            "undecided",
        )
    else:
        decision, votes = feedback_judge(q, conv["predicted_feedback"])
        out["explained"], out["fb_votes"] = decision, votes
        # which judges were asked, and which of them gave no usable vote (named by the report)
        out["fb_judges"] = [v["member"] for v in votes]
        out["fb_unusable_judges"] = [v["member"] for v in votes if v["vote"] is None]
        yes, no = sum(v["vote"] == "Yes" for v in votes), sum(v["vote"] == "No" for v in votes)
        n = getattr(feedback_judge, "n_judges", len(votes))
        tally = f"{yes} yes, {no} no of {n} judges"
        if decision is None:
            out["fb_status"], out["fb_reason"] = "undecided", f"cannot decide: {tally} (no majority of the judges)"
        else:
            out["fb_reason"] = f"council: {tally}"


def council_feedback_judge(council, schema_context: str):
    """A ``feedback_judge`` backed by a council: yes > no over the configured judges (tie rejects),
    decided only when the missing or unreadable votes could not change it (:func:`fb_decision`)."""

    n = len(council.member_names)

    def judge(q: dict, feedback: str):
        outcome = council.vote(
            prompts.feedback_messages(schema_context, q, feedback),
            prompts.FeedbackMatch,
            extract=lambda p: p.matches,
            rule="strict_majority",
            tag=dict(stage="interaction_feedback", candidate_id=q["question_id"]),
        )
        votes = [
            {
                "member": v.member,
                "vote": None if v.vote is None else ("Yes" if v.vote else "No"),
                "parsed_ok": v.parsed_ok,
                "llm_call_id": v.call_id,
                "status": r.status,
                "error": r.error,
            }
            for v, r in zip(outcome.votes, outcome.results)
        ]
        # The council's vote loop asks on until a majority of the configured judges agrees, the same
        # way after a failed "No" as after a failed "Yes" (#30 item 2); fb_decision is the same rule
        # restated over the recorded votes (unasked judges = free votes), so the two must agree.
        decision = outcome.decision if outcome.decided else None
        assert decision == fb_decision([v.vote for v in outcome.votes] + [None] * outcome.calls_saved, n)
        return decision, votes

    judge.n_judges = n
    return judge


# ----------------------------------------------------------------------------- aggregates


def rate(values) -> tuple[float | None, int, int]:
    vals = [v for v in values if v is not None]
    n = len(vals)
    k = sum(1 for v in vals if v)
    return (k / n if n else None), k, n


def _row(table, agent, mode, sub, metric, values) -> dict:
    return _mean_row(table, agent, mode, sub, metric, *rate(values))


def _mean_row(table, agent, mode, sub, metric, value, k, n, undecided=None) -> dict:
    return {
        "table": table,
        "agent": agent,
        "mode": mode,
        "subcategory": sub,
        "metric": metric,
        "value": value,
        "numerator": k,
        "denominator": n,
        "undecided": undecided,
    }


_STATUS = {"solved": "ex_status", "explained": "fb_status"}


def _outcome_row(table, agent, mode, sub, metric, scores: list[dict], field: str) -> dict:
    """A rate of EX (``solved``) or FB (``explained``) with the items that could not be decided
    beside it (#38 item 2): they are in neither numerator nor denominator, and a rate resting on
    fewer decided items than undecided ones is shown as undecided (:func:`undecided_rate`)."""
    row = _row(table, agent, mode, sub, metric, [s[field] for s in scores])
    row["undecided"] = sum(1 for s in scores if s.get(_STATUS[field]) == "undecided")
    return row


def undecided_rate(row: dict | None) -> bool:
    """The rate could not be decided: undecided items, at least as many as the decided ones (a rate
    over the few items decided by rule alone, e.g. FB 0/4 beside 151 undecided, says nothing)."""
    return bool(row and row.get("undecided")) and row["undecided"] >= row["denominator"]


def judge_failure_rows(scores: list[dict]) -> list[dict]:
    """Per FB judge: in how many of the judged conversations its vote was unusable (its call failed
    or its answer could not be read), so a report names the judges that left FB undecided."""
    judged = [s for s in scores if s.get("fb_status") in ("scored", "undecided") and s.get("fb_judges")]
    asked: dict[str, int] = defaultdict(int)
    failed: dict[str, int] = defaultdict(int)
    for s in judged:
        for m in s["fb_judges"]:
            asked[m] += 1
        for m in s.get("fb_unusable_judges") or []:
            failed[m] += 1
    return [
        _mean_row("judges", m, "all", None, "fb_unusable_votes", failed[m] / asked[m], failed[m], asked[m])
        for m in sorted(asked)
        if failed[m]
    ]


def _complete(c: dict) -> bool:
    return c.get("end") not in INCOMPLETE_ENDS


def _count_row(agent, mode, metric, convs: list[dict], flagged) -> dict:
    k = sum(1 for c in convs if flagged(c))
    return _mean_row("table4", agent, mode, None, metric, k / len(convs) if convs else None, k, len(convs))


def _dialogue_rows(table, agent, mode, convs: list[dict]) -> list[dict]:
    # incomplete conversations (a user turn could not be produced) never enter the label shares or AIR
    amb = [c for c in convs if c["group"] == Group.AMBIGUOUS.value and _complete(c)]
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
            rows.append(_outcome_row("table4", agent, mode, None, "ex", convs, "solved"))
            rows.append(_outcome_row("table4", agent, mode, None, "fb", convs, "explained"))
            # counted apart, never in a rate: incomplete dialogues, EX / FB that cannot be decided
            rows.append(_count_row(agent, mode, "incomplete", convs, lambda c: not _complete(c)))
            # of which the system's endpoint gave no answer (an outage of the system under test)
            rows.append(_count_row(agent, mode, "system_failed", convs, lambda c: c.get("end") == SYSTEM_FAILED))
            rows.append(_count_row(agent, mode, "ex_undecided", convs, lambda c: c.get("ex_status") == "undecided"))
            rows.append(_count_row(agent, mode, "fb_undecided", convs, lambda c: c.get("fb_status") == "undecided"))
            for metric, group in (("ans_ex", "answerable"), ("amb_ex", "ambiguous")):
                rows.append(
                    _outcome_row(
                        "table5", agent, mode, None, metric, [s for s in convs if s["group"] == group], "solved"
                    )
                )
            rows.append(_outcome_row("table5", agent, mode, None, "fb", convs, "explained"))
            rows += _dialogue_rows("table6", agent, mode, convs)
            for sub in SUBCATEGORIES:
                sc = [s for s in convs if s["subcategory"] == sub.id]
                if sc:
                    metric = "ex" if sub.solvable else "fb"
                    rows.append(
                        _outcome_row(
                            "figure2", agent, mode, sub.id, metric, sc, "solved" if sub.solvable else "explained"
                        )
                    )
        rows += _dialogue_rows("appendix_d", agent, "all", [s for s in scores if s["agent"] == agent])
    # across agents: macro average of the per-agent rates, and the pooled (micro) rate
    for table, metrics in (
        ("table5", ("ans_ex", "amb_ex", "fb")),
        ("table6", ("avg_turns", "clar_pct", "relevant_pct", "technical_pct", "irrelevant_pct", "air")),
    ):
        for mode in MODES:
            for metric in metrics:
                per = [r for r in rows if r["table"] == table and r["mode"] == mode and r["metric"] == metric]
                vals = [r["value"] for r in per if r["value"] is not None]
                k, n = sum(r["numerator"] for r in per), sum(r["denominator"] for r in per)
                u = sum(r["undecided"] for r in per) if table == "table5" else None
                if per:
                    mean = sum(vals) / len(vals) if vals else None
                    rows.append(_mean_row(table, "mean", mode, None, metric, mean, k, n, u))
                    rows.append(_mean_row(table, "pooled", mode, None, metric, k / n if n else None, k, n, u))
    return rows + judge_failure_rows(scores)


# ----------------------------------------------------------------------------- rendering


def _pct(v) -> str:
    return "  –  " if v is None else f"{100 * v:5.1f}"


def _find(rows, table, agent, mode, metric, sub=None) -> dict | None:
    for r in rows:
        if (r["table"], r["agent"], r["mode"], r["metric"], r["subcategory"]) == (table, agent, mode, metric, sub):
            return r
    return None


def _get(rows, table, agent, mode, metric, sub=None):
    r = _find(rows, table, agent, mode, metric, sub)
    return None if r is None else r["value"]


def _cell(row: dict | None) -> str:
    """A rate as printed: ``–`` when there is none or it could not be decided; the undecided items
    beside it whenever there are any (``58.7 +3?``: 3 more items could not be decided)."""
    if row is None:
        return "  –  "
    u = row.get("undecided") or 0
    value = "  –  " if row["value"] is None or undecided_rate(row) else _pct(row["value"])
    return f"{value.strip()} +{u}?" if u else value


def undecided_metrics(rows: list[dict]) -> list[dict]:
    """The Table 4 EX / FB rates that could not be decided (``–``): the CLI exits 3 on them."""
    return [r for r in rows if r["table"] == "table4" and r["metric"] in ("ex", "fb") and undecided_rate(r)]


def undecided_share(rows: list[dict]) -> dict[str, int]:
    """Undecided EX / FB items over every agent and mode of Table 4 (0 when all decided)."""
    out = {}
    for metric in ("ex", "fb"):
        out[metric] = sum(r.get("undecided") or 0 for r in rows if r["table"] == "table4" and r["metric"] == metric)
    return out


def incomplete_share(rows: list[dict]) -> tuple[int, int]:
    """(incomplete conversations, all conversations) over every agent and mode of Table 4."""
    inc = [r for r in rows if r["table"] == "table4" and r["metric"] == "incomplete"]
    return sum(r["numerator"] for r in inc), sum(r["denominator"] for r in inc)


def is_provisional(rows: list[dict]) -> bool:
    """True when some conversation is incomplete or some reported EX / FB item could not be decided:
    the rates may still shift once they complete or are decided (#38 item 2)."""
    return incomplete_share(rows)[0] > 0 or any(undecided_share(rows).values())


def table4_lines(rows: list[dict]) -> list[str]:
    """Table 4, with the incomplete share beside it (predicted mode, ground truth in parentheses):
    the rates leave incomplete conversations out, so a reader must see how many there are."""
    agents = sorted({r["agent"] for r in rows if r["table"] == "table4"})

    def pair(a, metric):
        pred, gt = (_cell(_find(rows, "table4", a, m, metric)) for m in ("predicted", "ground_truth"))
        return f"{pred} ({gt.strip()})"

    # a rate with undecided items carries their count, so the columns widen to fit it
    w = max([15] + [len(pair(a, m)) for a in agents for m in ("ex", "fb")])
    out = [f"{'agent':<24} {'Rec.':>6} {'Cls.':>6} {'EX (GT)':>{w}} {'FB (GT)':>{w}} {'Incompl. (GT)':>15}"]
    for a in agents:
        out.append(
            f"{a:<24} {_pct(_get(rows, 'table4', a, 'predicted', 'rec')):>6} "
            f"{_pct(_get(rows, 'table4', a, 'predicted', 'cls')):>6} {pair(a, 'ex'):>{w}} {pair(a, 'fb'):>{w}} "
            f"{pair(a, 'incomplete'):>15}"
        )
    return out


TABLE4_LEGEND = (
    "Rec.: the predicted category's group (answerable / ambiguous / unanswerable) is right; Cls.: the "
    "category itself is right; EX: solvable questions answered with the gold result; FB: unanswerable "
    "ones explained; Incompl.: conversations left out (a user turn failed). In %, predicted mode, "
    "ground-truth mode in parentheses (GT); – = undecided."
)


def table4_narrow_lines(rows: list[dict]) -> list[str]:
    """Table 4 as :func:`table4_lines`, one block per agent, each line at most 38 characters: the
    interaction page's value column shows ~40 of its code font at 1,366 px and cut the wide table
    after "Cls." (#42 item 7)."""
    out = []
    for a in sorted({r["agent"] for r in rows if r["table"] == "table4"}):
        # the cells as the report prints them: "–" where the rate could not be decided, and the
        # undecided items beside a rate ("55.6 +3?"), never a bare rate over the few decided
        def pair(metric, a=a):
            gt = _cell(_find(rows, "table4", a, "ground_truth", metric)).strip()
            return f"{_cell(_find(rows, 'table4', a, 'predicted', metric)).strip():>5} (GT {gt})"

        rec, cls = (_cell(_find(rows, "table4", a, "predicted", m)).strip() for m in ("rec", "cls"))
        out += [a if len(a) <= 38 else a[:37] + "…", f"  Rec. {rec:>5}  Cls. {cls:>5}"]
        out += [f"  EX   {pair('ex')}", f"  FB   {pair('fb')}", f"  Incompl. {pair('incomplete')}"]
    return out


DEFAULT_COMPLETE_COMMAND = "run the same `quandary interact` command again"


def provisional_lines(rows: list[dict], complete_command: str | None = None) -> list[str]:
    """The banner over provisional tables: incomplete conversations, undecided EX / FB items and the
    FB judges that gave no usable vote, with the command that completes them (none when all is in)."""
    k, n = incomplete_share(rows)
    undecided = undecided_share(rows)
    if not k and not any(undecided.values()):
        return []
    how = f"`{complete_command}`" if complete_command else DEFAULT_COMPLETE_COMMAND
    out = []
    if k:
        outage = sum(r["numerator"] for r in rows if r["table"] == "table4" and r["metric"] == "system_failed")
        out += [
            f"PROVISIONAL: {k} of {n} conversations ({100 * k / n:.1f} %) are incomplete ({k - outage} because a "
            "user turn could not be produced: a council call failed or its answer was unreadable; "
            f"{outage} because the system agent's endpoint gave no answer). Every rate below leaves them out "
            "and may shift once they complete.",
            f"Complete them with: {how} (it re-asks exactly the failed calls; the others come from the cache).",
        ]
    if any(undecided.values()):
        what = ", ".join(f"{m.upper()} {u}" for m, u in undecided.items() if u)
        out.append(
            f"PROVISIONAL: items that could not be decided ({what} conversations over every agent and mode) are "
            "left out of their rate and shown beside it as +N?; a rate with at least as many undecided items as "
            "decided ones is shown as – (undecided)."
        )
        judges = [r for r in rows if r["table"] == "judges" and r["metric"] == "fb_unusable_votes"]
        if judges:
            named = ", ".join(f"{r['agent']} ({r['numerator']} of {r['denominator']} votes)" for r in judges)
            out.append(
                f"FB judges without a usable vote (call failed or answer unreadable): {named}. Check their model "
                f"and endpoint in the council file, then run {how} again (failed calls are re-asked; an unreadable "
                "answer is cached, so a judge that answers garbage must be replaced)."
            )
    return out + [""]


MODE_ABBREV = {"ground_truth": "GT", "predicted": "Pr", "taxonomy_only": "TO", "taxonomy_free": "TF"}


def mode_legend(modes) -> str:
    """What the abbreviations of ``modes`` stand for (narrow tables: Figure 2, Table 5)."""
    return ", ".join(f"{MODE_ABBREV[m]} {MODE_LABELS[m].lower()}" for m in modes)


def _table5_modes(rows: list[dict], agent: str = "mean") -> list[str]:
    """The modes Table 5 has a rate of."""
    return [m for m in MODES if any(_get(rows, "table5", agent, m, x) is not None for x in ("fb", "ans_ex", "amb_ex"))]


def table5_lines(
    rows: list[dict], agent: str = "mean", label_w: int = 16, cell_w: int = 8, labels: dict[str, str] | None = None
) -> list[str]:
    """Table 5, one line per mode, each mode named by ``labels`` (default :data:`MODE_LABELS`)."""
    labels = labels or MODE_LABELS
    out = [f"{'mode':<{label_w}} {'Ans. EX':>{cell_w}} {'Amb. EX':>{cell_w}} {'FB':>{cell_w}}"]
    for mode in _table5_modes(rows, agent):
        cells = [_cell(_find(rows, "table5", agent, mode, m)) for m in ("ans_ex", "amb_ex", "fb")]
        out.append(f"{labels[mode]:<{label_w}} " + " ".join(f"{c:>{cell_w}}" for c in cells))
    return out


def _table5_within(rows: list[dict], width: int) -> list[str]:
    """Table 5 (mean) at most ``width`` characters a line: the modes' names where they fit, else
    their abbreviations and a legend (a cell's undecided items, "57.1 +15?", widen it; cut at
    the value column's edge, the mark that says the rate is provisional was lost, #42 item 7)."""
    lines = table5_lines(rows, label_w=13, cell_w=7)
    if max(len(line) for line in lines) <= width:
        return lines
    lines = table5_lines(rows, label_w=4, cell_w=(width - 4) // 3 - 1, labels=MODE_ABBREV)
    return lines + textwrap.wrap(mode_legend(_table5_modes(rows)), width)


def report_summary_lines(rows: list[dict], width: int = 38) -> list[str]:
    """The report's head, at most ``width`` characters a line, for the asset page, where it reads
    whole at 1,366 px (the whole report hid behind "[Show Markdown]", #42 item 7): provisional or
    not, the conversations no rate counts, and Table 5."""
    k, n = incomplete_share(rows)
    undecided = undecided_share(rows)
    out = []
    if is_provisional(rows):
        out += textwrap.wrap(
            "PROVISIONAL: some conversations are incomplete or some items undecided; the rates may shift "
            "(complete_with names the command that completes them).",
            width,
        )
    out += [f"{n} conversations, {k} incomplete", f"undecided: EX {undecided['ex']}, FB {undecided['fb']}", ""]
    out += ["Table 5, mean over agents, %", *_table5_within(rows, width)]
    return out


def _dialogue_line(label, rows, table, agent, mode) -> str:
    turns = _get(rows, table, agent, mode, "avg_turns")
    vals = [
        _pct(_get(rows, table, agent, mode, m))
        for m in ("clar_pct", "relevant_pct", "technical_pct", "irrelevant_pct", "air")
    ]
    return f"{label:<24} {('–' if turns is None else f'{turns:.2f}'):>9} " + " ".join(f"{v:>7}" for v in vals)


DIALOGUE_HEADER = f"{'':<24} {'Avg.Turns':>9} {'Clar.%':>7} {'Rel.':>7} {'Tech.':>7} {'Irrel.':>7} {'AIR':>7}"


def table6_lines(rows: list[dict], agent: str = "mean") -> list[str]:
    return [DIALOGUE_HEADER.replace(" " * 24, f"{'mode':<24}", 1)] + [
        _dialogue_line(MODE_LABELS[m], rows, "table6", agent, m)
        for m in MODES
        if any(r["table"] == "table6" and r["mode"] == m for r in rows)
    ]


def appendix_d_lines(rows: list[dict]) -> list[str]:
    agents = sorted({r["agent"] for r in rows if r["table"] == "appendix_d"})
    return [DIALOGUE_HEADER.replace(" " * 24, f"{'agent (all modes)':<24}", 1)] + [
        _dialogue_line(a, rows, "appendix_d", a, "all") for a in agents
    ]


def not_counted_lines(rows: list[dict]) -> list[str]:
    """Conversations no rate counts: incomplete dialogues (a failed council call; of which the system's
    endpoint gave no answer) and undecided EX / FB."""
    head = ("incomplete", "system outage", "EX undecided", "FB undecided")
    out = [f"{'agent':<24} {'mode':<16} " + " ".join(f"{h:>13}" for h in head)]
    keys = sorted({(r["agent"], r["mode"]) for r in rows if r["table"] == "table4" and r["metric"] == "incomplete"})
    for agent, mode in keys:
        got = {r["metric"]: r for r in rows if r["table"] == "table4" and (r["agent"], r["mode"]) == (agent, mode)}
        cells = [
            f"{got[m]['numerator']}/{got[m]['denominator']}" if m in got else "–"
            for m in ("incomplete", "system_failed", "ex_undecided", "fb_undecided")
        ]
        out.append(f"{agent:<24} {MODE_LABELS.get(mode, mode):<16} " + " ".join(f"{c:>13}" for c in cells))
    return out


def report_text(rows: list[dict], complete_command: str | None = None) -> str:
    provisional = is_provisional(rows)
    parts = [
        *provisional_lines(rows, complete_command),
        "Table 4 — per agent: predicted mode (ground truth in parentheses), %"
        + (" [provisional]" if provisional else ""),
        *table4_lines(rows),
        "",
        "Not counted in any rate — incomplete: a user turn could not be produced (a council call failed) or "
        "the system agent's endpoint gave no answer (system outage); run again to retry exactly those calls; "
        "undecided: EX / FB cannot be decided",
        *not_counted_lines(rows),
        "",
        "Table 5 — per mode, mean over agents, %" + (" [provisional]" if provisional else ""),
        *table5_lines(rows),
        "",
        "Table 6 — dialogue statistics on ambiguous questions, mean over agents"
        + (" [provisional]" if provisional else ""),
        *table6_lines(rows),
        "",
        "Appendix D — dialogue statistics per agent" + (" [provisional]" if provisional else ""),
        *appendix_d_lines(rows),
    ]

    leak = leakage_lines(rows)
    if leak:
        parts += [
            "",
            "Leakage — user answers with a gold-only SQL value or the hidden knowledge verbatim, "
            "% [95% bootstrap interval over questions]; per member: every answer it wrote, per label: the "
            "answers the system received" + (" [provisional]" if provisional else ""),
            *leak,
        ]
    return "\n".join(parts)


def figure2_cells(rows: list[dict]) -> tuple[list[str], list[str], dict[tuple[str, str], dict]]:
    """Figure 2's data: the subcategories and modes it has, and per (subcategory, mode) the EX
    (solvable) or FB (unanswerable) rate pooled over agents, as a row :func:`_cell` reads (undecided
    items counted beside it, as in Tables 4 and 5)."""
    fig2 = [r for r in rows if r["table"] == "figure2"]
    subs = [s.id for s in SUBCATEGORIES if any(r["subcategory"] == s.id for r in fig2)]
    modes = [m for m in MODES if any(r["mode"] == m for r in fig2)]
    cells = {}
    for s in subs:
        for mode in modes:
            rs = [r for r in fig2 if r["subcategory"] == s and r["mode"] == mode]
            if rs:
                k, n = sum(r["numerator"] for r in rs), sum(r["denominator"] for r in rs)
                u = sum(r.get("undecided") or 0 for r in rs)
                cells[(s, mode)] = _mean_row(
                    "figure2", "pooled", mode, s, rs[0]["metric"], k / n if n else None, k, n, u
                )
    return subs, modes, cells


def figure2_lines(rows: list[dict], width: int = 38) -> list[str]:
    """Figure 2 as a text table at most ``width`` characters wide, for the asset page, where it reads
    whole at 1,366 px (the PNG hides behind "[Show Markdown]", #42 item 7): a line per subcategory,
    a column per mode, whole percents; – where no item was decided (never 0)."""
    subs, modes, cells = figure2_cells(rows)
    if not subs:
        return []
    cols = 4 * len(modes)
    name_w = max(8, width - cols)

    def pct(row):
        if row is None or row["value"] is None or undecided_rate(row):
            return "–"
        return f"{100 * row['value']:.0f}"

    out = ["Figure 2, % pooled over agents", f"{'':<{name_w}}" + "".join(f"{MODE_ABBREV[m]:>4}" for m in modes)]
    for solvable, label in ((True, "EX, solvable"), (False, "FB, unanswerable")):
        group = [s for s in subs if SUBCATEGORY_BY_ID[s].solvable is solvable]
        if not group:
            continue
        out.append(label)
        for s in group:
            name = SUBCATEGORY_BY_ID[s].name
            name = name if len(name) <= name_w else name[: name_w - 1] + "…"  # the cells keep a space
            out.append(f"{name:<{name_w}}" + "".join(f"{pct(cells.get((s, m))):>4}" for m in modes))
    undecided = sum(c["undecided"] or 0 for c in cells.values())
    legend = mode_legend(modes)
    out += textwrap.wrap(
        legend + "; – no item decided" + (f"; {undecided} undecided item(s) left out" if undecided else ""), width
    )
    return out


def figure2_png(rows: list[dict], path) -> object:
    """Per-subcategory EX (solvable) / FB (unanswerable) by mode, pooled over agents, as a PNG; a
    rate with no decided item has no bar (it is not 0)."""
    subs, modes, cells = figure2_cells(rows)
    with png_chart(path, figsize=(9, 0.45 * max(1, len(subs)) + 1.5)) as ax:
        height = 0.8 / max(1, len(modes))
        for j, mode in enumerate(modes):
            shown = [
                (i, 100 * c["value"])
                for i, s in enumerate(subs)
                if (c := cells.get((s, mode))) is not None and c["value"] is not None and not undecided_rate(c)
            ]
            ax.barh([i + j * height for i, _ in shown], [v for _, v in shown], height=height, label=MODE_LABELS[mode])
        ax.set_yticks([i + 0.4 - height / 2 for i in range(len(subs))])
        ax.set_yticklabels(
            [f"{SUBCATEGORY_BY_ID[s].name} ({'EX' if SUBCATEGORY_BY_ID[s].solvable else 'FB'})" for s in subs],
            fontsize=8,
        )
        ax.set_xlim(0, 100)
        ax.set_xlabel("%")
        ax.set_title("Per-subcategory EX / FB by category usage mode")
        ax.legend(fontsize=8)
    return path
