"""The process-wide council registry: one Council per (config file, role, call log), one call log per place.

Why a module of its own: councils and call logs are expensive to build (config parsing, a SQLite
connection) and must be shared by every stage and asset of a process, so identical requests hit one
cache and one single-flight table. Tests and config edits start over with :func:`reset_councils`.

    council = get_council("validators")          # members from $QUANDARY_COUNCIL_CONFIG or the default
    log = call_log()                             # $QUANDARY_HOME/llm_calls.sqlite, or PostgreSQL (distributed)
"""

import threading
from pathlib import Path

from resources.llm.config import load_council_config, resolve_council_path
from resources.llm.council import Council
from storage.llm_log import CallLogRules, call_log_location, open_call_log

_councils: dict[tuple, Council] = {}
_logs: dict[str, CallLogRules] = {}
_factory_lock = threading.Lock()


def call_log(path: str | Path | None = None) -> CallLogRules:
    """The shared call log for ``path``; by default the deployment's (storage.llm_log.open_call_log:
    PostgreSQL in distributed mode, else ``$QUANDARY_HOME/llm_calls.sqlite``)."""
    key = call_log_location(path)
    with _factory_lock:
        if key not in _logs:
            _logs[key] = open_call_log(path)
        return _logs[key]


def get_council(role: str, config_path: str | None = None, *, log_path: str | Path | None = None) -> Council:
    """The council for ``role`` from the configured file (or the embedded default), cached per process."""
    src = str(resolve_council_path(config_path) or "")
    log = call_log(log_path)
    key = (src, role, str(log.path))
    with _factory_lock:
        council = _councils.get(key)
    if council is None:
        council = Council.from_config(load_council_config(src or None), role, log)
        with _factory_lock:
            council = _councils.setdefault(key, council)
    return council


def reset_councils() -> None:
    """Forget cached councils and logs (tests, or after changing the config file)."""
    with _factory_lock:
        _councils.clear()
        for log in _logs.values():
            log.close()
        _logs.clear()
