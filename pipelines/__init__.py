"""Quandary domain logic: plain Python, no Dagster imports (import contract).

One package per paper (``abiss``, ``interaction``, ``ambitab``, ``aisql``) and two shared cores
that never import a paper package: ``core`` (prompting, JSON streaming, statistics) and
``sqltools`` (SQL parsing, execution results, comparison)."""
