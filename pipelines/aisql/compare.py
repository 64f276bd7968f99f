"""Judge one (gold, candidate) pair layer by layer: the engine behind ``quandary aisql compare``
and ``quandary aisql evaluate`` (issue 19 item 9).

Layers (each says ``accept``, ``reject`` or ``cannot decide``, with its reason):

* **structural** — :mod:`pipelines.aisql.structural`: equal → accept, differ → reject.
* **ai** — the AI-call alignment: every call paired, same input columns, and on a shared probe set
  the candidate's answers agree with the gold's (inverted when the structural layer paired them
  with opposite polarity). Agreement ≥ :data:`AI_ACCEPT` accepts, < :data:`AI_REJECT` rejects, in
  between cannot decide; an unpaired call or another input column rejects; a probe that cannot run
  cannot decide.
* **layers** — the deterministic stand-in for the autorater: reject if any layer rejects, accept if
  both accept, else cannot decide.
* **ex** — execution accuracy (:data:`~pipelines.aisql.diffs.EX_RULE`).
* **ours** — the LLM autorater, when asked for (``--methods ...,ours``).

Relational gate (#33 item 4): a verdict the deterministic layers reach is final. The autorater is
asked only about pairs they leave open; ``final_method`` names the layer that decided.

Exit codes of ``quandary aisql compare`` (:data:`EXIT_CODES`): 0 accept, 1 reject, 2 bad input,
3 cannot decide.
"""

from dataclasses import dataclass, field

from pipelines.aisql.checks import check_pair, public_names
from pipelines.aisql.diffs import EX_RULE, ex_equal
from pipelines.aisql.split_execution import EvalContext, Evidence, execute_pair
from pipelines.aisql.symmetry import SWAP_NOTE, symmetric_relation

ACCEPT, REJECT, UNDECIDED = "accept", "reject", "cannot decide"
BAD_INPUT = "bad input"
# What a verdict claims (#39 item 1, spec §5.5), stored with every verdict and counted apart:
PROOF = "equivalent (proof)"  # every database, every behaviour of the aligned AI calls
BOUNDED = "equivalent up to k rows per table"  # the symbolic verifier: no counterexample up to its bound k
WITNESS = "differ (witness)"  # a database and AI behaviour (or probe rows) where they differ, shown
EQUAL_DB = "equal on this database"  # evidence only: never an accept by the deterministic layers
EQUAL_SUITE_CLASS = "equal on the test suite"  # evidence only (generated databases)
OPEN = "cannot decide"
JUDGED = "judged by the autorater"  # an LLM's judgement of what the layers left open: neither proof nor witness
VERDICT_CLASSES = (PROOF, BOUNDED, WITNESS, EQUAL_DB, EQUAL_SUITE_CLASS, JUDGED, OPEN, BAD_INPUT)
EXIT_CODES = {ACCEPT: 0, REJECT: 1, BAD_INPUT: 2, UNDECIDED: 3}
AI_ACCEPT = 0.75  # value calls (scores, texts): probe agreement from which a call counts as the same question
AI_REJECT = 0.5  # below: the calls answer differently (a coin flip agrees half the time)
# boolean calls are decided on what they select (#39 item 2): Cohen's kappa over the probe rows, so
# that shared negatives (two rare diseases, 0 positives in common, 94 % raw agreement) count for
# nothing beyond chance. Landis & Koch: >= 0.6 substantial agreement accepts, < 0.2 slight rejects.
AI_KAPPA_ACCEPT = 0.6
AI_KAPPA_REJECT = 0.2
AI_MIN_SELECTED = 3  # fewer rows accepted (or rejected) by either call: the probe cannot tell them apart


@dataclass
class LayerVerdict:
    layer: str
    verdict: str  # accept | reject | cannot decide
    reason: str

    def row(self) -> dict:
        return {"layer": self.layer, "verdict": self.verdict, "reason": self.reason}


@dataclass
class PairJudgement:
    layers: list[LayerVerdict] = field(default_factory=list)
    final: str = UNDECIDED
    final_method: str = "layers"  # who decided: structural | ai | execution | layers | ours | input | none
    evidence: Evidence | None = None
    bad_input: str = ""  # why the pair cannot be judged as given (the gold does not run)
    verdict_class: str = OPEN  # what the final verdict claims (VERDICT_CLASSES)

    def layer(self, name: str) -> LayerVerdict | None:
        return next((v for v in self.layers if v.layer == name), None)

    def to_dict(self) -> dict:
        out = {
            "final": self.final,
            "final_method": self.final_method,
            "verdict_class": self.verdict_class,
            "layers": [v.row() for v in self.layers],
        }
        if self.bad_input:
            out["bad_input"] = self.bad_input
        return out


def verdict_class(final: str, ev: Evidence | None, bad_input: str = "", method: str = "layers") -> str:
    """What a verdict of ``method`` claims. The deterministic layers (``layers``) accept only on a
    proof (or a bounded proof) and reject on a witness; an open pair says what evidence it has
    (agreement on this database or the test suite). EX's accept is agreement on this database
    (evidence), its reject a witness on this database; an LLM method's verdict (the autorater, the
    LLM-SQL-Solver baselines) is a judgement, neither proof nor witness. The one classification
    behind `aisql compare`, `aisql evaluate` and the judge job's Table 1 (#39 item 1)."""
    if bad_input:
        return BAD_INPUT
    if method == "ex":
        return {ACCEPT: EQUAL_DB, REJECT: WITNESS}.get(final, OPEN)
    if method not in ("layers", "structural"):
        return JUDGED if final in (ACCEPT, REJECT) else OPEN
    sv = ev.structural if ev is not None else None
    if final == ACCEPT:
        return BOUNDED if sv is not None and sv.method == "verifier" else PROOF
    if final == REJECT:
        return WITNESS
    if sv is not None and sv.verdict == "equal_on_test_suite":
        return EQUAL_SUITE_CLASS
    if sv is not None and sv.verdict == "equal_on_database":
        return EQUAL_DB
    return OPEN


def bound_of(verdict_class_: str, ev: Evidence | None) -> int | None:
    """k of an "equivalent up to k rows per table" verdict (None for every other class)."""
    if verdict_class_ != BOUNDED or ev is None or ev.structural is None:
        return None
    k = (ev.structural.witness or {}).get("bounded_proof", {}).get("rows_per_table")
    return int(k) if k is not None else None


def structural_layer(ev: Evidence) -> LayerVerdict:
    sv = ev.structural
    if sv is None:
        return LayerVerdict("structural", UNDECIDED, "no structural comparison")
    verdict = {"equal": ACCEPT, "differ": REJECT}.get(sv.verdict, UNDECIDED)
    pol = [f"{inputs}: {p}" for inputs, p in zip(sv.polarity_inputs, sv.polarity) if p == "opposite"]
    extra = f" (candidate's AI call on {', '.join(pol)} read with opposite polarity)" if pol else ""
    return LayerVerdict("structural", verdict, f"{sv.reason} [{sv.method}]{extra}")


def kappa(counts: list[int], flipped: bool = False) -> float | None:
    """Cohen's kappa of two boolean calls from [both, gold only, candidate only, neither] (the
    candidate negated when ``flipped``); None when chance agreement is total (both constant)."""
    both, g_only, c_only, neither = counts
    if flipped:
        both, g_only, c_only, neither = g_only, both, neither, c_only
    n = both + g_only + c_only + neither
    if not n:
        return None
    po = (both + neither) / n
    pg, pc = (both + g_only) / n, (both + c_only) / n
    pe = pg * pc + (1 - pg) * (1 - pc)
    return None if pe >= 1 else (po - pe) / (1 - pe)


def _bool_call_verdict(probe: dict, flipped: bool) -> tuple[str, str]:
    """(verdict, reason) for a paired boolean call from its probe's 2x2 counts."""
    counts = probe["counts"]
    both, g_only, c_only, neither = counts
    if flipped:
        both, g_only, c_only, neither = g_only, both, neither, c_only
    sel_g, sel_c = both + g_only, both + c_only
    n = sum(counts)
    k = kappa(counts, flipped)
    tag = " (candidate read with opposite polarity)" if flipped else ""
    what = f"gold selects {sel_g}, candidate {sel_c}, {both} in common of {n} probe rows{tag}" + (
        f", {probe['mapped']}" if probe.get("mapped") else ""
    )
    identical = g_only == 0 and c_only == 0
    if not identical and min(both + g_only + c_only, n - both) < AI_MIN_SELECTED:
        return UNDECIDED, f"{what}: too few rows selected (or rejected) to compare (fewer than {AI_MIN_SELECTED})"
    if k is None:
        return UNDECIDED, f"{what}: both calls answer the same on every probe row; the probe cannot tell them apart"
    if k >= AI_KAPPA_ACCEPT:
        return ACCEPT, f"{what}; kappa {k:.2f} >= {AI_KAPPA_ACCEPT}"
    if k < AI_KAPPA_REJECT:
        return REJECT, f"{what}; kappa {k:.2f} < {AI_KAPPA_REJECT}"
    return UNDECIDED, f"{what}; kappa {k:.2f} between {AI_KAPPA_REJECT} and {AI_KAPPA_ACCEPT}"


def _swapped_inputs(a: dict) -> str | None:
    """'x, y -> y, x' when the candidate gives the gold's two input columns in the other order."""
    g = [c.lower() for c in a.get("gold_inputs", [])]
    c = [x.lower() for x in a.get("candidate_inputs", [])]
    if len(g) == 2 and c == g[::-1] and g[0] != g[1]:
        return f"{', '.join(a['gold_inputs'])} -> {', '.join(a['candidate_inputs'])}"
    return None


def _worse(a: str, b: str) -> str:
    return REJECT if REJECT in (a, b) else UNDECIDED if UNDECIDED in (a, b) else ACCEPT


def ai_layer(ev: Evidence) -> LayerVerdict:
    if not ev.alignment:
        if not ev.gold_split.ai_parts and not ev.cand_split.ai_parts and ev.gold_split.ok and ev.cand_split.ok:
            return LayerVerdict("ai", ACCEPT, "no AI calls on either side")
        return LayerVerdict("ai", UNDECIDED, "the AI calls could not be aligned (a query did not split)")
    opposite = set()
    if ev.structural is not None:
        opposite = {inp for inp, p in zip(ev.structural.polarity_inputs, ev.structural.polarity) if p == "opposite"}
    # inputs named in another order under aliases the structural layer proved to bind alike (an alias
    # renamed throughout) are no swap; only a proof that did not need the symmetric rule shows that
    sv = ev.structural
    bound_alike = sv is not None and sv.verdict == "equal" and SWAP_NOTE not in sv.reason
    worst, reasons = ACCEPT, []
    for a in ev.alignment:
        if a["status"] == "repeated_call":
            side = "gold" if a["gold_call"] is not None else "candidate"
            reasons.append(
                f"{side} call {a['gold_call'] if side == 'gold' else a['candidate_call']} repeats call {a['repeat_of']} (same prompt and input columns)"
            )
            continue
        if a["status"] != "paired":
            worst = REJECT
            reasons.append(
                f"{a['status'].replace('_', ' ')} (gold call {a['gold_call']}, candidate call {a['candidate_call']})"
            )
            continue
        gi = sorted(c.split(".")[-1].lower() for c in a.get("gold_inputs", []))
        ci = sorted(c.split(".")[-1].lower() for c in a.get("candidate_inputs", []))
        if gi != ci:
            worst = REJECT
            reasons.append(f"call {a['gold_call']}: candidate reads {ci}, gold reads {gi}")
            continue
        flipped = ",".join(sorted({c for c in gi})) in opposite
        swap = _swapped_inputs(a) if not bound_alike else None
        if a.get("same_call") and swap is not None:
            why = symmetric_relation(a.get("gold_prompt", ""))
            if why is None:  # f(b, a) is another call than f(a, b): never accepted here
                worst = _worse(worst, UNDECIDED)
                reasons.append(
                    f"call {a['gold_call']}: the same prompt with its two inputs swapped ({swap}); the judge cannot "
                    "show the prompt symmetric, so these are different calls (the structural layer decides)"
                )
                continue
            reasons.append(
                f"call {a['gold_call']}: the same call with its two inputs swapped ({swap}): its prompt states a "
                f"symmetric relation ('{why}')" + (" read with opposite polarity" if flipped else "")
            )
            worst = _worse(worst, REJECT if flipped else ACCEPT)
            continue
        if a.get("same_call"):
            v = REJECT if flipped else ACCEPT
            reasons.append(
                f"call {a['gold_call']}: the same call (operator, prompt, input columns)"
                + (" read with opposite polarity" if flipped else "")
            )
            worst = _worse(worst, v)
            continue
        probe = a.get("probe") or {}
        if probe.get("comparable") and probe.get("counts") is not None:
            v, why = _bool_call_verdict(probe, flipped)
            reasons.append(f"call {a['gold_call']}: {why}")
            worst = _worse(worst, v)
            continue
        agreement = probe.get("agreement", probe.get("exact_match"))
        if not probe.get("comparable") or agreement is None:
            worst = _worse(worst, UNDECIDED)
            reasons.append(
                f"call {a['gold_call']}: probe not comparable ({probe.get('reason') or probe.get('error') or probe.get('status')})"
            )
            continue
        eff = 1 - agreement if flipped else agreement
        tag = " (opposite polarity)" if flipped else ""
        reasons.append(f"call {a['gold_call']}: agreement {eff:.2f}{tag} on {probe.get('probe_rows')} probe rows")
        if eff < AI_REJECT:
            worst = REJECT
        elif eff < AI_ACCEPT:
            worst = _worse(worst, UNDECIDED)
    return LayerVerdict("ai", worst, "; ".join(reasons))


def combine(*layers: LayerVerdict) -> str:
    if any(v.verdict == REJECT for v in layers):
        return REJECT
    if all(v.verdict == ACCEPT for v in layers):
        return ACCEPT
    return UNDECIDED


def ex_layer(ev: Evidence) -> LayerVerdict:
    for side, rec in (("gold", ev.gold), ("candidate", ev.cand)):
        if rec.status == "undecided":
            return LayerVerdict("ex", UNDECIDED, f"{side}: {rec.error}")
    if not ev.gold.ok:
        return LayerVerdict("ex", UNDECIDED, f"the gold query did not run: {ev.gold.status} {ev.gold.error}"[:300])
    if not ev.cand.ok:
        return LayerVerdict("ex", REJECT, f"the candidate did not run: {ev.cand.status} {ev.cand.error}"[:300])
    equal = ex_equal(ev.gold, ev.cand, ev.ordered)
    return LayerVerdict(
        "ex",
        ACCEPT if equal else REJECT,
        f"{'equal' if equal else 'different'} results ({ev.gold.row_count} vs {ev.cand.row_count} rows"
        f"{', ordered' if ev.ordered else ''}); {EX_RULE}",
    )


def _not_running(rec) -> bool:
    """A query that ran into an error (not a timeout, budget or an oracle that cannot answer)."""
    return rec.status in ("error", "too_large")


def decider(s: LayerVerdict, a: LayerVerdict, final: str) -> str:
    """The layer whose verdict is final: a rejecting layer, both (``layers``), or ``none``."""
    if final == REJECT:
        return "structural" if s.verdict == REJECT else "ai"
    return "layers" if final == ACCEPT else "none"


def judge_pair(ctx: EvalContext, gold_sql: str, cand_sql: str, dialect: str, parts: bool = True) -> PairJudgement:
    """Every deterministic layer for one pair (the autorater is added by the caller when asked).
    Input problems found before running raise :class:`~pipelines.aisql.checks.BadPairInput`; a gold
    that parses but does not run gives ``bad_input`` and no verdict; a candidate that does not run
    is rejected by every layer, so no layer ever accepts a query that does not run."""
    check_pair(gold_sql, cand_sql, dialect)
    return judge_evidence(execute_pair(ctx, gold_sql, cand_sql, dialect, parts))


def judge_evidence(ev: Evidence) -> PairJudgement:
    """The deterministic layers' judgement of one pair's evidence (what :func:`judge_pair` returns,
    and what the judge job stores as its ``layers`` method)."""
    s, a, x = structural_layer(ev), ai_layer(ev), ex_layer(ev)
    if _not_running(ev.gold):
        why = public_names(f"the gold query does not run: {ev.gold.error}")[:300]
        layers = [LayerVerdict(n, UNDECIDED, why) for n in ("structural", "ai", "layers")] + [x]
        return PairJudgement(layers, UNDECIDED, "input", ev, bad_input=why, verdict_class=BAD_INPUT)
    if _not_running(ev.cand):
        why = public_names(f"the candidate does not run: {ev.cand.error}")[:300]
        s, a = LayerVerdict("structural", REJECT, why), LayerVerdict("ai", REJECT, why)
    final = combine(s, a)
    method = "execution" if _not_running(ev.cand) else decider(s, a, final)
    stand_in = LayerVerdict(
        "layers",
        final,
        (f"decided by the {method} layer; " if final == REJECT else "") + "deterministic stand-in for the autorater: "
        "reject if a layer rejects, accept if structural and AI layers accept",
    )
    return PairJudgement([s, a, stand_in, x], stand_in.verdict, method, ev, verdict_class=verdict_class(final, ev))


def autorater_layer(verdict) -> LayerVerdict:
    """The LLM autorater's :class:`~pipelines.aisql.methods.Verdict` as a layer (an error cannot decide)."""
    if verdict.status != "ok":
        return LayerVerdict("ours", UNDECIDED, f"autorater: {verdict.reason}")
    return LayerVerdict(
        "ours",
        ACCEPT if verdict.accepted else REJECT,
        f"scores overall {verdict.overall}, relational {verdict.relational}, ai {verdict.ai}; {verdict.reason}"[:400],
    )
