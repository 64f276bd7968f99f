"""The training curve of a run: a per-update table and its PNG (through the one chart writer)."""

from pathlib import Path

import polars as pl

from storage.charts import png_chart

CURVE_COLUMNS = {
    "update": pl.Int64,
    "reward": pl.Float64,
    "precision": pl.Float64,
    "recall": pl.Float64,
    "kl": pl.Float64,
    "entropy": pl.Float64,
    "clip_fraction": pl.Float64,
    "loss": pl.Float64,
    "grad_norm": pl.Float64,
    "lr": pl.Float64,
    "decisions": pl.Int64,
    "tokens": pl.Int64,
    "groups": pl.Int64,
    "groups_kept": pl.Int64,
    "fallback_stops": pl.Int64,
    "rollout_s": pl.Float64,
    "update_s": pl.Float64,
    "stepped": pl.Boolean,  # null in runs before #40's zero_signal rule (every update stepped)
}


def curve_frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame([{c: r.get(c) for c in CURVE_COLUMNS} for r in rows], schema=CURVE_COLUMNS, orient="row")


def curve_png(df: pl.DataFrame, path: str | Path) -> Path:
    """Reward, precision and recall per update (left axis) and the KL penalty (right axis)."""
    with png_chart(path, figsize=(7, 4), dpi=110) as ax:
        x = df["update"].to_list()
        for col in ("reward", "precision", "recall"):
            ax.plot(x, df[col].to_list(), marker="o", ms=3, label=col)
        ax.set_xlabel("update")
        ax.set_ylabel("mean over the rollout batch")
        ax.set_ylim(-0.02, 1.02)
        ax2 = ax.twinx()
        # a skipped step has no KL (null): a gap in the line, never a 0
        ax2.plot(x, df["kl"].fill_null(float("nan")).to_list(), color="grey", ls="--", marker=".", label="KL (k2)")
        ax2.set_ylabel("KL (k2) to the reference")
        lines = ax.get_legend_handles_labels()
        lines2 = ax2.get_legend_handles_labels()
        ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], loc="upper left", fontsize=8)
        ax.set_title("asker training curve")
    return Path(path)
