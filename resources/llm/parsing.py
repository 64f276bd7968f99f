"""Robust parsing of an LLM reply into a pydantic model.

``parse_structured(text, Model) -> ParseResult`` never raises. It tries, in order:

1. the text after the last ``</think>`` (reasoning models put their answer there);
2. the contents of fenced code blocks (last first), then the whole text, then every balanced
   top-level JSON object in the text (last first: models often restate a draft before the answer);
3. for each candidate, ``json.loads`` and then a light repair (trailing commas, single quotes,
   Python literals, unclosed strings/brackets/braces);
4. validation against the model, after mapping enum / ``Literal`` string values case-insensitively
   onto their canonical spelling.

The raw text is always kept on the result, ok or not, so a failure can be audited and shown back to
the model in a repair call.
"""

import functools
import json
import re
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

T = TypeVar("T", bound=BaseModel)

_THINK_CLOSE = re.compile(r"</think(?:ing)?>", re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*(?:json|JSON|javascript|js)?[ \t]*\n?(.*?)(?:```|$)", re.DOTALL)


@dataclass(frozen=True)
class ParseResult(Generic[T]):
    ok: bool
    value: T | None
    raw_text: str
    error: str | None = None
    json_text: str | None = None  # the JSON that validated (after repair), for the log
    repaired: bool = False  # True when the JSON needed textual repair


@functools.lru_cache(maxsize=512)
def output_schema(model: type[BaseModel]) -> dict:
    """``model``'s JSON schema, built once per class (pydantic builds it anew on every call, ~1 ms;
    a request needed it four times). Shared: callers must not mutate it."""
    return model.model_json_schema()


def parse_structured(text: str | None, model: type[T]) -> ParseResult[T]:
    raw = text if isinstance(text, str) else ""
    if not raw.strip():
        return ParseResult(False, None, raw, "empty output")
    body = _after_think(raw)
    errors: list[str] = []
    candidates = _candidates(body)

    def attempts():  # lazily: a well-formed answer (the usual case) never pays for the repairs
        yield from ((c, False) for c in candidates)
        tail = _unclosed_tail(body)
        # Pass 2: repaired (a truncated final object goes first).
        yield from ((repair_json(c), True) for c in ([tail] if tail else []) + candidates)

    for json_text, repaired in attempts():
        if json_text is None:
            continue
        try:
            data = json.loads(json_text)
        except (ValueError, RecursionError):
            continue
        if not isinstance(data, dict):
            errors.append(f"expected a JSON object, got {type(data).__name__}")
            continue
        data = _normalize_enums(data, output_schema(model))
        try:
            value = model.model_validate(data)
        except ValidationError as e:
            errors.append(_short_validation_error(e))
            continue
        return ParseResult(True, value, raw, None, json.dumps(value.model_dump(mode="json")), repaired)
    if errors:
        return ParseResult(False, None, raw, f"JSON found but invalid: {errors[-1]}")
    return ParseResult(False, None, raw, "no JSON object found in output")


def _after_think(text: str) -> str:
    parts = _THINK_CLOSE.split(text)
    tail = parts[-1]
    # A reply that is only a think block (no answer after it) still deserves a look inside.
    return tail if tail.strip() else text


def _candidates(text: str) -> list[str]:
    """Places the answer may be, most likely first: fenced blocks and balanced objects, last first."""
    out: list[str] = []
    out.extend(reversed([m.group(1) for m in _FENCE.finditer(text)]))
    out.extend(reversed(balanced_objects(text)))
    out.append(text.strip())
    seen: set[str] = set()
    return [c for c in out if c.strip() and not (c in seen or seen.add(c))]


def balanced_objects(text: str) -> list[str]:
    """Every top-level ``{...}`` span with balanced braces (string-aware), in order of appearance."""
    spans, depth, start, in_str, esc, quote = [], 0, -1, False, False, ""
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == quote:
                in_str = False
            continue
        if ch == '"' or (ch == "'" and depth > 0 and _is_quote_start(text, i)):
            in_str, quote = True, ch
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append(text[start : i + 1])
    return spans


def _is_quote_start(text: str, i: int) -> bool:
    # Single quotes open a string only in JSON-ish positions, not in prose apostrophes ("don't").
    prev = text[:i].rstrip()[-1:] if text[:i].strip() else ""
    return prev in ("{", "[", ",", ":")


def _unclosed_tail(text: str) -> str | None:
    """The text from the last top-level ``{`` that is never closed (truncated output)."""
    depth, start, in_str, esc = 0, -1, False, False
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
    return text[start:] if depth > 0 and start >= 0 else None


_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}


def repair_json(text: str) -> str | None:
    """Light, conservative textual repair of almost-JSON. Returns None if nothing to try."""
    s = text.strip()
    start = s.find("{")
    if start < 0:
        return None
    s = s[start:]
    out: list[str] = []
    stack: list[str] = []
    in_str, esc, quote = False, False, '"'
    i = 0
    while i < len(s):
        ch = s[i]
        if in_str:
            if esc:
                esc = False
                out.append(ch)
            elif ch == "\\":
                esc = True
                out.append(ch)
            elif ch == quote:
                in_str = False
                out.append('"')
            elif ch == '"' and quote == "'":
                out.append('\\"')  # a double quote inside a single-quoted string
            elif ch == "\n":
                out.append("\\n")
            else:
                out.append(ch)
            i += 1
            continue
        if ch in "\"'":
            in_str, quote = True, ch
            out.append('"')
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
            out.append(ch)
        elif ch in "}]":
            _drop_trailing_comma(out)
            if stack:
                stack.pop()
            out.append(ch)
            if not stack:
                break  # ignore anything after the object closes
        elif ch.isalpha() or ch == "_":
            j = i
            while j < len(s) and (s[j].isalnum() or s[j] == "_"):
                j += 1
            word = s[i:j]
            nxt = s[j:].lstrip()[:1]
            if nxt == ":" and word not in ("true", "false", "null"):
                out.append(json.dumps(word))  # unquoted key
            else:
                out.append(_PY_LITERALS.get(word, word))
            i = j
            continue
        else:
            out.append(ch)
        i += 1
    if in_str:
        out.append('"')
    _drop_dangling(out)
    while stack:
        _drop_trailing_comma(out)
        out.append(stack.pop())
    return "".join(out)


def _drop_trailing_comma(out: list[str]) -> None:
    j = len(out) - 1
    while j >= 0 and out[j].isspace():
        j -= 1
    if j >= 0 and out[j] == ",":
        del out[j:]


def _drop_dangling(out: list[str]) -> None:
    """Truncated output may end with a key and colon but no value: drop that pair."""
    text = "".join(out).rstrip()
    m = re.search(r',?\s*"[^"\\]*"\s*:\s*$', text)
    if m:
        text = text[: m.start()]
    out[:] = [text]


def _normalize_enums(data: Any, schema: dict, defs: dict | None = None) -> Any:
    """Map string values onto enum members case-insensitively (e.g. "YES" → "yes")."""
    defs = defs if defs is not None else schema.get("$defs", {})
    schema = _resolve(schema, defs)
    if isinstance(data, (dict, list)) and ("anyOf" in schema or "oneOf" in schema):
        # Optional[Model] and unions: use the first object/array branch that fits the data's shape.
        key = "properties" if isinstance(data, dict) else "items"
        for sub in schema.get("anyOf", []) + schema.get("oneOf", []):
            sub = _resolve(sub, defs)
            if key in sub:
                schema = sub
                break
    if isinstance(data, dict):
        props = schema.get("properties", {})
        return {k: (_normalize_enums(v, props[k], defs) if k in props else v) for k, v in data.items()}
    if isinstance(data, list) and isinstance(schema.get("items"), dict):
        return [_normalize_enums(v, schema["items"], defs) for v in data]
    if isinstance(data, str):
        options: list = list(schema.get("enum", []))
        if "const" in schema:
            options.append(schema["const"])
        for sub in schema.get("anyOf", []) + schema.get("oneOf", []):
            sub = _resolve(sub, defs)
            options.extend(sub.get("enum", []))
            if "const" in sub:
                options.append(sub["const"])
        if data not in options:
            folded = data.strip().casefold()
            for opt in options:
                if isinstance(opt, str) and opt.casefold() == folded:
                    return opt
    return data


def _resolve(schema: dict, defs: dict) -> dict:
    ref = schema.get("$ref") if isinstance(schema, dict) else None
    if ref and ref.startswith("#/$defs/"):
        return defs.get(ref.split("/")[-1], schema)
    if isinstance(schema, dict) and len(schema.get("allOf", [])) == 1:
        return _resolve(schema["allOf"][0], defs)
    return schema if isinstance(schema, dict) else {}


def _short_validation_error(e: ValidationError) -> str:
    parts = []
    for err in e.errors()[:5]:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(root)"
        parts.append(f"{loc}: {err.get('msg')}")
    return "; ".join(parts)
