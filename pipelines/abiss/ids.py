"""Stable ids derived from content and parents (so reruns produce the same ids)."""

import hashlib
import json

# one encoder, built once: a `quandary import` makes three ids per record (issue 23 item 9)
_encode = json.JSONEncoder(sort_keys=True, default=str, ensure_ascii=False).encode


def stable_id(prefix: str, *parts) -> str:
    payload = _encode(parts)
    return f"{prefix}_{hashlib.sha256(payload.encode()).hexdigest()[:16]}"
