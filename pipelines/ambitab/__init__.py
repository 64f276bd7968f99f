"""AmbiTab (job 3, first half): six ambiguous text-to-SQL corpora in one leakage-aware task record.

``record`` defines the record and its three projections; one module per conversion (ambrosia,
ambiqt, taco, ew_bird, bird_interact, bird) turns a source corpus into records. Plain Python, no
Dagster import.
"""
