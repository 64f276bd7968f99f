"""The LLM council layer: every LLM role in Quandary goes through here.

Public API::

    from resources.llm import get_council, Council, CallResult, load_council_config

    council = get_council("validators")               # members from $QUANDARY_COUNCIL_CONFIG or default
    council.ask_all(messages, OutputModel, tag=dict(stage=..., candidate_id=...)) -> list[CallResult]
    council.ask_many(member_name, list_of_messages, OutputModel, tags=[...])   -> list[CallResult]
    council.vote(messages, OutputModel, extract=lambda p: p.ok, rule="strict_majority", tag=...)
        -> VoteOutcome(decision, votes=[(member, vote|None, call_id, parsed_ok)], calls_made, calls_saved)
    # async twins: aask, aask_all, aask_many, avote, avote_many

Modules: ``config`` (members and councils), ``client`` (the only litellm caller: structured, cached,
retried), ``parsing`` (robust JSON extraction), ``council`` (batching, concurrency, votes),
``registry`` (``get_council``, ``call_log``: one council and one call log per process), ``runtime``
(the background event loop, ``run_sync``, ``call_threads``), ``embedded`` (the local SmolLM2 server).
The Dagster resource is ``assets.shared.resources.CouncilResource``. The call cache and log is
``storage.llm_log``; vote rules are ``resources.llm.votes``.
"""

import os

# litellm reads these at import time; set them before anything can import it (offline, no cost-map fetch).
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["LITELLM_OFFLINE_MODE"] = "true"

from resources.llm.client import CallResult  # noqa: E402
from resources.llm.config import CouncilConfig, Member, load_council_config  # noqa: E402
from resources.llm.council import Council, MemberVote, VoteOutcome  # noqa: E402
from resources.llm.registry import call_log, get_council, reset_councils  # noqa: E402

__all__ = [
    "CallResult",
    "Council",
    "CouncilConfig",
    "Member",
    "MemberVote",
    "VoteOutcome",
    "call_log",
    "get_council",
    "load_council_config",
    "reset_councils",
]
