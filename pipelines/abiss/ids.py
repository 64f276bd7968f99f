"""Stable ids derived from content and parents (so reruns produce the same ids)."""

import hashlib
import json


def stable_id(prefix: str, *parts) -> str:
    payload = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
    return f"{prefix}_{hashlib.sha256(payload.encode()).hexdigest()[:16]}"
