"""Meta-evaluation (paper §5, Table 1): TPR, TNR and accuracy per method and dialect, with counts.

Positive = labelled correct. TPR = TP/(TP+FN), TNR = TN/(TN+FP), Acc = (TP+TN)/N. A method's
error verdicts count as rejections (they are already ``accepted=False``). Unlabelled pairs are
judged but not counted.
"""

from dataclasses import dataclass

import polars as pl

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


METRIC_COLUMNS = ["dialect", "method", "method_label", "n", "tp", "fn", "tn", "fp", "errors", "tpr", "tnr", "accuracy"]


def metric_table(pairs: pl.DataFrame, verdicts: pl.DataFrame, by: tuple[str, ...] = ("dialect",)) -> pl.DataFrame:
    """``pairs``: pair_id, dialect, label (bool or null); ``verdicts``: pair_id, method, accepted, status."""
    joined = verdicts.join(pairs.select("pair_id", *by, "label"), on="pair_id", how="inner").filter(
        pl.col("label").is_not_null()
    )
    rows = []
    keys = joined.select(*by, "method").unique().sort([*by, "method"]).iter_rows()
    for key in keys:
        *group, method = key
        sub = joined.filter(
            pl.all_horizontal([pl.col(c) == v for c, v in zip(by, group)] + [pl.col("method") == method])
        )
        c = confusion(sub["label"].to_list(), sub["accepted"].to_list())
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
            }
        )
    schema = {
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
    return lines
