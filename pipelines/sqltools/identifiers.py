"""Schema identifiers as words: ``personal_email`` -> ["personal", "email"], ``StuID`` -> ["student",
"id"]. Shared by the programmatic generator's phrasing and the well-formedness step (ABISS step 0)."""

import re

_ACRONYM_KEEP = re.compile(r"^[A-Z]{2,5}[0-9]*$")


_WORD_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[^\W\dA-Z_]+|[A-Z]+|[0-9]+")


# Abbreviations common in real schemas (Spider, BIRD), expanded so no question says "l names"
# or "edispl". Keys are lower-case whole words of an identifier; values are the words said.
ABBREVIATIONS = {
    "fname": ["first", "name"],
    "lname": ["last", "name"],
    "mname": ["middle", "name"],
    "stu": ["student"],
    "stuid": ["student", "id"],
    "dob": ["date", "of", "birth"],
    "dept": ["department"],
    "edispl": ["engine", "displacement"],
    "mpg": ["MPG"],
    "hp": ["horsepower"],
    "accelerate": ["acceleration"],
    "qty": ["quantity"],
    "amt": ["amount"],
    "desc": ["description"],
    "descr": ["description"],
    "addr": ["address"],
    "emp": ["employee"],
    "prof": ["professor"],
    "crs": ["course"],
    "cred": ["credits"],
    "tot": ["total"],
    "avg": ["average"],
    "yr": ["year"],
    "pct": ["percentage"],
    "pop": ["population"],
    "lang": ["language"],
    "cnt": ["count"],
    "num": ["number"],
    "nbr": ["number"],
    "no": ["number"],
    "mgr": ["manager"],
    "loc": ["location"],
    "govt": ["government"],
    "capital": ["capital"],
    "fullname": ["full", "name"],
    "firstname": ["first", "name"],
    "lastname": ["last", "name"],
    "birthdate": ["birth", "date"],
    "username": ["user", "name"],
    "countrylanguage": ["country", "language"],
}


def identifier_words(name: str) -> list[str]:
    """Split an identifier into lower-case words (short acronyms such as GNP keep their case).

    ``personal_email`` → ["personal", "email"]; ``SourceAirport`` → ["source", "airport"];
    ``StuID`` → ["student", "id"]; ``18_49_Rating_Share`` → ["18", "49", "rating", "share"];
    ``Official_ratings_(millions)`` → ["official", "ratings", "(millions)"]; ``LName`` → ["last", "name"]
    (:data:`ABBREVIATIONS`).
    """
    raw = _raw_identifier_words(name)
    if len(raw) == 1 and raw[0].lower() == "no":
        return raw
    out: list[str] = []
    for w in raw:
        out.extend(ABBREVIATIONS.get(w.lower(), [w]))
    if not out and str(name).replace("_", "").lower() in ABBREVIATIONS:
        out = list(ABBREVIATIONS[str(name).replace("_", "").lower()])
    # "LName" splits as ["l", "name"]: join a lone initial with the next word when that is an abbreviation
    joined: list[str] = []
    i = 0
    while i < len(out):
        if i + 1 < len(out) and len(out[i]) == 1 and (out[i] + out[i + 1]).lower() in ABBREVIATIONS:
            joined.extend(ABBREVIATIONS[(out[i] + out[i + 1]).lower()])
            i += 2
            continue
        joined.append(out[i])
        i += 1
    return joined


def _raw_identifier_words(name: str) -> list[str]:
    words: list[str] = []
    shouting = not re.search(r"[a-z]", str(name))  # AREA_CODE_STATE: no acronyms, just caps
    for chunk in re.split(r"[\s_\-./]+", str(name)):
        if not chunk:
            continue
        paren = re.fullmatch(r"\((.*)\)", chunk)
        if paren:
            inner = " ".join(_raw_identifier_words(paren.group(1)))
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
