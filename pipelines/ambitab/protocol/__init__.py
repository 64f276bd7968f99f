"""AmbiTab evaluation: the ask-then-solve protocol, oracles, askers, solver, verifier, metrics,
leakage diagnostics and the training objective (plain Python, no Dagster)."""
