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

import functools
import random
import re
from dataclasses import dataclass

from pipelines.sqltools.identifiers import (  # noqa: F401  (re-exported for callers)
    ABBREVIATIONS,
    agent_noun,
    identifier_words,
)


def humanize(name: str) -> str:
    """Identifier → readable words: ``personal_email`` → "personal email"."""
    words = identifier_words(name)
    if not words:
        text = str(name).strip()
        return text if text else "value"
    return " ".join(words)


_UNITS = {
    "cm",
    "mm",
    "km",
    "kg",
    "g",
    "lb",
    "lbs",
    "usd",
    "eur",
    "pct",
    "m",
    "(millions)",
    "(cm)",
    "(kg)",
    "millions",
    "thousands",
    "(thousands)",
}


# Unit words a column name carries after its measure (``mean_temperature_f``,
# ``precipitation_inches``, ``wind_speed_mph``): the question names the measure, not the unit.
_UNIT_TAILS = _UNITS | {
    "f", "c", "k", "inches", "inch", "in", "feet", "ft", "miles", "mi", "mph", "kmh", "kph", "sec", "secs",
    "mins", "hrs", "meters", "metres", "kilometers", "kilometres", "pounds", "grams", "dollars", "usd",
}  # fmt: skip
# Abbreviated coordinates: "a large long" is no English, "the longitude" is.
UNIT_WORDS = frozenset(w.strip("()") for w in _UNIT_TAILS)
_COORDINATES = {"lat": "latitude", "lng": "longitude", "lon": "longitude", "long": "longitude"}
_PER = {"day": "daily", "week": "weekly", "month": "monthly", "year": "yearly", "hour": "hourly"}
_PREPOSITIONS = {"in", "on", "at", "of", "by", "to", "for", "per", "from", "with", "if", "is", "has", "was", "yn"}


def column_words(name: str) -> str:
    """A column as words for questions, without a trailing unit: ``height_cm`` → "height",
    ``Net_Worth_Millions`` → "net worth", ``mean_temperature_f`` → "mean temperature",
    ``lat`` → "latitude", ``show_times_per_day`` → "daily show times"; a predicate column names
    its agent: ``Directed_by`` → "director"."""
    words = identifier_words(name)
    agent = agent_noun(words)
    if agent:
        return agent
    if words and words[-1].lower() in _COORDINATES and (len(words) == 1 or words[-1].lower() != "long"):
        words = [*words[:-1], _COORDINATES[words[-1].lower()]]
    elif words == ["long"]:
        words = ["longitude"]
    if (
        len(words) > 1
        and words[0].lower() in {"number", "num"}
        and words[1].lower() not in {"of", "(millions)"} | _PREPOSITIONS
    ):
        words = [words[0], "of", *words[1:]]  # Number_products → "number of products"
    while len(words) > 1 and words[-1].lower() in {"for", "of", "by", "in", "to"} and not agent:
        words = words[:-1]  # Reason_For → "reason"
    while len(words) > 1 and words[-1].lower() in _UNIT_TAILS and len(words[-2]) > 2:
        words = words[:-1]
    if len(words) > 2 and words[-2].lower() == "per" and words[-1].lower() in _PER:
        words = [_PER[words[-1].lower()], *words[:-2]]  # show times per day → daily show times
    return " ".join(words) if words else humanize(name)


# Words too general to say alone: "the value of the topics" names no property (issue #41b item 1).
GENERIC_WORDS = frozenset({"value", "values", "data", "info", "information", "details", "detail", "content",
                           "contents", "field", "misc", "other", "item", "entry", "text", "thing", "stuff"})  # fmt: skip
# Key suffixes glued onto a word with no separator ("dataid", "roleid", "deptno").
_GLUED_KEYS = ("id", "ids", "no", "num", "nbr", "cd", "key", "ref")
# Common words of today missing from the 1913 dictionary and Webster's second edition.
_MODERN = frozenset({"email", "url", "website", "online", "app", "internet", "software", "timezone", "timestamp",
                     "runtime", "username", "login", "laptop", "podcast", "smartphone", "ethnicity", "wifi"})  # fmt: skip


@functools.cache
def _dictionary() -> frozenset[str]:
    """English words (GCIDE and Webster's 2nd, lower case) from the ``english-words`` package."""
    from english_words import get_english_words_set

    return frozenset(get_english_words_set(["gcide", "web2"], alpha=True, lower=True))


_INFLECTIONS = (("", ""), ("s", ""), ("es", ""), ("ies", "y"), ("ed", ""), ("ed", "e"), ("ing", ""), ("ing", "e"),
                ("er", ""), ("est", ""), ("ity", ""), ("ment", ""), ("or", "e"))  # fmt: skip


def _known(word: str) -> bool:
    d = _dictionary()
    return word in _MODERN or any(
        word.endswith(suf) and len(word) - len(suf) >= 3 and word[: len(word) - len(suf)] + rep in d
        for suf, rep in _INFLECTIONS
    )


def is_english_word(word: str) -> bool:
    """Whether one token reads as English: a dictionary word (or its inflection), a short acronym
    (``url``, ``gnp``: four letters or fewer), or two dictionary words run together whose second is
    no key suffix ("windspeed", "classroom"); ``dataid``, ``roleid`` are identifiers (issue #41b)."""
    w = word.lower()
    if not w.isalpha() or len(w) <= 4 or _known(w):
        return True
    if w.endswith(_GLUED_KEYS):
        return False
    return any(_known(w[:i]) and _known(w[i:]) for i in range(3, len(w) - 2))


def event_verb(words: str) -> str | None:
    """The verb a date column records, when its words hold one: "date of birth" → "born",
    ``Year_Established`` → "established", ``Hire_Date`` → None (a noun). Lets a question say "pilots
    born on a public holiday", not "pilots whose date of birth fell on" (issue #41b item 3)."""
    ws = words.lower().split()
    if {"birth", "born", "birthday", "birthdate"} & set(ws):
        return "born"
    for w in ws:
        if len(w) >= 6 and w.endswith("ed") and (_known(w[:-2]) or _known(w[:-1])) and w not in {"speed", "breed"}:
            return w
    return None


def readable(words: str) -> bool:
    """Whether a column's words read as an English noun phrase a question can use: not led by a
    preposition or a verb ("in season", "is male"), no stray letters or bare numbers ("temperature
    f", "18 49"), not ended by a preposition, at most five words. A column without such a phrase
    is left out of questions (issue #41 item 1)."""
    ws = words.lower().split()
    if not ws or len(ws) > 5:
        return False
    if ws[0] in _PREPOSITIONS or ws[-1] in _PREPOSITIONS:
        return False
    if any(len(w) == 1 or w.isdigit() for w in ws):
        return False
    if len(ws) > 1 and ws[0] == "number" and (ws[1] in _PREPOSITIONS - {"of"} or ws[1:3] == ["of", "in"]):
        return False  # "number in season", "number of in season"
    if len(ws) == 1 and (ws[0] in GENERIC_WORDS or not is_english_word(ws[0])):
        return False  # "the value of the topics", "the same dataid as mine"
    return all(re.search(r"[a-z]", w) for w in ws)


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
    "person": "people",
    "man": "men",
    "woman": "women",
    "child": "children",
    "staff": "staff",
    "series": "series",
    "data": "data",
    "info": "info",
    "information": "information",
    "media": "media",
    "criteria": "criteria",
    "news": "news",
    "species": "species",
}
_IRREGULAR_SINGULAR = {v: k for k, v in _IRREGULAR_PLURAL.items()}
_IE_WORDS = (
    "movies",
    "cookies",
    "zombies",
    "calories",
    "rookies",
    "pies",
    "ties",
    "lies",
    "brownies",
    "selfies",
    "goalies",
    "hippies",
    "prairies",
    "aunties",
    "budgies",
    "newbies",
    "freebies",
    "smoothies",
    "sorties",
)
_NO_CHANGE = {"series", "species", "staff", "data", "info", "information", "news", "media", "aircraft", "sheep", "fish"}


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
        if low in _IE_WORDS:
            return w[:-1]  # movies → movie, cookies → cookie
        return w[:-3] + "y"
    if low.endswith(("sses", "shes", "ches", "xes", "zzes", "heroes", "potatoes", "tomatoes", "echoes")):
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


_TABLE_FILLER = {"data", "info", "information", "list", "details", "detail", "table", "tbl", "records", "record"}
_VERBS = {
    "has",
    "have",
    "takes",
    "take",
    "teaches",
    "teach",
    "advises",
    "advise",
    "plays",
    "play",
    "works",
    "work",
    "is",
    "in",
    "of",
    "belongs",
    "wrote",
    "writes",
    "owns",
    "visits",
    "visit",
    "member",
    "appears",
    "hosts",
    "attends",
    "enrolled",
    "enrolls",
    "performs",
    "likes",
    "includes",
    "contains",
}


class TableName(str):
    """A table's name that also carries the noun a person says for its rows when the name alone
    misleads: a linking table ``ApplicationJobs`` (applicants ↔ jobs) holds *applications*
    (:func:`relationship_noun`). Compares, hashes and quotes as the plain name."""

    noun: str | None = None

    def __new__(cls, name: str, noun: str | None = None):
        obj = super().__new__(cls, name)
        obj.noun = noun
        return obj

    def __reduce__(self):
        return (TableName, (str(self), self.noun))


def relationship_noun(name: str, parents: list[str]) -> str | None:
    """The noun of a linking table's rows: its name without the words naming the tables it links
    (``ApplicationJobs`` linking Applicants and Jobs → "application"); None when every word names a
    parent (``student_course``) or nothing names one (issue #41b item 1)."""
    words = [w.lower() for w in identifier_words(name)]
    named = {singular(w.lower()) for p in parents for w in identifier_words(p)}
    rest = [w for w in words if singular(w) not in named and w not in _TABLE_FILLER]
    if not rest or len(rest) == len(words) or not readable(" ".join(rest)):
        return None
    return " ".join(rest)


def table_words(name: str) -> str:
    """A table as a noun phrase: ``cars_data`` → "cars", ``model_list`` → "model"; filler words
    (data, info, list, details, table) are dropped when other words remain; a linking table's
    relationship noun when it has one (:class:`TableName`)."""
    noun = getattr(name, "noun", None)
    if noun:
        return noun
    words = identifier_words(name)
    if len(words) > 1 and words[0].lower() == "reference":
        words = words[1:]  # Ref_Template_Types: a lookup table of template types
    kept = [w for w in words if w.lower() not in _TABLE_FILLER]
    return " ".join(kept) if kept else " ".join(words) if words else humanize(name)


def is_relation_name(name: str) -> bool:
    """A table named by a verb or preposition (``Has_Pet``, ``takes``, ``teaches``, ``member_of_club``):
    a relationship, not a noun a person would count ("the number of has pets")."""
    words = [w.lower() for w in identifier_words(name)]
    return bool(words) and (words[0] in _VERBS or any(w in {"has", "takes", "teaches"} for w in words[1:2]))


# A table named by a mass noun holds countable records of it: a person says "weather records",
# "faculty members", not "the weathers" or "the faculties" (issue #41 item 1).
MASS_NOUNS = {
    "weather": "weather record",
    "faculty": "faculty member",
    "staff": "staff member",
    "personnel": "staff member",
    "equipment": "piece of equipment",
    "furniture": "piece of furniture",
    "information": "information record",
    "music": "music track",
    "software": "software package",
    "feedback": "feedback entry",
    "housing": "housing unit",
    "inventory": "inventory item",
    "luggage": "luggage item",
    "baggage": "baggage item",
    "mail": "mail item",
    "traffic": "traffic record",
}


def _countable(words: str) -> str:
    parts = words.split()
    if parts and parts[-1].lower() in MASS_NOUNS:
        return " ".join([*parts[:-1], MASS_NOUNS[parts[-1].lower()]])
    if parts and singular(parts[-1].lower()) in MASS_NOUNS and parts[-1].lower().endswith("s"):
        return " ".join([*parts[:-1], MASS_NOUNS[singular(parts[-1].lower())]])
    return words


def table_plural(name: str) -> str:
    return plural(_countable(table_words(name)))


def table_singular(name: str) -> str:
    return singular(_countable(table_words(name)))


def is_plural(phrase: str) -> bool:
    """Whether a noun phrase reads as plural ("credits", "cylinders", "dates of birth")."""
    head = phrase.split(" of ")[0].split()
    if not head:
        return False
    w = head[-1].lower()
    if w in _NO_CHANGE or w in _IRREGULAR_PLURAL or w.isupper():
        return w in _IRREGULAR_SINGULAR
    return w in _IRREGULAR_SINGULAR or (w.endswith("s") and not w.endswith(("ss", "us", "is")) and singular(w) != w)


def be(phrase: str) -> str:
    """'is' or 'are' agreeing with a noun phrase: "whose credits are", "whose age is"."""
    return "are" if is_plural(phrase) else "is"


def with_article_or_plural(phrase: str) -> str:
    """ "a weight", "an age", but "cylinders" (plural nouns take no indefinite article)."""
    return phrase if is_plural(phrase) else with_article(phrase)


def article(phrase: str) -> str:
    """'a' or 'an' for a phrase: by its first letter, with the usual exceptions (an hour, a unit,
    a one-off, an MPG, an 18-year-old)."""
    text = phrase.strip()
    low = text.lower()
    if not low:
        return "a"
    if low.startswith(("hour", "honest", "honour", "honor", "heir")):
        return "an"
    if low.startswith(("uni", "use", "usu", "uti", "eu", "one", "once", "ure")):
        return "a"
    first_word = text.split()[0]
    if first_word.isupper() and len(first_word) <= 5 and first_word.isalpha():
        return "an" if first_word[0] in "AEFHILMNORSX" else "a"
    if low[0].isdigit():
        return "an" if low.startswith(("8", "11", "18")) else "a"
    return "an" if low[0] in "aeiou" else "a"


def with_article(phrase: str) -> str:
    return f"{article(phrase)} {phrase}"


def quote_value(value) -> str:
    """A data value as the question shows it: strings in single quotes, numbers bare."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return format_number(value)
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10000 else str(value)  # 3,000,000, but the year 2008
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
    singular: bool = False  # the target is one thing ("the average age of ..."): "What is ...?"


def _strip_articles(text: str) -> str:
    out = re.sub(r"\b(the|a|an)\s+", "", text, flags=re.IGNORECASE)
    return " ".join(out.split())


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text else text


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


def _list_templates(style: str, np: str, one: bool = False) -> list[str]:
    if one:  # a single value: no "List the average ...", no "what're the number ..."
        t1 = {
            "imperative": [f"Give me {np}.", f"Find {np}.", f"Return {np}.", f"Show {np}."],
            "interrogative": [f"What is {np}?", f"Can you tell me {np}?", f"Could you tell me {np}?"],
            "formal": [f"Please provide {np}.", f"Kindly report {np}.", f"Could you please provide {np}?"],
            "colloquial": [
                f"hey, what's {_lower_first(np)}?",
                f"need {_lower_first(np)}, thanks",
                f"so what's {_lower_first(np)}?",
            ],
            "descriptive": [f"I need {np}.", f"I am looking for {np}.", f"I would like to know {np}."],
        }
        return t1.get(style, t1["imperative"])
    t = {
        "imperative": [
            f"List {np}.",
            f"Show {np}.",
            f"Give me {np}.",
            f"Find {np}.",
            f"Return {np}.",
            f"Display {np}.",
        ],
        "interrogative": [f"What are {np}?", f"Can you tell me {np}?", f"Could you list {np}?"],
        "formal": [
            f"Please provide {np}.",
            f"Please retrieve {np}.",
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
        ],
    }
    return t.get(style, t["imperative"])


_RELATIVE = re.compile(r" (whose|who|that|with|in|from|for|linked|related|associated) ")
# "insurance claims of the bank 'STU Bank'": counted as "does the bank 'STU Bank' have" (issue #41b item 3)
_OWNED = re.compile(r"^(?P<what>[^']+?) of (?P<owner>the [^']+ '[^']*')$")


def _there_are(subj: str, question: bool = False) -> str:
    """ "employees there are whose age is 29" (or "are there" in a question), not "employees whose
    age is 29 there are"."""
    there = "are there" if question else "there are"
    m = _RELATIVE.search(subj)
    if not m:
        return f"{subj} {there}"
    return f"{subj[: m.start()]} {there}{subj[m.start() :]}"


def _count_templates(style: str, subj: str) -> list[str]:
    there, are_there = _there_are(subj), _there_are(subj, question=True)
    owned = _OWNED.match(subj)
    if owned:  # "how many insurance claims does the bank 'X' have", not "are there of the bank"
        what, owner = owned["what"], owned["owner"]
        there, are_there = f"{what} {owner} has", f"{what} does {owner} have"
    t = {
        "imperative": [
            f"Count the {subj}.",
            f"Give me the number of {subj}.",
            f"Show how many {there}.",
            f"Return the number of {subj}.",
        ],
        "interrogative": [f"How many {are_there}?", f"What is the number of {subj}?", f"How many {subj} exist?"],
        "formal": [
            f"Please provide the total number of {subj}.",
            f"Could you please state how many {there}?",
            f"Kindly report the number of {subj}.",
        ],
        "colloquial": [
            f"how many {are_there}?",
            f"hey, how many {are_there}?",
            f"quick one: number of {subj}?",
            f"so how many {are_there}?",
        ],
        "descriptive": [
            f"I need the number of {subj}.",
            f"I am looking for the count of {subj}.",
            f"I would like to know how many {there}.",
        ],
    }
    return t.get(style, t["imperative"])


def _which_templates(style: str, subj: str) -> list[str]:
    # "Which pilots were born on ...?", not "Which are the pilots who were born on ...?"
    which = f"Which {subj.replace(' who were ', ' were ', 1)}?" if " who were " in subj else f"Which are the {subj}?"
    t = {
        "imperative": [f"List the {subj}.", f"Show the {subj}.", f"Find the {subj}.", f"Give me the {subj}."],
        "interrogative": [which, f"What are the {subj}?"],
        "formal": [f"Please list the {subj}.", f"Kindly identify the {subj}.", f"Could you please provide the {subj}?"],
        "colloquial": [
            f"which ones are the {subj}?",
            f"hey, which are the {subj}?",
            f"show me the {subj} real quick",
            f"gimme the {subj}",
        ],
        "descriptive": [f"I need the {subj}.", f"I am looking for the {subj}.", f"I would like a list of the {subj}."],
    }
    return t.get(style, t["imperative"])


def render(ask: Ask, style: str, rng: random.Random) -> str:
    """The question text for ``ask`` in ``style``; the template is drawn from ``rng``."""
    style = (
        style
        if style in {"formal", "colloquial", "imperative", "interrogative", "descriptive", "concise"}
        else "imperative"
    )
    if style == "concise":
        if ask.bare:
            return ask.bare
        if ask.kind == "count":
            return rng.choice(
                [
                    f"number of {_strip_articles(ask.subject)}",
                    f"count of {_strip_articles(ask.subject)}",
                    f"{_strip_articles(ask.subject)}: count",
                ]
            )
        if ask.kind == "which":
            return _strip_articles(ask.subject)
        return _strip_articles(ask.target)
    if ask.kind == "count":
        return _cap(rng.choice(_count_templates(style, ask.subject)))
    if ask.kind == "which":
        return _cap(rng.choice(_which_templates(style, ask.subject)))
    return _cap(rng.choice(_list_templates(style, ask.target, ask.singular)))


def render_free(variants: dict[str, list[str]], style: str, rng: random.Random) -> str:
    """Pick a hand-written sentence for ``style`` (falls back to imperative, then any)."""
    options = variants.get(style) or variants.get("imperative") or next(iter(variants.values()))
    return rng.choice(options)
