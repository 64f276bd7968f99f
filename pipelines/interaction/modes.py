"""The four category usage modes of ABISS §6 and the reference vocabulary they map to."""

from enum import Enum


class Mode(str, Enum):
    GROUND_TRUTH = "ground_truth"  # the gold subcategory is given to the agent
    PREDICTED = "predicted"  # the agent's own classification (one per question) is given
    TAXONOMY_ONLY = "taxonomy_only"  # the full taxonomy text, no label (reference: ``no_category``)
    TAXONOMY_FREE = "taxonomy_free"  # only the answerable / ambiguous / unanswerable distinction


MODES = tuple(m.value for m in Mode)
# Results-layout vocabulary of the reference code (``category_use``); it has no taxonomy-free mode.
REFERENCE_CATEGORY_USE = {
    "ground_truth": "ground_truth",
    "predicted": "predicted",
    "taxonomy_only": "no_category",
    "taxonomy_free": "taxonomy_free",
}
LABELS = {
    "ground_truth": "Ground truth",
    "predicted": "Predicted",
    "taxonomy_only": "Taxonomy-only",
    "taxonomy_free": "Taxonomy-free",
}


def parse_modes(values) -> list[str]:
    out = []
    for v in values or MODES:
        v = str(v).strip().lower().replace("-", "_")
        v = {"no_category": "taxonomy_only", "gt": "ground_truth"}.get(v, v)
        if v not in MODES:
            raise ValueError(f"unknown mode {v!r}; use {', '.join(MODES)}")
        if v not in out:
            out.append(v)
    return out
