"""Quandary domain logic: plain Python, no Dagster imports (except definitions.py)."""
