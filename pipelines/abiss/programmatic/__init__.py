"""Programmatic candidate generator (ABISS §3 without an LLM): schema- and data-driven NLQ objects.

Modules: ``generator`` (``generate_candidates``: builders → verification → records),
``schema_analysis`` (what a database offers), ``builders`` (one per subcategory family),
``phrasing`` (question wording). See ``generator``'s docstring for the verification rules.
"""

from pipelines.abiss.programmatic.generator import (
    GENERATOR,
    Candidate,
    GenerationReport,
    difficulty_of,
    generate_candidates,
)

__all__ = ["Candidate", "GenerationReport", "generate_candidates", "difficulty_of", "GENERATOR"]
