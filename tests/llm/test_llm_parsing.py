"""Robust structured-output parsing: think tags, fences, prose, repair, enum case; raw text kept."""

import json
from enum import Enum
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from resources.llm.parsing import balanced_objects, parse_structured, repair_json


class Color(str, Enum):
    red = "red"
    green = "green"


class Verdict(BaseModel):
    verdict: Literal["yes", "no"]
    reason: str
    confidence: float = 0.5


class Nested(BaseModel):
    color: Color
    tags: list[str] = []
    verdict: Verdict | None = None


@pytest.mark.parametrize(
    "text, verdict",
    [
        ('{"verdict": "yes", "reason": "r"}', "yes"),
        ('<think>maybe {"verdict": "no", "reason": "draft"}</think>\n{"verdict": "yes", "reason": "final"}', "yes"),
        ('Here you go:\n```json\n{"verdict": "no", "reason": "r"}\n```\nHope it helps', "no"),
        ('First draft {"verdict": "no", "reason": "a"} and final answer {"verdict": "yes", "reason": "b"}', "yes"),
        ('{"verdict": "YES", "reason": "shouty"}', "yes"),
        ('{"verdict": " No ", "reason": "spaces"}', "no"),
        ("{'verdict': 'yes', 'reason': 'single quotes'}", "yes"),
        ('{"verdict": "yes", "reason": "trailing",}', "yes"),
        ('{"verdict": "yes", "reason": "truncated', "yes"),
        ('{"verdict": "no", "reason": "r", "confidence": 0.9', "no"),
        ('{verdict: "yes", reason: "unquoted keys"}', "yes"),
        ('Answer: {"verdict": "yes", "reason": "don\'t stop", "confidence": 1}', "yes"),
    ],
)
def test_parses_and_repairs(text, verdict):
    res = parse_structured(text, Verdict)
    assert res.ok, res.error
    assert res.value.verdict == verdict
    assert res.raw_text == text
    assert json.loads(res.json_text)["verdict"] == verdict


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("", "empty"),
        ("   \n ", "empty"),
        ("I think the answer is yes.", "no JSON object"),
        ('{"verdict": "maybe", "reason": "r"}', "verdict"),
        ('{"reason": "missing verdict"}', "verdict"),
        ("[1, 2, 3]", "JSON object"),
    ],
)
def test_failures_are_typed_and_keep_raw(text, fragment):
    res = parse_structured(text, Verdict)
    assert not res.ok and res.value is None
    assert fragment in res.error
    assert res.raw_text == text


def test_none_input_is_a_failure_not_an_exception():
    res = parse_structured(None, Verdict)
    assert not res.ok and res.error == "empty output" and res.raw_text == ""


def test_nested_enums_case_insensitive():
    text = '{"color": "RED", "tags": ["a"], "verdict": {"verdict": "No", "reason": "x"}}'
    res = parse_structured(text, Nested)
    assert res.ok, res.error
    assert res.value.color is Color.red and res.value.verdict.verdict == "no"


def test_balanced_objects_ignores_braces_in_strings():
    text = 'a {"x": "}{"} b {"y": {"z": 1}} c {'
    assert balanced_objects(text) == ['{"x": "}{"}', '{"y": {"z": 1}}']


def test_repair_closes_everything():
    assert json.loads(repair_json('{"a": [1, 2, {"b": "c')) == {"a": [1, 2, {"b": "c"}]}
    assert json.loads(repair_json('{"a": 1, "b":')) == {"a": 1}
    assert json.loads(repair_json("{'a': True, 'b': None}")) == {"a": True, "b": None}


# --- fuzzing ------------------------------------------------------------------------------

valid = st.builds(
    lambda v, r, c: {"verdict": v, "reason": r, "confidence": c},
    st.sampled_from(["yes", "no"]),
    st.text(max_size=30),
    st.floats(0, 1, allow_nan=False),
)


def _case_variant(draw_case, s):
    return s.upper() if draw_case == "upper" else s.title() if draw_case == "title" else s


@settings(max_examples=300, deadline=None)
@given(
    obj=valid,
    prefix=st.text(max_size=40),
    suffix=st.text(max_size=40),
    think=st.booleans(),
    fence=st.booleans(),
    case=st.sampled_from(["lower", "upper", "title"]),
)
def test_fuzz_wrapped_valid_json_always_parses(obj, prefix, suffix, think, fence, case):
    obj = dict(obj, verdict=_case_variant(case, obj["verdict"]))
    body = json.dumps(obj)
    if fence:
        body = f"```json\n{body}\n```"
    # Prose must not itself contain braces/fences/think tags, or it would be a different reply.
    clean = lambda s: "".join(ch for ch in s if ch not in "{}`<>'\"")  # noqa: E731
    text = ("<think>" + clean(prefix) + "</think>" if think else clean(prefix)) + "\n" + body + "\n" + clean(suffix)
    res = parse_structured(text, Verdict)
    assert res.ok, (text, res.error)
    assert res.value.verdict == obj["verdict"].lower()
    assert res.value.reason == obj["reason"]
    assert res.raw_text == text


@settings(max_examples=300, deadline=None)
@given(obj=valid, cut=st.integers(min_value=1, max_value=200))
def test_fuzz_truncated_json_parses_or_fails_cleanly(obj, cut):
    full = json.dumps(obj)
    text = full[: min(cut, len(full))]
    res = parse_structured(text, Verdict)  # must not raise
    assert res.raw_text == text
    if res.ok:
        assert res.value.verdict == obj["verdict"]
    else:
        assert res.error and res.value is None


@settings(max_examples=500, deadline=None)
@given(text=st.text(max_size=300))
def test_fuzz_arbitrary_text_never_raises(text):
    res = parse_structured(text, Verdict)
    assert res.raw_text == text
    assert res.ok == (res.value is not None)
    assert res.ok or res.error


@settings(max_examples=200, deadline=None)
@given(obj=valid, drop=st.sampled_from(["verdict", "reason"]))
def test_fuzz_missing_required_field_is_a_failure(obj, drop):
    obj = {k: v for k, v in obj.items() if k != drop}
    res = parse_structured(json.dumps(obj), Verdict)
    assert not res.ok and drop in res.error
