"""AmbiTab (job 3, first half): six ambiguous text-to-SQL corpora in one leakage-aware task record.

``record`` defines the record and its three projections (agent / oracle / verifier); one module
per conversion turns a source corpus into records: ``ambrosia``, ``ambiqt``, ``taco``, ``ewbird``
(corpus ``ew_bird``), ``bird_interact``, ``bird``; ``corpora`` is their registry, ``export`` reads
materialised records back. Plain Python, no Dagster import.
"""
