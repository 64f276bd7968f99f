"""The rates chart (one bar per error type and database, through the one PNG writer) and the
Markdown tables that go on the asset's page and the terminal."""

from pathlib import Path

import polars as pl

from pipelines.benchmark_audit.checks import CHECKS, ERROR_TYPES, WEAK_CHECKS
from storage.charts import png_chart

TYPES = ("E1", "E2", "E3", "E4")
TYPE_NAMES = {
    "E1": "SQL vs question logic",
    "E2": "SQL vs schema / data",
    "E3": "evidence / knowledge",
    "E4": "ambiguous question",
}


def rates_chart(rates: pl.DataFrame, path: Path, title: str) -> Path:
    """Grouped bars: the share of items flagged per error type, one group per database and ALL."""
    dbs = rates["db_id"].to_list()
    with png_chart(path, figsize=(max(6.0, 0.6 * len(dbs) + 3), 4.2), dpi=110) as ax:
        width = 0.8 / len(TYPES)
        for n, t in enumerate(TYPES):
            xs = [i + (n - 1.5) * width for i in range(len(dbs))]
            ax.bar(xs, [100 * v for v in rates[f"{t}_rate"].to_list()], width, label=f"{t} {TYPE_NAMES[t]}")
        ax.set_xticks(range(len(dbs)))
        ax.set_xticklabels(dbs, rotation=45, ha="right", fontsize=8)
        ax.set_ylabel("% of items flagged (deterministic checks)")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7)
    return path


def rates_markdown(rates: pl.DataFrame) -> str:
    """Flagged items (annotation errors) by type, and weak items (correct, but empty here) apart."""
    head = "| database | items | flagged | " + " | ".join(TYPES) + " | weak (not flagged) |"
    lines = [head, "|" + "---|" * (4 + len(TYPES))]
    for r in rates.iter_rows(named=True):
        cells = " | ".join(f"{r[t]} ({100 * r[f'{t}_rate']:.1f} %)" for t in TYPES)
        weak = f"{r.get('weak', 0)} ({100 * (r.get('weak_rate') or 0):.1f} %)"
        lines.append(
            f"| {r['db_id']} | {r['items']} | {r['flagged']} ({100 * r['flagged_rate']:.1f} %) | {cells} | {weak} |"
        )
    return "\n".join(lines)


def checks_lines(rates: pl.DataFrame) -> list[str]:
    """Per check, the count over ALL (the last row), in check order; the weak items after, apart."""
    total = rates.filter(pl.col("db_id") == "ALL").row(0, named=True)
    lines = [f"  {c:<27} {ERROR_TYPES[c]}  {total[c]}" for c in CHECKS]
    lines.append("  weak items (correct, but they cannot tell systems apart here; not flags):")
    lines += [f"  {c:<27} --  {total.get(c, 0)}" for c in WEAK_CHECKS]
    return lines
