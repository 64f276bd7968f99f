"""Phrasing: identifiers to words, inflection, style rendering (with hypothesis)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.abiss.programmatic.phrasing import (
    Ask,
    head_noun,
    humanize,
    identifier_words,
    plural,
    quote_value,
    render,
    singular,
    with_article,
)
from pipelines.abiss.taxonomy import STYLES


def test_identifier_words_examples():
    assert humanize("personal_email") == "personal email"
    assert humanize("SourceAirport") == "source airport"
    assert humanize("eye_colour_id") == "eye colour id"
    assert humanize("Official_ratings_(millions)") == "official ratings (millions)"
    assert humanize("AREA_CODE_STATE") == "area code state"
    assert identifier_words("GNPOld") == ["GNP", "old"]
    assert humanize("") == "value"


def test_head_nouns():
    assert head_noun("personal_email") == head_noun("institutional_email") == "email"
    assert head_noun("eye_colour_id") == head_noun("hair_colour_id") == "colour"
    assert head_noun("date_of_birth") == head_noun("date_arrived") == "date"
    assert head_noun("123") is None


def test_inflection():
    assert plural("student") == "students"
    assert plural("city") == "cities"
    assert plural("superhero") == "superheroes"
    assert plural("date of birth") == "dates of birth"
    assert plural("students") == "students"
    assert singular("students") == "student"
    assert singular("countries") == "country"
    assert singular("people") == "person"
    assert with_article("important course") == "an important course"
    assert quote_value("O'Brien") == "'O'Brien'" and quote_value(3.0) == "3"


def test_render_styles():
    rng = random.Random(0)
    ask = Ask("list", target="the titles of the courses whose semester is 'Fall'")
    outs = {s.id: render(ask, s.id, rng) for s in STYLES}
    assert outs["interrogative"].endswith("?")
    assert outs["concise"] == "titles of courses whose semester is 'Fall'"
    assert outs["imperative"].split()[0] in {"List", "Show", "Give", "Find", "Return", "Display"}
    assert len(set(outs.values())) == len(outs)
    count = Ask("count", subject="courses with semester 'Fall'")
    assert render(count, "interrogative", random.Random(1)).endswith("?")
    # several templates per style, not one fixed sentence
    assert len({render(ask, "formal", random.Random(i)) for i in range(20)}) >= 3


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_identifier_helpers_never_crash(name):
    words = identifier_words(name)
    assert all(isinstance(w, str) and w for w in words)
    text = humanize(name)
    assert isinstance(text, str) and text
    head_noun(name)
    plural(text)
    singular(text)
    with_article(text)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from([s.id for s in STYLES] + ["unknown"]),
    st.sampled_from(["list", "count", "which"]),
    st.text(max_size=60),
    st.integers(0, 10_000),
)
def test_render_never_crashes(style, kind, phrase, seed):
    out = render(Ask(kind, target=phrase, subject=phrase), style, random.Random(seed))
    assert isinstance(out, str)
