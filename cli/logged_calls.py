"""Printing LLM calls from the call log, the same way in every audit command (whole prompts with
``--prompts``, both roles)."""


def print_logged_call(request_json, raw, *, width: int | None, prompts: bool, indent: str = "      ") -> None:
    """A logged LLM call as the audit commands show it: every prompt message (both roles, whole
    unless ``width`` cuts it) when ``prompts``, then the raw answer."""
    if prompts and request_json:
        for role, content in _messages(request_json):
            print(f"{indent}prompt [{role}]:")
            print(_indent(_cut(content, width), indent + "  "))
    if raw is not None:
        print(f"{indent}answer: {_cut(' '.join(str(raw).split()), width)}")


def _messages(request_json: str) -> list[tuple[str, str]]:
    """Every message of a logged request as (role, content): the system message too."""
    import json

    try:
        req = json.loads(request_json)
        msgs = req.get("messages", req) if isinstance(req, dict) else req
        return [(str(m.get("role", "?")), str(m.get("content", ""))) for m in msgs]
    except (ValueError, TypeError, KeyError, AttributeError):
        return [("raw", str(request_json))]


def _cut(text: str, width: int | None) -> str:
    return text if width is None or len(text) <= width else text[: max(1, width - 1)] + "…"


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.splitlines() or [""])
