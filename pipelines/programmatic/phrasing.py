"""Natural-language rendering for the programmatic generator (no LLM).

Two jobs:

* turning schema identifiers into words — ``personal_email`` → "personal email",
  ``SourceAirport`` → "source airport", ``Official_ratings_(millions)`` → "official ratings
  (millions)", ``eye_colour_id`` → "eye colour id" — plus naive singular/plural forms;
* rendering a question *request* (what is asked, about which entities, under which
  condition) in one of the taxonomy's styles (``formal``, ``colloquial``, ``imperative``,
  ``interrogative``, ``descriptive``, ``concise``), choosing among several templates per style
  with the caller's seeded ``random.Random`` so the same seed gives the same sentence.

Every function accepts arbitrary strings and never raises on odd identifiers (empty names,
digits only, punctuation, non-ASCII); the hypothesis tests check this.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

# ------------------------------------------------------------------------------ identifiers

_ACRONYM_KEEP = re.compile(r"^[A-Z]{2,5}[0-9]*$")
_WORD_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[^\W\dA-Z_]+|[A-Z]+|[0-9]+")


def identifier_words(name: str) -> list[str]:
    """Split an identifier into lower-case words (short acronyms such as GNP keep their case).

    ``personal_email`` → ["personal", "email"]; ``SourceAirport`` → ["source", "airport"];
    ``StuID`` → ["stu", "ID"]; ``18_49_Rating_Share`` → ["18", "49", "rating", "share"];
    ``Official_ratings_(millions)`` → ["official", "ratings", "(millions)"].
    """
    words: list[str] = []
    shouting = not re.search(r"[a-z]", str(name))  # AREA_CODE_STATE: no acronyms, just caps
    for chunk in re.split(r"[\s_\-./]+", str(name)):
        if not chunk:
            continue
        paren = re.fullmatch(r"\((.*)\)", chunk)
        if paren:
            inner = " ".join(identifier_words(paren.group(1)))
            if inner:
                words.append(f"({inner})")
            continue
        for part in _WORD_PARTS.findall(chunk):
            if part.lower() == "id":
                words.append("id")
            elif _ACRONYM_KEEP.match(part) and not shouting:
                words.append(part)
            else:
                words.append(part.lower())
    return words


def humanize(name: str) -> str:
    """Identifier → readable words: ``personal_email`` → "personal email"."""
    words = identifier_words(name)
    if not words:
        text = str(name).strip()
        return text if text else "value"
    return " ".join(words)


_UNITS = {"cm", "mm", "km", "kg", "g", "lb", "lbs", "usd", "eur", "pct", "m", "(millions)", "(cm)", "(kg)"}


def column_words(name: str) -> str:
    """A column as words for questions, without a trailing unit: ``height_cm`` → "height"."""
    words = identifier_words(name)
    while len(words) > 1 and words[-1].lower() in _UNITS:
        words = words[:-1]
    return " ".join(words) if words else humanize(name)


def head_noun(name: str) -> str | None:
    """The noun an identifier is 'about': ``personal_email`` → email, ``date_of_birth`` → date.

    Rules: the word before ``of`` when present (date_of_birth); a leading ``date``/``time``
    (date_arrived); otherwise the last word. A trailing ``id`` is dropped first
    (``eye_colour_id`` → colour). Returns None for identifiers without letters.
    """
    words = [w.lower() for w in identifier_words(name) if w.isalpha()]
    if words and words[-1] == "id" and len(words) > 1:
        words = words[:-1]
    if not words:
        return None
    if "of" in words[1:]:
        return words[words.index("of", 1) - 1]
    if words[0] in {"date", "time", "num", "number"} and len(words) > 1:
        return words[0]
    return words[-1]


_IRREGULAR_PLURAL = {
    "person": "people", "man": "men", "woman": "women", "child": "children", "staff": "staff",
    "series": "series", "data": "data", "info": "info", "information": "information",
    "media": "media", "criteria": "criteria", "news": "news", "species": "species",
}
_IRREGULAR_SINGULAR = {v: k for k, v in _IRREGULAR_PLURAL.items()}
_NO_CHANGE = {"series", "species", "staff", "data", "info", "information", "news", "media"}


def _inflect_last(phrase: str, fn) -> str:
    if " of " in phrase:  # "date of birth" → "dates of birth"
        head, _, tail = phrase.partition(" of ")
        return f"{_inflect_last(head, fn)} of {tail}"
    parts = phrase.split(" ")
    for i in range(len(parts) - 1, -1, -1):
        if re.search(r"[A-Za-z]", parts[i]) and not parts[i].startswith("("):
            parts[i] = fn(parts[i])
            break
    return " ".join(parts)


def _plural_word(w: str) -> str:
    low = w.lower()
    if low in _NO_CHANGE or low in _IRREGULAR_SINGULAR or w.isupper():
        return w
    if low in _IRREGULAR_PLURAL:
        return _IRREGULAR_PLURAL[low]
    if low.endswith(("ss", "sh", "ch", "x", "z", "hero", "potato", "tomato", "echo", "veto")):
        return w + "es"
    if low.endswith("s"):
        return w  # probably already plural
    if low.endswith("y") and len(low) > 1 and low[-2] not in "aeiou":
        return w[:-1] + "ies"
    return w + "s"


def _singular_word(w: str) -> str:
    low = w.lower()
    if low in _NO_CHANGE or w.isupper():
        return w
    if low in _IRREGULAR_SINGULAR:
        return _IRREGULAR_SINGULAR[low]
    if low.endswith("ies") and len(low) > 3:
        return w[:-3] + "y"
    if low.endswith(("sses", "shes", "ches", "xes", "zes", "heroes", "potatoes", "tomatoes", "echoes")):
        return w[:-2]
    if low.endswith("ss") or low.endswith("us") or low.endswith("is"):
        return w
    if low.endswith("s") and len(low) > 1:
        return w[:-1]
    return w


def plural(phrase: str) -> str:
    """Naive plural of the last word of a phrase: "student course" → "student courses"."""
    return _inflect_last(phrase, _plural_word) if phrase else phrase


def singular(phrase: str) -> str:
    """Naive singular of the last word of a phrase: "students" → "student"."""
    return _inflect_last(phrase, _singular_word) if phrase else phrase


def table_plural(name: str) -> str:
    return plural(humanize(name))


def table_singular(name: str) -> str:
    return singular(humanize(name))


def article(phrase: str) -> str:
    """'a' or 'an' for a phrase (by its first letter; good enough for generated concepts)."""
    first = phrase.strip()[:1].lower()
    return "an" if first in "aeiou" and first else "a"


def with_article(phrase: str) -> str:
    return f"{article(phrase)} {phrase}"


def quote_value(value) -> str:
    """A data value as the question shows it: strings in single quotes, numbers bare."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return format_number(value)
    if isinstance(value, int):
        return str(value)
    text = " ".join(str(value).split())
    return f"'{text}'"


def format_number(value) -> str:
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return f"{value:.6g}" if abs(value) < 1e6 else f"{value:,.2f}"
    return str(value)


# ------------------------------------------------------------------------------ requests


@dataclass(frozen=True)
class Ask:
    """What a question asks for, independent of style.

    kind:
      * ``list``  — ``target`` is a definite noun phrase ("the titles of the courses ...");
      * ``count`` — ``subject`` is a plural noun phrase ("courses whose semester is 'Fall'");
      * ``which`` — ``subject`` is a plural noun phrase to pick ("departments with a large budget").
    ``bare`` is the concise form (keywords, no articles); derived from the others when empty.
    """

    kind: str
    target: str = ""
    subject: str = ""
    bare: str = ""


def _strip_articles(text: str) -> str:
    out = re.sub(r"\b(the|a|an)\s+", "", text, flags=re.IGNORECASE)
    return " ".join(out.split())


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text else text


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


def _list_templates(style: str, np: str) -> list[str]:
    t = {
        "imperative": [f"List {np}.", f"Show {np}.", f"Give me {np}.", f"Find {np}.", f"Return {np}.", f"Display {np}."],
        "interrogative": [f"What are {np}?", f"Can you tell me {np}?", f"Which values make up {np}?", f"Could you list {np}?"],
        "formal": [
            f"Please provide {np}.",
            f"Kindly retrieve {np}.",
            f"I would like to obtain {np}, please.",
            f"Could you please provide {np}?",
        ],
        "colloquial": [
            f"hey, can you pull up {_lower_first(np)}?",
            f"what're {_lower_first(np)}?",
            f"need {_lower_first(np)}, thanks",
            f"can u show me {_lower_first(np)}?",
            f"so what are {_lower_first(np)}?",
        ],
        "descriptive": [
            f"I need {np}.",
            f"I am looking for {np}.",
            f"I would like to see {np}.",
            f"The information I need is {np}.",
        ],
    }
    return t.get(style, t["imperative"])


def _count_templates(style: str, subj: str) -> list[str]:
    t = {
        "imperative": [f"Count the {subj}.", f"Give me the number of {subj}.", f"Show how many {subj} there are.", f"Return the number of {subj}."],
        "interrogative": [f"How many {subj} are there?", f"What is the number of {subj}?", f"How many {subj} exist?"],
        "formal": [f"Please provide the total number of {subj}.", f"Could you please state how many {subj} there are?", f"Kindly report the number of {subj}."],
        "colloquial": [f"how many {subj} are there?", f"hey, how many {subj} we got?", f"quick one: number of {subj}?", f"so how many {subj} are there, roughly... exactly?"],
        "descriptive": [f"I need the number of {subj}.", f"I am looking for the count of {subj}.", f"I would like to know how many {subj} there are."],
    }
    return t.get(style, t["imperative"])


def _which_templates(style: str, subj: str) -> list[str]:
    t = {
        "imperative": [f"List the {subj}.", f"Show the {subj}.", f"Find the {subj}.", f"Give me the {subj}."],
        "interrogative": [f"Which are the {subj}?", f"What are the {subj}?", f"Who or what are the {subj}?"],
        "formal": [f"Please list the {subj}.", f"Kindly identify the {subj}.", f"Could you please provide the {subj}?"],
        "colloquial": [f"which ones are the {subj}?", f"hey, who are the {subj}?", f"show me the {subj} real quick", f"gimme the {subj}"],
        "descriptive": [f"I need the {subj}.", f"I am looking for the {subj}.", f"I would like a list of the {subj}."],
    }
    return t.get(style, t["imperative"])


def render(ask: Ask, style: str, rng: random.Random) -> str:
    """The question text for ``ask`` in ``style``; the template is drawn from ``rng``."""
    style = style if style in {"formal", "colloquial", "imperative", "interrogative", "descriptive", "concise"} else "imperative"
    if style == "concise":
        if ask.bare:
            return ask.bare
        if ask.kind == "count":
            return rng.choice([f"number of {_strip_articles(ask.subject)}", f"count of {_strip_articles(ask.subject)}", f"{_strip_articles(ask.subject)}: count"])
        if ask.kind == "which":
            return _strip_articles(ask.subject)
        return _strip_articles(ask.target)
    if ask.kind == "count":
        return _cap(rng.choice(_count_templates(style, ask.subject)))
    if ask.kind == "which":
        return _cap(rng.choice(_which_templates(style, ask.subject)))
    return _cap(rng.choice(_list_templates(style, ask.target)))


def render_free(variants: dict[str, list[str]], style: str, rng: random.Random) -> str:
    """Pick a hand-written sentence for ``style`` (falls back to imperative, then any)."""
    options = variants.get(style) or variants.get("imperative") or next(iter(variants.values()))
    return rng.choice(options)
