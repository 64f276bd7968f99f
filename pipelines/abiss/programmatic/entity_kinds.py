"""What kind of thing a table's rows are and what kind of value a column holds, inferred from names,
types and values (issue #35 item 2). Templates state the kinds they fit (:data:`FITS`) and run only
on a fit: no "suppliers of a pilot", "parking spaces of each schedule", "students that comply with
the current industry regulations", or EU membership of a building code.

Table kinds: ``person``, ``organisation``, ``place``, ``event``, ``product``, ``document``, ``thing``.
Column kinds: ``person_name``, ``name``, ``place``, ``date``, ``year``, ``money``, ``count``,
``measure``, ``rank``, ``code``, ``flag``, ``category``, ``email``, ``text``, ``key``.
"""

from __future__ import annotations

import re

from pipelines.abiss.programmatic.phrasing import singular, table_words

# Words naming a quantity: a numeric column named by none of them (``Major``, ``Advisor``,
# ``city_code``) holds codes, and "students whose major is greater than 550" means nothing.
MEASURE_WORDS = frozenset(
    """
age weight height length width depth area size capacity population price cost fee charge amount budget salary
income wage pay earnings revenue sales profit worth value gnp gdp score rating grade points credits credit year
years duration time hours minutes seconds days speed horsepower MPG acceleration displacement cylinders
count number total share percentage percent rate ratio attendance seats votes rank ranking place position
expectancy surface distance mileage volume temperature balance quantity stock goals wins losses money bonus
tax budgeted level floors rooms beds employees staff members students passengers enrollment pages copies
""".split()
)


COORDINATE_WORDS = frozenset({"latitude", "longitude", "lat", "lng", "lon", "coordinate", "coordinates", "x", "y"})


def is_measure(col) -> bool:
    """A numeric column measuring something (thresholds and "high"/"low" make sense on it)."""
    if getattr(col, "role", None) != "numeric":
        return False
    words = [w.lower() if not w.isupper() else w for w in col.words.split()]
    if words and words[-1].lower() in {"code", "id", "zip", "phone", "fax"}:
        return False
    if {w.lower() for w in words} & COORDINATE_WORDS:
        return False  # a coordinate measures no amount: "a high latitude station" is no concept
    if "phone" in [w.lower() for w in words] or (len(words) > 1 and words[-1].lower() == "number"):
        return False  # phone number, block number, room number: identifiers, not quantities
    if any(w in MEASURE_WORDS or w.lower() in MEASURE_WORDS or singular(w.lower()) in MEASURE_WORDS for w in words):
        return True
    sample = list(getattr(col, "sample", []) or [])
    return any(isinstance(v, float) and not float(v).is_integer() for v in sample[:200])


def is_school_level(col) -> bool:
    """A grade or level that is a school year or tier (9, 10, 11, 12), not a score: a few small
    integers. "Top-rated" or "low-grade" high-schoolers, or their grade in letters, mean nothing."""
    words = {w.lower() for w in col.words.split()}
    if not words & {"grade", "level", "class", "form", "tier"}:
        return False
    vals = [v for v in getattr(col, "sample", []) or getattr(col, "values", []) if v is not None]
    try:
        nums = [float(v) for v in vals]
    except (TypeError, ValueError):
        return False
    return bool(nums) and all(x.is_integer() and 0 <= x <= 13 for x in nums) and len(set(nums)) <= 6


def is_flag(col) -> bool:
    """A yes/no column (``is_male``, ``has_wifi``, values T/F, Y/N, 0/1): "whose is male is 'F'" is no English."""
    words = [w.lower() for w in col.words.split()]
    if words and words[0] in {"is", "has", "was", "can", "did", "does", "if"}:
        return True
    vals = {str(v).strip().lower() for v in getattr(col, "values", []) or []}
    return bool(vals) and vals <= {"t", "f", "y", "n", "yes", "no", "true", "false", "0", "1"}


PERSON_WORDS = frozenset(
    """student person people employee singer teacher player customer user member visitor owner professor
instructor staff driver artist author actor director conductor candidate voter host friend pilot manager
musician writer hero superhero patient doctor physician nurse client guest passenger worker coach editor
journalist participant competitor contestant winner faculty advisor representative architect captain
official engineer victim reviewer highschooler schooler employee""".split()
)
ORGANISATION_WORDS = frozenset(
    """company business restaurant hotel shop store museum bank agency school university college club airline
library hospital studio publisher manufacturer maker brand festival channel network firm organization
organisation institution gym clinic farm kennel gallery vendor supplier dealer orchestra band team office
branch department party government church shipping company operator""".split()
)
PLACE_WORDS = frozenset(
    """country city state region area district town province county continent location address airport
stadium venue building room campus place site park street zone port track circuit cinema theater theatre
mountain lake river island arena hall property house apartment home station""".split()
)
EVENT_WORDS = frozenset(
    """concert match game battle race event election show performance festival tournament competition
meeting flight trip visit exhibition appointment treatment season episode broadcast cartoon debate""".split()
)
PRODUCT_WORDS = frozenset(
    """car product item model phone device ship aircraft train vehicle book song album film movie drug
machine furniture camera""".split()
)
DOCUMENT_WORDS = frozenset("""document template paragraph report record transcript certificate""".split())

_PERSON_COLUMNS = {"first name", "last name", "full name", "surname", "given name", "middle name"}
_PLACE_COLUMN_WORDS = {
    "country",
    "city",
    "nationality",
    "location",
    "hometown",
    "citizenship",
    "state",
    "district",
    "region",
    "continent",
    "town",
    "province",
    "county",
}
_MONEY_WORDS = {
    "price",
    "cost",
    "amount",
    "budget",
    "salary",
    "earnings",
    "sales",
    "spent",
    "bonus",
    "worth",
    "gnp",
    "revenue",
    "fee",
    "charge",
    "money",
    "income",
    "wage",
    "pay",
}
_RANK_WORDS = {"rank", "ranking", "position", "place", "order", "seed"}
_CODE_WORDS = {"code", "zip", "phone", "fax", "number", "no", "id", "ids", "version"}


# Narrower kinds some templates need (issue #41 item 7): industry regulations, suppliers and invoices
# are asked of businesses, not of student clubs or orchestras; loyalty points of customers, not of
# professors.
BUSINESS_WORDS = frozenset(
    """company business restaurant hotel shop store bank agency airline manufacturer maker brand firm vendor
supplier dealer clinic hospital farm kennel publisher studio operator gym shipping retailer carrier
insurer distributor""".split()
)
CUSTOMER_WORDS = frozenset("customer client guest member passenger user shopper buyer subscriber patron".split())
EMPLOYEE_WORDS = frozenset("employee worker clerk staff technician engineer nurse agent cashier officer".split())
# Areas on a map, not premises: no opening hours, staff or parking spaces of a continent.
REGION_WORDS = frozenset("continent country region state province county district city town area zone".split())


def table_kinds(t) -> set[str]:
    """The table's kind (:func:`table_kind`) plus the narrower ``business`` or ``customer`` when its
    head noun says so."""
    kinds = {table_kind(t)}
    head = [w for w in table_words(t.name).lower().split() if w.isalpha()]
    h = singular(head[-1]) if head else ""
    if h in BUSINESS_WORDS:
        kinds.add("business")
    if h in CUSTOMER_WORDS:
        kinds.add("customer")
    if h in EMPLOYEE_WORDS:
        kinds.add("employee")
    if h in REGION_WORDS:
        kinds.add("region")
    return kinds


def table_kind(t) -> str:
    """The kind of the rows of a table profile: person, organisation, place, event, product, document, thing."""
    for kind, vocab in (
        ("person", PERSON_WORDS),
        ("organisation", ORGANISATION_WORDS),
        ("event", EVENT_WORDS),
        ("place", PLACE_WORDS),
        ("product", PRODUCT_WORDS),
        ("document", DOCUMENT_WORDS),
    ):
        # the last word is the head of the table's name: "concert_singer" rows are singers
        head = [w for w in table_words(t.name).lower().split() if w.isalpha()]
        if head and singular(head[-1]) in vocab:
            return kind
    cols = {c.words.lower() for c in t.columns}
    if cols & _PERSON_COLUMNS:  # a first/last name, not just a name and a gender (dogs have those)
        return "person"
    return "thing"


def _place_values(values: list) -> bool:
    """Place names look like words ("France", "New York"), not codes ("NYC1", "B-12"), e-mails or streets."""
    vals = [v for v in values if isinstance(v, str) and v.strip()]
    if len(vals) < 2:
        return False
    good = [v for v in vals if re.fullmatch(r"[A-Za-z][A-Za-z.'-]+(?: [A-Za-z.'-]+){0,3}", v.strip()) and len(v) > 3]
    return len(good) >= 0.8 * len(vals)


def column_head(c) -> str:
    """The head noun of a column's words, singular: a "head of state" is a head, a "country name" a country."""
    words = [w.lower() for w in c.words.split()]
    of = words.index("of") if "of" in words[1:] else None
    head = words[of - 1] if of else words[-1] if words else ""
    if head in {"name", "code"} and len(words) > 1:
        head = words[-2] if not of else head
    return singular(head)


def column_kind(c) -> str:
    """The kind of value a column profile holds (see the module docstring)."""
    words = [w.lower() for w in c.words.split()]
    ws = set(words) | {singular(w) for w in words}
    if c.is_key or c.primary_key:
        return "key"
    if is_flag(c):
        return "flag"
    if c.role == "temporal":
        return "date"
    if c.role == "numeric":
        if c.is_year:
            return "year"
        if ws & _RANK_WORDS:
            return "rank"
        if words and words[-1] in _CODE_WORDS and not is_measure(c):
            return "code"
        if ws & _MONEY_WORDS:
            return "money"
        if is_measure(c):
            if words and (words[0] in {"number", "count", "num"} or words[-1] in {"count", "total"}):
                return "count"
            return "measure"
        return "code"
    if " ".join(words) in _PERSON_COLUMNS:
        return "person_name"
    if "email" in ws or "mail" in ws:
        return "email"
    head = column_head(c)
    examples = list(c.values) or list(getattr(c, "examples", []) or [])
    if head in _PLACE_COLUMN_WORDS and examples and _place_values(examples):
        return "place"
    if words and words[-1] in {"code", "id", "number", "no"}:
        return "code"
    if "name" in ws or "title" in ws:
        return "name"
    if c.role == "categorical":
        return "category"
    return "text"


# What each template fits: table kinds for entities asked about, column kinds for columns used.
FITS = {
    "regulations": {"business"},
    "suppliers": {"business", "product"},
    "parking spaces": {"place", "organisation"},
    "staff members": {"organisation", "place", "event"},
    "sponsors": {"event", "organisation", "person"},
    "customer reviews": {"product", "business"},
    "insurance claims": {"person", "product", "organisation"},
    "volunteers": {"event", "organisation"},
    "awards": {"person", "product", "organisation"},
    "maintenance logs": {"product", "place"},
    "invoices": {"business", "customer"},
    "loyalty points": {"customer"},
    "manager": {"employee"},
    "reviewers": {"document", "product"},
    "translations": {"document"},
    "insurance policy number": {"person", "product"},
    "tax identification number": {"person", "business"},
    "photo": {"person", "place", "product"},
    "exchange_rate": {"money"},
    "holiday": {"date"},
    "letter_grade": {"measure", "count"},
}


# place columns whose values can sit in the EU, or in a time zone (a nationality has none)
EU_PLACES = frozenset({"country", "city", "nationality", "citizenship", "hometown", "town"})
TIME_ZONE_PLACES = frozenset({"country", "city", "state", "hometown", "town", "district", "location", "province"})


def fits(template: str, kind: str | set[str]) -> bool:
    """Whether ``template`` (a key of :data:`FITS`) applies to a table or column of ``kind`` (one
    kind, or a table's :func:`table_kinds`); a template without a stated fit applies everywhere."""
    allowed = FITS.get(template)
    kinds = {kind} if isinstance(kind, str) else set(kind)
    if "region" in kinds and template in REGION_UNFIT:
        return False
    return allowed is None or bool(kinds & allowed)


# what an area on a map has none of
REGION_UNFIT = frozenset(
    {"opening hours", "staff members", "parking spaces", "customer rating", "customer reviews", "photo",
     "maintenance logs", "energy rating", "volunteers", "awards", "insurance claims"}
)  # fmt: skip
