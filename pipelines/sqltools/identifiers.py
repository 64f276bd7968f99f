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
    "indep": ["independence"],
    "ref": ["reference"],
    "info": ["information"],
    "qual": ["qualification"],
    "reg": ["registration"],
    "amen": ["amenity"],
}

# Misspellings found in real schemas: the question says the word right, once and every time
# (issue #35: "openning" copied into every question about a cinema).
TYPOS = {
    "openning": "opening",
    "siz": "size",
    "staring": "starting",
    "adress": "address",
    "lenght": "length",
    "heigth": "height",
    "wieght": "weight",
    "recieve": "receive",
    "recieved": "received",
    "occurence": "occurrence",
    "catagory": "category",
    "seperate": "separate",
    "buisness": "business",
    "goverment": "government",
    "enviroment": "environment",
    "begining": "beginning",
    "maintainance": "maintenance",
    "dependant": "dependent",
}

# A column named by a passive verb ("Directed_by", "Written_by") holds who did it: as a noun it is
# the agent ("the director"), as a condition the verb phrase ("directed by 'X'").
AGENT_NOUNS = {
    "directed": "director",
    "written": "writer",
    "produced": "producer",
    "created": "creator",
    "owned": "owner",
    "managed": "manager",
    "hosted": "host",
    "designed": "designer",
    "composed": "composer",
    "performed": "performer",
    "edited": "editor",
    "translated": "translator",
    "illustrated": "illustrator",
    "sponsored": "sponsor",
    "organised": "organiser",
    "organized": "organizer",
    "built": "builder",
    "won": "winner",
    "played": "player",
    "published": "publisher",
    "developed": "developer",
    "painted": "painter",
    "founded": "founder",
    "coached": "coach",
    "led": "leader",
}


def identifier_words(name: str) -> list[str]:
    """Split an identifier into lower-case words (short acronyms such as GNP keep their case).

    ``personal_email`` → ["personal", "email"]; ``SourceAirport`` → ["source", "airport"];
    ``StuID`` → ["student", "id"]; ``18_49_Rating_Share`` → ["18", "49", "rating", "share"];
    ``Official_ratings_(millions)`` → ["official", "ratings", "(millions)"]; ``LName`` → ["last", "name"]
    (:data:`ABBREVIATIONS`).
    """
    raw = [TYPOS.get(w.lower(), w) for w in _raw_identifier_words(name)]
    if len(raw) == 1 and raw[0].lower() == "no":
        return raw
    out: list[str] = []
    for w in raw:
        out.extend(ABBREVIATIONS.get(w.lower(), [w]))
    # "18_49_Rating_Share": two numbers in a row are a range ("18-49 rating share")
    ranged: list[str] = []
    for w in out:
        if ranged and w.isdigit() and ranged[-1].replace("-", "").isdigit() and "-" not in ranged[-1]:
            ranged[-1] = f"{ranged[-1]}-{w}"
        else:
            ranged.append(w)
    out = ranged
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


def agent_noun(words: list[str]) -> str | None:
    """The agent noun of a predicate column: ["directed", "by"] → "director"; None otherwise."""
    low = [w.lower() for w in words]
    if len(low) == 2 and low[1] == "by" and low[0] in AGENT_NOUNS:
        return AGENT_NOUNS[low[0]]
    return None


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
