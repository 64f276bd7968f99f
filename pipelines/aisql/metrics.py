"""Meta-evaluation (paper §5, Table 1): TPR, TNR and accuracy per method and dialect, with counts.

Positive = labelled correct. TPR = TP/(TP+FN), TNR = TN/(TN+FP), Acc = (TP+TN)/N. A method's
error verdicts count as rejections (they are already ``accepted=False``). Unlabelled pairs are
judged but not counted.
"""

from dataclasses import dataclass

import polars as pl

from pipelines.aisql.compare import BOUNDED, EQUAL_DB, EQUAL_SUITE_CLASS, JUDGED, OPEN, PROOF, WITNESS
from pipelines.aisql.methods import METHOD_LABELS, METHODS


@dataclass(frozen=True)
class Confusion:
    tp: int
    fn: int
    tn: int
    fp: int

    @property
    def n(self) -> int:
        return self.tp + self.fn + self.tn + self.fp

    @property
    def tpr(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    @property
    def tnr(self) -> float | None:
        return self.tn / (self.tn + self.fp) if self.tn + self.fp else None

    @property
    def accuracy(self) -> float | None:
        return (self.tp + self.tn) / self.n if self.n else None


def confusion(labels: list[bool], accepted: list[bool]) -> Confusion:
    tp = sum(1 for y, a in zip(labels, accepted) if y and a)
    fn = sum(1 for y, a in zip(labels, accepted) if y and not a)
    tn = sum(1 for y, a in zip(labels, accepted) if not y and not a)
    fp = sum(1 for y, a in zip(labels, accepted) if not y and a)
    return Confusion(tp, fn, tn, fp)


POLICIES = ("reject", "ex", "ours")  # what an undecided verdict becomes (#33 item 6)
COVERAGE_SCHEMA = {
    "decided": pl.Int64,
    "coverage": pl.Float64,
    "acc_decided": pl.Float64,
    "acc_undecided_reject": pl.Float64,
    "acc_undecided_ex": pl.Float64,
    "acc_undecided_ours": pl.Float64,
}


def coverage(labels: list[bool], verdicts: list[bool | None], ex: list[bool | None], ours: list[bool | None]) -> dict:
    """Coverage and accuracy of one method over labelled pairs. ``verdicts``: accepted True/False, or
    None when the method could not decide; ``ex`` / ``ours``: the fallback methods' verdicts (None:
    not run or undecided). Accuracy on decided pairs, and the score under each policy for the
    undecided ones: count as reject; fall back to EX; fall back to the autorater (a fallback that
    is itself undecided counts as reject). Policies whose fallback did not run are None."""
    n = len(labels)
    decided = [(y, v) for y, v in zip(labels, verdicts) if v is not None]

    def score(fallback) -> float | None:
        if not n:
            return None
        right = 0
        for i, (y, v) in enumerate(zip(labels, verdicts)):
            if v is None:
                v = bool(fallback[i]) if fallback is not None and fallback[i] is not None else False
            right += v == y
        return right / n

    return {
        "decided": len(decided),
        "coverage": len(decided) / n if n else None,
        "acc_decided": sum(y == v for y, v in decided) / len(decided) if decided else None,
        "acc_undecided_reject": score(None),
        "acc_undecided_ex": score(ex) if ex is not None else None,
        "acc_undecided_ours": score(ours) if ours is not None else None,
    }


def coverage_markdown(metrics: pl.DataFrame, labels: dict[str, str]) -> str:
    """Per method and dialect: coverage, accuracy on decided pairs, and the score under each policy
    for undecided pairs (– where that fallback did not run)."""
    lines = [
        "| Method | dialect | decided (coverage) | acc. on decided | undecided = reject | → EX | → autorater |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in metrics.iter_rows(named=True):
        if r.get("decided") is None:
            continue
        lines.append(
            f"| {labels.get(r['method'], r['method'])} | {r['dialect']} | {r['decided']}/{r['n']} ({_pct(r['coverage'])}) "
            f"| {_pct(r['acc_decided'])} | {_pct(r['acc_undecided_reject'])} | {_pct(r['acc_undecided_ex'])} "
            f"| {_pct(r['acc_undecided_ours'])} |"
        )
    return "\n".join(lines)


# verdict class -> column suffix; the claim each class makes about a labelled pair (None: no claim)
CLASS_KEYS = {
    PROOF: "proof",
    BOUNDED: "bounded",
    WITNESS: "witness",
    EQUAL_DB: "equal_on_database",
    EQUAL_SUITE_CLASS: "equal_on_test_suite",
    JUDGED: "judged",
    OPEN: "open",
}
CLASS_CLAIM = {PROOF: True, BOUNDED: True, WITNESS: False, EQUAL_DB: True, EQUAL_SUITE_CLASS: True}
CLASS_SCHEMA = {
    **{f"n_{k}": pl.Int64 for k in CLASS_KEYS.values()},  # verdicts per class (#39 item 1)
    **{f"wrong_{k}": pl.Int64 for k in CLASS_KEYS.values()},  # ... whose claim the label contradicts
    "bound_k": pl.Int64,  # the smallest k of the "equivalent up to k rows per table" verdicts
}


def class_counts(labelled: pl.DataFrame) -> dict:
    """Per verdict class: how many labelled pairs, and how many the label contradicts (a wrong proof
    or witness; for an evidence class, pairs equal on this database or the test suite that are not
    equivalent; for a judgement, a wrong accept or reject). Rows without a class (an artifact stored
    before the column existed) make every count None, shown as '–', never 0."""
    if "verdict_class" not in labelled.columns or labelled["verdict_class"].is_null().any():
        return {c: None for c in CLASS_SCHEMA}
    out: dict = {}
    cls = labelled["verdict_class"].to_list()
    for name, key in CLASS_KEYS.items():
        rows = [
            (y, a) for c, y, a in zip(cls, labelled["label"].to_list(), labelled["accepted"].to_list()) if c == name
        ]
        claim = CLASS_CLAIM.get(name)
        out[f"n_{key}"] = len(rows)
        if name == JUDGED:
            out[f"wrong_{key}"] = sum(1 for y, a in rows if bool(a) != y)
        else:
            out[f"wrong_{key}"] = sum(1 for y, _ in rows if y != claim) if claim is not None else None
    ks = labelled.filter(pl.col("verdict_class") == BOUNDED)["bound_k"] if "bound_k" in labelled.columns else None
    out["bound_k"] = int(ks.min()) if ks is not None and ks.drop_nulls().len() else None
    return out


NOT_RECORDED = "verdict classes: – (not recorded in these stored verdicts; materialize aisql_verdicts again)"


def class_markdown(metrics: pl.DataFrame, labels: dict[str, str]) -> str:
    """Per method and dialect, what its verdicts claim (#39 item 1): the pairs of each verdict class
    and how many of them the label contradicts; '–' where the class counts are unknown."""
    if not metrics.height:
        return ""
    if "n_proof" not in metrics.columns:  # metrics stored before the classes: unknown, never 0
        return NOT_RECORDED
    lines = [
        "| Method | dialect | verdict class (what it claims) | pairs | share | label contradicts |",
        "|---|---|---|---|---|---|",
    ]
    recorded = metrics.filter(pl.col("n_proof").is_not_null())
    if not recorded.height:  # verdicts stored before the classes: unknown, never 0
        return NOT_RECORDED
    for r in recorded.iter_rows(named=True):
        for name, key in CLASS_KEYS.items():
            n = r[f"n_{key}"]
            if not n:
                continue
            wrong = r[f"wrong_{key}"]
            shown = name.replace("k rows", f"k = {r['bound_k']} rows") if name == BOUNDED and r.get("bound_k") else name
            lines.append(
                f"| {labels.get(r['method'], r['method'])} | {r['dialect']} | {shown} | {n} | "
                f"{_pct(n / r['n'] if r['n'] else None)} | {'–' if wrong is None else wrong} |"
            )
    return "\n".join(lines)


METRIC_COLUMNS = ["dialect", "method", "method_label", "n", "tp", "fn", "tn", "fp", "errors", "tpr", "tnr", "accuracy"]


def metric_table(pairs: pl.DataFrame, verdicts: pl.DataFrame, by: tuple[str, ...] = ("dialect",)) -> pl.DataFrame:
    """``pairs``: pair_id, dialect, label (bool or null); ``verdicts``: pair_id, method, accepted, status."""
    joined = verdicts.join(pairs.select("pair_id", *by, "label"), on="pair_id", how="inner").filter(
        pl.col("label").is_not_null()
    )
    rows = []
    by_method = {
        m: {r["pair_id"]: (r["accepted"] if r["status"] == "ok" else None) for r in sub.iter_rows(named=True)}
        for m, sub in ((m, joined.filter(pl.col("method") == m)) for m in ("ex", "ours"))
    }
    keys = joined.select(*by, "method").unique().sort([*by, "method"]).iter_rows()
    for key in keys:
        *group, method = key
        sub = joined.filter(
            pl.all_horizontal([pl.col(c) == v for c, v in zip(by, group)] + [pl.col("method") == method])
        )
        c = confusion(sub["label"].to_list(), sub["accepted"].to_list())
        ids = sub["pair_id"].to_list()
        cov = coverage(
            sub["label"].to_list(),
            [a if s == "ok" else None for a, s in zip(sub["accepted"].to_list(), sub["status"].to_list())],
            [by_method["ex"].get(i) for i in ids] if by_method["ex"] else None,
            [by_method["ours"].get(i) for i in ids] if by_method["ours"] else None,
        )
        rows.append(
            {
                **dict(zip(by, group)),
                "method": method,
                "method_label": METHOD_LABELS.get(method, method),
                "n": c.n,
                "tp": c.tp,
                "fn": c.fn,
                "tn": c.tn,
                "fp": c.fp,
                "errors": int((sub["status"] == "error").sum()),
                "tpr": c.tpr,
                "tnr": c.tnr,
                "accuracy": c.accuracy,
                **cov,
                **class_counts(sub),
            }
        )
    schema = {
        **COVERAGE_SCHEMA,
        **CLASS_SCHEMA,
        "n": pl.Int64,
        "tp": pl.Int64,
        "fn": pl.Int64,
        "tn": pl.Int64,
        "fp": pl.Int64,
        "errors": pl.Int64,
        "tpr": pl.Float64,
        "tnr": pl.Float64,
        "accuracy": pl.Float64,
    }
    if not rows:
        return pl.DataFrame(schema={**{c: pl.String for c in (*by, "method", "method_label")}, **schema})
    df = pl.DataFrame(rows, schema_overrides=schema)
    order = {m: i for i, m in enumerate(METHODS)}
    return df.with_columns(pl.col("method").replace_strict(order, default=99).alias("_o")).sort([*by, "_o"]).drop("_o")


def _pct(v) -> str:
    return "–" if v is None else f"{100 * v:.1f}"


def table1_markdown(metrics: pl.DataFrame, dialects=("bigquery", "thalamusdb")) -> str:
    """The layout of the paper's Table 1: one row per method, TPR/TNR/Acc per dialect (with N)."""
    present = [d for d in dialects if d in set(metrics["dialect"].to_list())] if metrics.height else []
    head = "| Method | " + " | ".join(f"{d} TPR | {d} TNR | {d} Acc" for d in present) + " |"
    lines = [head, "|---|" + "---|" * (3 * len(present))]
    for method in METHODS:
        cells = []
        seen = False
        for d in present:
            r = metrics.filter((pl.col("dialect") == d) & (pl.col("method") == method))
            if r.height:
                seen = True
                row = r.row(0, named=True)
                cells += [
                    f"{_pct(row['tpr'])} ({row['tp']}/{row['tp'] + row['fn']})",
                    f"{_pct(row['tnr'])} ({row['tn']}/{row['tn'] + row['fp']})",
                    f"{_pct(row['accuracy'])} ({row['tp'] + row['tn']}/{row['n']})",
                ]
            else:
                cells += ["–", "–", "–"]
        if seen:
            lines.append(f"| {METHOD_LABELS[method]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def per_variant_accuracy(pairs: pl.DataFrame, verdicts: pl.DataFrame) -> pl.DataFrame:
    """Share of labelled pairs each method judged right, one row per variant type, one column per method."""
    return (
        verdicts.join(pairs.select("pair_id", "variant_type", "label"), on="pair_id")
        .filter(pl.col("label").is_not_null())
        .with_columns((pl.col("accepted") == pl.col("label")).alias("right"))
        .group_by("variant_type", "method")
        .agg(pl.col("right").mean().round(3).alias("acc"))
        .pivot(on="method", index="variant_type", values="acc")
        .sort("variant_type")
    )


def error_counts(verdicts: pl.DataFrame) -> pl.DataFrame:
    """Verdicts whose call failed, per method (they count as rejections)."""
    return verdicts.filter(pl.col("status") == "error").group_by("method").len().sort("method")


def table1_sections(metrics: pl.DataFrame, scenario: str) -> list[str]:
    """Table 1 of a scenario, one section per evaluation set (the lines `aisql judge` and
    `report aisql` print)."""
    lines = []
    sets = metrics["set"].unique(maintain_order=True).to_list() if "set" in metrics.columns else [None]
    for set_name in sets:
        shown = metrics if set_name is None else metrics.filter(pl.col("set") == set_name)
        label = f" [{set_name} set]" if set_name else ""
        lines += ["", f"## {scenario}: meta-evaluation{label} (TPR / TNR / accuracy, counts in brackets)", ""]
        lines.append(table1_markdown(shown))
        if "decided" in shown.columns:
            lines += [
                "",
                "coverage (an error or cannot-decide verdict is undecided; accuracy on decided pairs is – when none is decided) and the score per policy for undecided pairs:",
                "",
            ]
            lines.append(coverage_markdown(shown, METHOD_LABELS))
        classes = class_markdown(shown, METHOD_LABELS)
        if classes:
            lines += ["", CLASS_NOTE, "", classes]
    return lines


CLASS_NOTE = (
    "what each verdict claims (a proof holds on every database; 'equivalent up to k rows per table' on every "
    "database of at most k rows per table; 'equal on ...' is evidence, never an accept by the deterministic "
    "layers; 'label contradicts': wrong proofs or witnesses, evidence that was not equivalence, wrong judgements):"
)
