"""The generation grid (§4.1, §4.3): generator × subcategory × style × difficulty × database × n.

``programmatic`` is a generator like any LLM member: its requests are served by the
programmatic candidate builder (no LLM call) instead of the generator council.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from pipelines.abiss.ids import stable_id
from pipelines.abiss.taxonomy import DEFAULT_STYLES, DIFFICULTY_BY_ID, STYLE_BY_ID, SUBCATEGORY_BY_ID

PROGRAMMATIC = "programmatic"
GRID_FIELDS = ("generators", "subcategories", "styles", "difficulties", "n", "seed", "llm_subcategories")
ALL_SUBCATEGORIES = tuple(SUBCATEGORY_BY_ID)


@dataclass(frozen=True)
class GridSpec:
    generators: tuple[str, ...] = (PROGRAMMATIC,)  # council member names or "programmatic"
    subcategories: tuple[str, ...] = ALL_SUBCATEGORIES
    styles: tuple[str, ...] = DEFAULT_STYLES
    difficulties: tuple[str, ...] = ("simple", "moderate", "complex", "highly complex")
    n: int = 3  # samples per cell, as the paper
    seed: int = 42
    # LLM generators cover only these subcategories (None: all of `subcategories`); the
    # programmatic generator always covers every requested subcategory it can build.
    llm_subcategories: tuple[str, ...] | None = None

    def validate(self) -> None:
        for key, values, known in (
            ("subcategories", self.subcategories, SUBCATEGORY_BY_ID),
            ("llm_subcategories", self.llm_subcategories or (), SUBCATEGORY_BY_ID),
            ("styles", self.styles, STYLE_BY_ID),
            ("difficulties", self.difficulties, DIFFICULTY_BY_ID),
        ):
            for v in values:
                if v not in known:
                    raise ValueError(f"{key}: unknown value {v!r}; allowed: {', '.join(known)}")
        if self.n < 1:
            raise ValueError(f"n: must be at least 1 (got {self.n})")
        if not self.generators:
            raise ValueError("at least one generator is required")


# The generation requests' columns: the frame is built with them, never inferred from the first rows
REQUEST_SCHEMA = {
    "request_id": pl.Utf8,
    "db_id": pl.Utf8,
    "generator": pl.Utf8,
    "subcategory": pl.Utf8,
    "group": pl.Utf8,
    "style": pl.Utf8,
    "difficulty": pl.Utf8,
    "sample_index": pl.Int64,
    "seed": pl.Int64,
}


def expand_grid(spec: GridSpec, db_id: str) -> list[dict]:
    """One request per grid cell and sample; ids are stable across runs."""
    spec.validate()
    rows = []
    for generator in spec.generators:
        subs = spec.subcategories
        if generator != PROGRAMMATIC and spec.llm_subcategories is not None:
            subs = tuple(s for s in spec.subcategories if s in spec.llm_subcategories)
        for sub in subs:
            for style in spec.styles:
                for difficulty in spec.difficulties:
                    for k in range(spec.n):
                        rows.append(
                            {
                                "request_id": stable_id("req", db_id, generator, sub, style, difficulty, k, spec.seed),
                                "db_id": db_id,
                                "generator": generator,
                                "subcategory": sub,
                                "group": SUBCATEGORY_BY_ID[sub].group.value,
                                "style": style,
                                "difficulty": difficulty,
                                "sample_index": k,
                                # a distinct seed per sample: the same prompt would otherwise hit the cache
                                "seed": spec.seed + k,
                            }
                        )
    return rows
