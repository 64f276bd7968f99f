"""Auditing someone else's benchmark (issue 32): Spider / BIRD JSON plus its database folder, every
gold item checked, suspect items reported by error type (Jin et al. 2026: E1 the SQL does not match
the question's logic, E2 not the schema or data, E3 wrong or missing evidence, E4 the question is
ambiguous).

Modules, one job each: ``records`` (reading the file, one-line refusals), ``checks`` (the
deterministic checks, no LLM), ``audit`` (one database's items through the checks, rows and
rates), ``review`` (export of flagged items for a reviewer, and the corrected file).
"""
