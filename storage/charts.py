"""The one PNG chart writer: a headless matplotlib figure, saved atomically and always closed.

Why a module of its own: every job draws a chart (the ABISS validation funnel, the interaction
benchmark's Figure 2, AmbiTab's success rates, the aisql flip-rate sweep) and each needs the same
plumbing: the Agg backend (no display on a server or in Dagster's step processes), the folder made,
a write no reader sees half done (temporary file + rename), and the figure closed so a long run does
not pile up figures. What a chart shows is the domain's business; this module only writes it::

    from storage.charts import png_chart

    with png_chart(path, figsize=(7, 4)) as ax:     # a matplotlib Axes
        ax.barh(names, values)
    # path now holds the PNG (layout tightened, saved at ``dpi``)

Assets attach the written file to their page with ``assets.shared.charts.chart_metadata``, which
also puts it through the artifact store (:func:`publish_chart`): on one machine the file stays where
it was written, beside the artifacts; with an object store it is uploaded content-addressed
(``charts/<sha256[:20]>.png``, create-only), so every node and the UI see the same chart.
"""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from storage.stores import artifact_store


@contextmanager
def png_chart(path: str | Path, figsize: tuple[float, float], dpi: int = 100) -> Iterator:
    """Yield the Axes of a new figure; on a normal exit write it to ``path`` as a PNG. On an error
    nothing is written. The figure is closed either way."""
    import matplotlib  # lazy: matplotlib is slow to import

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: matplotlib is slow to import

    path = Path(path)
    fig, ax = plt.subplots(figsize=figsize, dpi=dpi)
    try:
        yield ax
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.png")
        fig.savefig(tmp, dpi=dpi)
        os.replace(tmp, path)  # readers see the old chart or the new one, never half of one
    finally:
        plt.close(fig)


def publish_chart(path: str | Path) -> str:
    """Where the chart at ``path`` is kept for every reader: the local path on one machine, the object
    URL in a shared store (:meth:`storage.stores.ObjectArtifactStore.put_chart`)."""

    return artifact_store().put_chart(Path(path))
