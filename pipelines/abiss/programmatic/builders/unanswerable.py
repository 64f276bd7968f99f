"""Unanswerable questions: missing entity/attribute, missing relationship, missing external
knowledge and improper questions. Each draft carries feedback and an :class:`Absence` claim that
the driver checks against the schema before emitting."""

from __future__ import annotations

from collections.abc import Iterator

from pipelines.abiss.programmatic.builders.answerable import date_concepts
from pipelines.abiss.programmatic.builders.base import (
    NUMERIC,
    TEMPORAL,
    Absence,
    Ask,
    BuildContext,
    Draft,
    is_placeholder,
    is_plural,
    labelled_tables,
    noun_tables,
    plural,
    q,
    register,
    table_plural,
    table_singular,
    value_text,
)
from pipelines.abiss.programmatic.entity_kinds import (
    EU_PLACES,
    FITS,
    TIME_ZONE_PLACES,
    column_head,
    column_kind,
    fits,
    is_school_level,
    table_kind,
    table_kinds,
)
from pipelines.abiss.programmatic.phrasing import event_verb, readable, render_free

ADMIN = "ask the database administrator"

# (phrase, terms that must not occur in any table/column name)
MISSING_ATTRIBUTES = [
    ("author", ("author", "writer", "creator")),
    ("expiry date", ("expiry", "expiration", "expire")),
    ("barcode", ("barcode", "ean", "sku", "upc")),
    ("energy rating", ("energy", "efficiency")),
    ("phone number", ("phone", "telephone", "mobile", "cell")),
    ("email address", ("email", "mail")),
    ("website", ("website", "url", "web", "homepage")),
    ("nickname", ("nickname", "alias")),
    ("social media handle", ("social", "handle", "twitter", "instagram")),
    ("favourite colour", ("favourite", "favorite", "colour", "color")),
    ("postal address", ("address", "street", "zip", "postal", "postcode")),
    ("customer rating", ("rating", "rate", "score", "stars", "review")),
    ("annual revenue", ("revenue", "income", "sales", "earning", "turnover")),
    ("photo", ("photo", "image", "picture")),
    ("manager", ("manager", "supervisor", "boss")),
    ("insurance policy number", ("insurance", "policy")),
    ("marital status", ("marital", "married", "spouse")),
    ("blood type", ("blood",)),
    ("shoe size", ("shoe", "size")),
    ("tax identification number", ("tax", "vat", "tin")),
    ("opening hours", ("hours", "opening", "schedule")),
    ("loyalty points", ("loyalty", "points")),
]
MISSING_ENTITIES = [
    ("staff members", ("staff", "employee", "worker", "personnel")),
    ("suppliers", ("supplier", "vendor")),
    ("customer reviews", ("review", "feedback", "rating")),
    ("sponsors", ("sponsor",)),
    ("insurance claims", ("insurance", "claim")),
    ("parking spaces", ("parking",)),
    ("volunteers", ("volunteer",)),
    ("awards", ("award", "prize")),
    ("maintenance logs", ("maintenance", "log", "repair")),
    ("invoices", ("invoice", "bill", "payment")),
    ("reviewers", ("review", "reviewer", "referee")),
    ("translations", ("translation", "language", "locale")),
]

# which missing attributes make sense for which kind of row ("the marital status of each pet" does not)
PERSON_ONLY = {
    "phone number",
    "email address",
    "nickname",
    "social media handle",
    "favourite colour",
    "marital status",
    "blood type",
    "shoe size",
    "tax identification number",
    "loyalty points",
    "manager",
}
THING_ONLY = {"customer rating", "annual revenue", "opening hours", "website"}


def _is_person_table(t) -> bool:
    return table_kind(t) == "person"


def _is_organisation_table(t) -> bool:
    return table_kind(t) == "organisation"


# which kinds of row each missing attribute fits (entity_kinds.table_kind); unlisted: any row
ATTRIBUTE_FITS = {
    "author": {"document"},
    "expiry date": {"document", "product"},
    "barcode": {"product"},
    "energy rating": {"place", "product"},
    **{p: {"person"} for p in PERSON_ONLY},
    "insurance policy number": {"person", "product"},
    "tax identification number": {"person", "business"},
    "website": {"organisation"},
    "annual revenue": {"organisation"},
    "opening hours": {"organisation", "place"},
    "customer rating": {"organisation", "product", "place"},
    "postal address": {"person", "organisation"},
    "photo": {"person", "place", "product"},
}


def _attribute_fits(phrase: str, t, kinds: set[str] | None = None) -> bool:
    """Ask only for what such a row could have: a person's phone number, a company's website, a
    customer's loyalty points (not a professor's)."""
    kinds = kinds or table_kinds(t)
    if phrase in FITS:
        return fits(phrase, kinds)
    allowed = ATTRIBUTE_FITS.get(phrase)
    return (allowed is None or bool(kinds & allowed)) and fits(phrase, kinds)


_GRADE = {"grade", "score", "rating", "mark", "marks", "points"}


@register("missing_entity", "missing_entity.attribute_or_entity")
def build_missing_entity(ctx: BuildContext) -> Iterator[Draft]:
    a = ctx.analysis
    tables = labelled_tables(a) or noun_tables(a) or a.nonempty_tables or a.tables
    plans = []
    for t in tables:
        kinds = table_kinds(t)
        for phrase, terms in MISSING_ATTRIBUTES:
            if _attribute_fits(phrase, t, kinds):
                plans.append(("attribute", t, phrase, terms))
        for phrase, terms in MISSING_ENTITIES:
            if fits(phrase, kinds):  # no "suppliers of a pilot", "awards of a bike station"
                plans.append(("entity", t, phrase, terms))
    for kind, t, phrase, terms in ctx.shuffled(plans):
        if any(a.mentions(term) for term in terms):
            continue  # the schema has it (or something close): not a missing element
        style = ctx.next_style()
        tn, ts = table_plural(t.name), table_singular(t.name)
        example = None
        if t.label:
            lab = next((c for c in t.columns if c.name == t.label), None)
            if lab and lab.values:
                example = ctx.rng.choice(lab.values[:5])
            else:
                rows = ctx.rows(f"SELECT {q(t.label)} FROM {q(t.name)} WHERE {q(t.label)} IS NOT NULL LIMIT 10")
                rows = [r for r in rows if not is_placeholder(r[0])][:5]
                if rows:
                    example = ctx.rng.choice(rows)[0]
        cols = ", ".join(c.name for c in t.columns[:8]) + (", ..." if len(t.columns) > 8 else "")
        if kind == "attribute":
            if example is not None and ctx.rng.random() < 0.6:
                ask = Ask(
                    "list", target=f"the {phrase} of the {ts} {value_text(example)}", singular=not is_plural(phrase)
                )
            else:
                ask = Ask("list", target=f"the {plural(phrase)} of each {ts}")
            feedback = (
                f"The database has no information about the {phrase} of {tn}: the {t.name} table only has "
                f"{cols}, and no other table or column stores a {phrase}. To get it, {ADMIN} to add it to the schema."
            )
        else:
            if ctx.rng.random() < 0.5:
                ask = Ask(
                    "count",
                    subject=f"{phrase} of each {ts}"
                    if example is None
                    else f"{phrase} of the {ts} {value_text(example)}",
                )
            else:
                ask = Ask("list", target=f"the {phrase} associated with each {ts}")
            feedback = (
                f"The schema has no table or column describing {phrase} (tables: "
                f"{', '.join(x.name for x in a.tables[:10])}), so the question cannot be answered from this "
                f"database. If such data exists elsewhere, {ADMIN} to add it."
            )
        yield Draft(
            "missing_entity",
            f"missing_entity.{kind}",
            ctx.say(ask, style),
            style,
            feedback=feedback,
            absence=Absence("terms", terms=terms),
        )


# How a person relates rows of two kinds (entity_kinds.table_kind): "students who took part in the
# race", "concerts held at the stadium", not "working with" / "assigned to" everywhere. A pair of
# kinds not listed takes the neutral "related to".
RELATION_VERBS = {
    ("person", "organisation"): ["who work for", "who are members of"],
    ("person", "event"): ["who took part in", "who attended"],
    ("person", "place"): ["who have visited", "who live in"],
    ("person", "product"): ["who own", "who bought"],
    ("person", "person"): ["who know", "who have worked with"],
    ("person", "document"): ["who wrote", "who have read"],
    ("organisation", "person"): ["employing", "with as a member"],
    ("organisation", "place"): ["located in", "based in"],
    ("organisation", "event"): ["that took part in", "that sponsored"],
    ("organisation", "product"): ["that make", "that sell"],
    ("event", "place"): ["held at", "that took place at"],
    ("event", "organisation"): ["organised by", "sponsored by"],
    ("event", "person"): ["involving", "attended by"],
    ("event", "product"): ["involving", "featuring"],
    ("event", "event"): ["that took place during"],
    ("product", "person"): ["owned by", "bought by"],
    ("product", "organisation"): ["made by", "sold by"],
    ("product", "place"): ["available in", "sold in"],
    ("product", "event"): ["used in", "featured in"],
    ("place", "person"): ["visited by", "home to"],
    ("place", "event"): ["that hosted"],
    ("place", "organisation"): ["home to"],
    ("document", "person"): ["written by", "about"],
    ("document", "organisation"): ["issued by", "about"],
}


def relation_verb(ta, tb, rng) -> str:
    """A verb phrase a person uses between rows of ``ta`` and a row of ``tb``."""
    return rng.choice(RELATION_VERBS.get((table_kind(ta), table_kind(tb)), ["related to"]))


@register("missing_relationship", "missing_relationship.unlinked_tables")
def build_missing_relationship(ctx: BuildContext) -> Iterator[Draft]:
    """Two entity tables nothing links: no join path in the schema (not even through other tables
    or a same-named key) and no inclusion dependency in the data (issue #41 item 5). A relationship
    through tracks (invoice lines → tracks ← playlist tracks) or through shared values (a trip's
    start day is a weather date) is not missing."""
    a = ctx.analysis
    bridge_names = {b for b, _, _ in a.bridges()} | set(a.linking_tables)
    ents = [t for t in labelled_tables(a) if t.name not in bridge_names]

    def unrelated_pairs():
        # lazily, source by source: the driver stops after a few drafts, so wide schemas never pay
        # for all pairs of tables (the data check runs in the driver, on the drafts it sees)
        for ta in ctx.shuffled(ents):
            others = [tb for tb in ents if tb.name != ta.name and not a.joinable(ta.name, tb.name)]
            for tb in ctx.shuffled(others)[:3]:
                yield ta, tb

    found = False
    for ta, tb in unrelated_pairs():
        found = True
        lab = next((c for c in tb.columns if c.name == tb.label), None)
        vals = (
            lab.values[:5]
            if lab and lab.values
            else [
                r[0]
                for r in ctx.rows(f"SELECT {q(tb.label)} FROM {q(tb.name)} WHERE {q(tb.label)} IS NOT NULL LIMIT 5")
            ]
        )
        vals = [x for x in vals if not is_placeholder(x)]
        if not vals:
            continue
        v = ctx.rng.choice(vals)
        style = ctx.next_style()
        an, bs = table_plural(ta.name), table_singular(tb.name)
        verb = relation_verb(ta, tb, ctx.rng)
        if ctx.rng.random() < 0.35:
            ask = Ask("count", subject=f"{an} {verb} the {bs} {value_text(v)}")
        else:
            ask = Ask("list", target=f"the {an} {verb} the {bs} {value_text(v)}")
        feedback = (
            f"Both {ta.name} and {tb.name} exist, but nothing in the database relates {an} to {plural(bs)}: "
            f"no foreign key, linking table or chain of tables joins them, and no column of one holds values "
            f"of the other. {ADMIN[0].upper() + ADMIN[1:]} to add a table recording which {an} are {verb} "
            f"which {plural(bs)}."
        )
        yield Draft(
            "missing_relationship",
            "missing_relationship.unlinked_tables",
            ctx.say(ask, style),
            style,
            feedback=feedback,
            absence=Absence("relationship", tables=(ta.name, tb.name)),
        )
    if not found:
        ctx.unsupported("every pair of entity tables is joined by a path of foreign keys or shared key columns")


def _on_date(c, t, during: bool = False) -> str:
    """How rows relate to a date by what it records: "born on", "who were born during", "established
    during", else "whose submission date fell on" (issue #41b item 3)."""
    verb = event_verb(c.words)
    prep = "during" if during else "on"
    if verb is None:
        return f"whose {c.words} {'falls within' if during else 'fell on'}"
    return f"who were {verb} {prep}" if _is_person_table(t) else f"{verb} {prep}"


@register("missing_external_knowledge", "missing_external_knowledge.mapping")
def build_missing_external(ctx: BuildContext) -> Iterator[Draft]:
    a = ctx.analysis
    plans = []
    for t in labelled_tables(a) or noun_tables(a) or a.nonempty_tables:
        tn = table_plural(t.name)
        for c in t.columns:
            words = {w.lower() for w in c.words.split()}
            col = c.words
            kind = column_kind(c)
            if kind == "money":
                cur = ctx.rng.choice(["Japanese yen", "Swiss francs", "Indian rupees", "Brazilian reais"])
                plans.append(
                    (
                        Ask("list", target=f"the {col} of the {tn} converted to {cur} at today's exchange rate"),
                        f"Converting {col} to {cur} needs today's exchange rate, an external, time-dependent fact that neither the database nor the knowledge base holds.",
                        ("exchange", "currency", "rate"),
                    )
                )
            if kind in ("measure", "count") and words & _GRADE and not is_school_level(c):
                plans.append(
                    (
                        Ask("list", target=f"the {col} of the {tn} in letter-grade notation (A-F)"),
                        f"The mapping from numeric {col} values to letter grades (A-F) is an external convention not stored in the database or knowledge base.",
                        ("letter", "mapping"),
                    )
                )
            if kind == "date":
                country = ctx.rng.choice(["Italy", "Japan", "the United States", "Germany"])
                plans.append(
                    (
                        Ask("which", subject=f"{tn} {_on_date(c, t)} a public holiday in {country}"),
                        f"The calendar of public holidays in {country} is external knowledge that is not in the database or the knowledge base.",
                        ("holiday", "calendar"),
                    )
                )
            place = column_head(c) if kind == "place" else ""  # place names, not codes, addresses or e-mails
            if place and (c.name == t.label or place == table_singular(t.name).split()[-1].lower()):
                place = ""  # "countries whose country name is in an EU member state": the row is the place
            if place in EU_PLACES:
                plans.append(
                    (
                        Ask("which", subject=f"{tn} whose {col} is in a European Union member state"),
                        "Which places belong to European Union member states is external geopolitical knowledge not stored in the database or the knowledge base.",
                        ("europeanunion", "memberstate", "eumember"),
                    )
                )
            if place in TIME_ZONE_PLACES:
                plans.append(
                    (
                        Ask("list", target=f"the time zones of the {tn}, based on their {col}"),
                        f"Time zones of places are external knowledge; the database stores no time-zone mapping for {col}.",
                        ("timezone", "zone", "utc"),
                    )
                )
        ages = [c for c in t.columns if c.role == NUMERIC and column_head(c) == "age"]
        if table_kind(t) == "person" and ages:
            country = ctx.rng.choice(["Japan", "the United States", "Germany", "Brazil"])
            plans.append(
                (
                    Ask("which", subject=f"{tn} who are of legal drinking age in {country}"),
                    f"The legal drinking age in {country} is an external legal fact that neither the database nor the knowledge base holds.",
                    ("legal", "drinking", "alcohol"),
                )
            )
        for c in t.columns:
            if (c.role == TEMPORAL or c.is_year) and date_concepts(c.words) is not None:
                plans.append(
                    (
                        Ask("which", subject=f"{tn} {_on_date(c, t, during=True)} Barack Obama's US presidency"),
                        "The dates of Barack Obama's presidency are external historical knowledge that neither the database nor the knowledge base holds.",
                        ("president", "presidency", "obama"),
                    )
                )
                break
        if not fits("regulations", table_kinds(t)):
            continue  # only businesses are subject to industry regulations (not student clubs)
        plans.append(
            (
                Ask("which", subject=f"{tn} that comply with the current industry regulations"),
                "The current industry regulations and the criteria for compliance are external policies that are neither in the database nor in the knowledge base.",
                ("regulation", "compliance", "compliant", "policy"),
            )
        )
    if not plans:
        ctx.unsupported("no table to ask about")
        return
    for ask, feedback, terms in ctx.shuffled(plans):
        style = ctx.next_style()
        yield Draft(
            "missing_external_knowledge",
            "missing_external_knowledge.mapping",
            ctx.say(ask, style),
            style,
            feedback=feedback
            + " The user would need to supply it (or the administrator add it to the knowledge base).",
            absence=Absence("terms", terms=terms),
        )


_CHITCHAT = {
    "formal": [
        "Good morning. I hope you are well today.",
        "Thank you very much for your assistance earlier.",
        "Could you please tell me what the meaning of life is?",
    ],
    "colloquial": ["hey there! how's it going?", "lol what's your favourite movie?", "ugh, mondays, right?"],
    "imperative": [
        "Tell me a joke.",
        "Write a short poem about the ocean.",
        "Recommend a good book to read this weekend.",
    ],
    "interrogative": [
        "What do you think happiness is?",
        "Who will win the next football world cup?",
        "What's the weather like tomorrow in Paris?",
    ],
    "descriptive": [
        "I am looking for a good recipe for lasagna.",
        "I would like some advice on learning to play the guitar.",
        "I need help planning a weekend trip to the mountains.",
    ],
    "concise": ["hello", "weather tomorrow?", "joke please"],
}


@register("improper_question", "improper_question.off_domain_or_write")
def build_improper(ctx: BuildContext) -> Iterator[Draft]:
    a = ctx.analysis
    tables = labelled_tables(a) or a.tables
    plans = [("chitchat", None)] * 3 + [("write", t) for t in tables] + [("delete", t) for t in tables]
    for kind, t in ctx.shuffled(plans):
        style = ctx.next_style()
        if kind == "chitchat":
            question = render_free(_CHITCHAT, style, ctx.rng)
            feedback = (
                "This message is not a question about the data in this database (it is chit-chat or needs "
                "open-world knowledge), so no SQL query can answer it. Please ask about the information stored here."
            )
        else:
            tn, ts = table_plural(t.name), table_singular(t.name)
            lab = t.column(t.label) if t.label else None
            col = lab.words if lab is not None else "details"
            if lab is not None and (
                {w.rstrip("s") for w in col.lower().split()} <= {w.rstrip("s") for w in tn.lower().split()}
                or not readable(col)  # "change the value of all the topics": a generic label is their name
            ):
                col = "name"  # "change the continent of all the continents" → "the name of ..."
            if kind == "write":
                variants = {
                    "formal": [
                        f"Please update the {col} of every {ts} to the new value I sent you.",
                        f"Kindly register a new {ts} in the system.",
                    ],
                    "colloquial": [
                        f"hey, can you add a new {ts} for me?",
                        f"just change the {col} of all the {tn}, thx",
                    ],
                    "imperative": [f"Insert a new {ts} with default values.", f"Update the {col} of all {tn}."],
                    "interrogative": [
                        f"Can you add a new {ts} to the database?",
                        f"Could you rename all the {tn} for me?",
                    ],
                    "descriptive": [
                        f"I need you to change the {col} of the {tn}.",
                        f"I would like to add a new {ts} to the records.",
                    ],
                    "concise": [f"add new {ts}", f"update {tn} {col}"],
                }
            else:
                variants = {
                    "formal": [f"Please delete all the {tn} from the database.", f"Kindly remove every {ts} record."],
                    "colloquial": [f"just wipe all the {tn}, ok?", f"yo, delete the {tn} table pls"],
                    "imperative": [f"Delete all {tn}.", f"Remove every {ts} from the records."],
                    "interrogative": [f"Can you delete all the {tn}?", f"Could you drop the {tn} data?"],
                    "descriptive": [f"I want all the {tn} removed from the database.", f"I need every {ts} deleted."],
                    "concise": [f"delete {tn}", f"drop all {tn}"],
                }
            question = render_free(variants, style, ctx.rng)
            feedback = (
                f"This is a request to modify the data ({'insert or update' if kind == 'write' else 'delete'} {tn}), "
                "not a question: the assistant only answers read-only questions about the database. "
                f"Changes must go through the application or {ADMIN}."
            )
        yield Draft(
            "improper_question",
            f"improper_question.{kind}",
            question,
            style,
            feedback=feedback,
            absence=Absence("improper"),
        )
