"""Candidate builders, one module per family; importing this package registers them all.

* :mod:`.answerable` — answerable (filters, aggregates, top-k, FK joins) and
  answerable_with_evidence (a derived concept defined in the evidence);
* :mod:`.structural` — scope_ambiguity (collective vs distributive "each") and
  attachment_ambiguity (a modifier attached to one conjunct or to all);
* :mod:`.semantic` — lexical_overlap (columns sharing a head noun) and entity_ambiguity
  (a same-named column in two joinable tables);
* :mod:`.knowledge` — lexical_vagueness (a vague adjective, two thresholds),
  missing_user_knowledge ("my X", two user values) and conflicting_knowledge (two evidences);
* :mod:`.unanswerable` — missing_entity, missing_relationship, missing_external_knowledge and
  improper_question, each with feedback and an absence claim checked against the schema.
"""

from pipelines.abiss.programmatic.builders import answerable, knowledge, semantic, structural, unanswerable  # noqa: F401
from pipelines.abiss.programmatic.builders.base import BUILDERS

__all__ = ["BUILDERS"]
