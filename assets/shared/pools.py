"""Concurrency pools keyed by LLM endpoint (issue 21 part 4).

Every asset whose step sends LLM requests declares ``pool=LLM_POOL``. Dagster then lets at most the
pool's limit of such steps run at once across all runs and all nodes of the instance (the limit
lives in the instance: ``concurrency.pools.default_limit`` in deploy/distributed/dagster.yaml, or
``dagster instance concurrency set <pool> <n>``). Without a limit — the one-machine default
instance — a pool is unlimited and changes nothing.

The name is ``llm-<endpoint>[+<endpoint>…]``: the distinct endpoints (``host_port``, or ``embedded``,
or the provider for hosted APIs) of the council configured for this process
(``$QUANDARY_COUNCIL_CONFIG``), so runs that share a vLLM server share one pool and runs on different
servers do not wait for each other. ``$QUANDARY_LLM_POOL`` names the pool outright (e.g. one pool
per node's local server). It is fixed when the definitions load: a council file given later in a
run's config does not move the run to another pool.

How it composes with the council's ``max_in_flight`` (per member, per process): requests in flight
at one endpoint ≤ pool limit × Σ ``max_in_flight`` of the members on that endpoint (each step is one
process running at most ``max_in_flight`` requests per member).
"""

import os
import re

POOL_ENV = "QUANDARY_LLM_POOL"


def _endpoint_key(member) -> str:
    from urllib.parse import urlparse

    if member.is_embedded:
        return "embedded"
    if member.api_base:
        url = urlparse(member.api_base)
        host = url.hostname or member.api_base
        return f"{host}_{url.port}" if url.port else host
    return member.model.split("/", 1)[0]  # a hosted provider (openai, anthropic, ...)


def _clean(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", name)[:200]


def llm_pool() -> str:
    """The pool name for this process's LLM-using steps."""
    override = os.environ.get(POOL_ENV, "").strip()
    if override:
        return _clean(override)
    try:
        from resources.llm.config import load_council_config

        members = load_council_config().members.values()
        endpoints = sorted({_endpoint_key(m) for m in members})
    except Exception:  # a broken council file is reported by preflight, not by loading the definitions
        endpoints = []
    return _clean("llm-" + "+".join(endpoints)) if endpoints else "llm"


LLM_POOL = llm_pool()
