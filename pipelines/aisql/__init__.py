"""AI-operator SQL (The Stochastic Shift): run AI.IF / NLfilter queries on DuckDB and judge them with
the multilayered evaluation. Plain Python, no Dagster.

Modules: ``scenarios`` (SemBench → label-free DuckDB + label file), ``rewrite`` (BigQuery → DuckDB),
``operators`` (UDFs, label oracle, council backend, budgeted memo), ``execute`` (one query through
the safe executor), ``splitter`` (AST + LLM splitter, call alignment), ``diffs`` and
``split_execution`` (six executions + evidence), ``prompts``, ``methods`` (EX, LLM-SQL-Solver,
autorater), ``variants`` and ``evalset`` (labelled pairs), ``metrics`` (Table 1), ``pipeline``
(orchestration, sweep, chart).
"""
