"""Shared cores every paper package may use: chat prompts and their versions (``prompting``), a
streaming JSON-list reader (``jsonstream``), cluster-bootstrap statistics (``stats``). They never
import a paper package (import contract); SQL helpers are their own shared core, ``pipelines.sqltools``."""
