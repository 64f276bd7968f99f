"""The ABISS taxonomy (§3) as data: 13 subcategories, question styles and SQL difficulties.

Every subcategory has a stable id (used in artifacts and configs), the paper's category and
subcategory names, its group (answerable / ambiguous / unanswerable), definition, distinguishing
characteristics, examples on the paper's university database, and the structured output schema
the generator must fill (``output_model``):

* answerable: ``question`` (+ ``evidence`` for the with-evidence subcategory);
* ambiguous: ``question`` (+ ``evidence``) and exactly two ``interpretations``, each with its own
  ``hidden_knowledge`` — the two readings become two NLQ objects sharing the question text;
* unanswerable: ``question`` and ``feedback`` (the actionable explanation shown to the user).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from functools import cache

from pydantic import BaseModel, ConfigDict, Field, create_model


class Group(str, Enum):
    ANSWERABLE = "answerable"
    AMBIGUOUS = "ambiguous"
    UNANSWERABLE = "unanswerable"


@dataclass(frozen=True)
class Subcategory:
    id: str
    name: str  # the paper's subcategory name
    category: str  # the paper's category name (ABISS JSON `category.name`)
    group: Group
    definition: str
    characteristics: tuple[str, ...]
    examples: tuple[dict, ...]
    has_evidence: bool = False  # the output schema carries an `evidence` field

    @property
    def solvable(self) -> bool:
        """Answerable and ambiguous questions have ground-truth SQL; unanswerable do not."""
        return self.group is not Group.UNANSWERABLE

    @property
    def output_model(self) -> type[BaseModel]:
        return output_model_for(self.id)

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "name": self.name,
            "category": self.category,
            "group": self.group.value,
            "solvable": self.solvable,
            "definition": self.definition,
            "characteristics": list(self.characteristics),
            "examples": list(self.examples),
            "output_schema": self.output_model.model_json_schema(),
        }


def _amb(question, reading_1, reading_2, evidence=None):
    ex = {"question": question, "interpretations": [reading_1, reading_2]}
    if evidence:
        ex["evidence"] = evidence
    return ex


SUBCATEGORIES: tuple[Subcategory, ...] = (
    # ------------------------------------------------------------------ answerable
    Subcategory(
        id="answerable",
        name="Answerable",
        category="Answerable",
        group=Group.ANSWERABLE,
        definition="The question can be translated into exactly one SQL query using only the schema and data, with no extra knowledge.",
        characteristics=(
            "Every term maps to a unique table, column or value of the schema.",
            "No external definition, user fact or threshold is needed.",
            "A single non-equivalent SQL answers it.",
        ),
        examples=(
            {"question": "List the titles of the courses offered by the Computer Science department."},
            {"question": "How many students are enrolled in the 'Database' course?"},
            {"question": "What is the average grade obtained in the 'Algorithms' course?"},
        ),
    ),
    Subcategory(
        id="answerable_with_evidence",
        name="Answerable with Evidence",
        category="Answerable",
        group=Group.ANSWERABLE,
        has_evidence=True,
        definition="The question is answerable with one SQL query only once a piece of evidence (domain knowledge in the knowledge base) defines a concept it uses.",
        characteristics=(
            "The question uses a derived concept that is not a column (e.g. 'senior student').",
            "The evidence states the definition precisely enough to write the SQL.",
            "Without the evidence the SQL would be a guess.",
        ),
        examples=(
            {
                "question": "List the senior students of the Engineering department.",
                "evidence": "Senior students are students with more than 90 credits.",
            },
            {"question": "How many courses are heavy?", "evidence": "A heavy course is a course worth 12 credits."},
            {
                "question": "Which students graduated with honours in 'Database'?",
                "evidence": "Honours means a grade of 31 (30 cum laude).",
            },
        ),
    ),
    # ------------------------------------------------------------------ ambiguous
    Subcategory(
        id="scope_ambiguity",
        name="Scope Ambiguity",
        category="Structural Ambiguity",
        group=Group.AMBIGUOUS,
        definition="An unclear quantifier (each, every, all) lets the question be read collectively or distributively, giving structurally different SQL.",
        characteristics=(
            "Contains a quantifier such as each, every or all.",
            "One reading aggregates over the whole set, the other iterates per element.",
            "Both readings are natural for a user.",
        ),
        examples=(
            _amb(
                "What courses does each department offer?",
                {"hidden_knowledge": "List the courses common to all departments (collective reading)."},
                {"hidden_knowledge": "For every department, list its courses (distributive reading)."},
            ),
            _amb(
                "Which students are enrolled in every Mathematics course?",
                {"hidden_knowledge": "Students enrolled in all Mathematics courses."},
                {"hidden_knowledge": "For each Mathematics course, the students enrolled in it."},
            ),
            _amb(
                "What grade did all students get in 'Database'?",
                {"hidden_knowledge": "The grade shared by all students of the course."},
                {"hidden_knowledge": "Each student's grade in the course."},
            ),
        ),
    ),
    Subcategory(
        id="attachment_ambiguity",
        name="Attachment Ambiguity",
        category="Structural Ambiguity",
        group=Group.AMBIGUOUS,
        definition="A modifier can attach to different parts of the sentence, leading to different filtering conditions.",
        characteristics=(
            "A prepositional phrase or relative clause follows a conjunction or a noun phrase.",
            "One reading applies the modifier to one element only, the other to all.",
        ),
        examples=(
            _amb(
                "List the professors and the students in engineering.",
                {"hidden_knowledge": "'in engineering' modifies only the students."},
                {"hidden_knowledge": "'in engineering' modifies both professors and students."},
            ),
            _amb(
                "Show the courses and departments in Building C.",
                {"hidden_knowledge": "Only the departments are filtered by Building C."},
                {"hidden_knowledge": "Courses of departments in Building C and those departments."},
            ),
            _amb(
                "List students and professors hired or enrolled after 2022.",
                {"hidden_knowledge": "The date condition applies to professors only."},
                {"hidden_knowledge": "The date condition applies to both."},
            ),
        ),
    ),
    Subcategory(
        id="lexical_overlap",
        name="Lexical Overlap",
        category="Semantic Mapping Ambiguity",
        group=Group.AMBIGUOUS,
        definition="A term of the question matches two or more schema attributes with similar or identical forms.",
        characteristics=(
            "Two columns share a head noun (e.g. personal_email / institutional_email).",
            "The question uses the shared noun without a qualifier.",
        ),
        examples=(
            _amb(
                "List the emails of the students of the 'database' course.",
                {"hidden_knowledge": "'emails' means students.personal_email."},
                {"hidden_knowledge": "'emails' means students.institutional_email."},
            ),
            _amb(
                "Show the dates of the Fall courses.",
                {"hidden_knowledge": "'dates' means courses.start_date."},
                {"hidden_knowledge": "'dates' means the enrollment dates in those courses."},
            ),
            _amb(
                "What is the name of student 12?",
                {"hidden_knowledge": "'name' means first_name."},
                {"hidden_knowledge": "'name' means last_name."},
            ),
        ),
    ),
    Subcategory(
        id="entity_ambiguity",
        name="Entity Ambiguity",
        category="Semantic Mapping Ambiguity",
        group=Group.AMBIGUOUS,
        definition="Several entities (tables) could satisfy the same reference, so the same attribute name resolves to different tables.",
        characteristics=(
            "The same column name exists in two joinable tables.",
            "The question refers to it without saying which entity it belongs to.",
        ),
        examples=(
            _amb(
                "List the enrollment date of the students of the 'database' course.",
                {"hidden_knowledge": "students.enrollment_date (university enrolment)."},
                {"hidden_knowledge": "student_courses.enrollment_date (course enrolment)."},
            ),
            _amb(
                "Show the credits of students taking 'Algorithms'.",
                {"hidden_knowledge": "students.credits (credits earned)."},
                {"hidden_knowledge": "courses.credits (credits of the course)."},
            ),
            _amb(
                "Which department does the 'Genetics' course belong to, and its students?",
                {"hidden_knowledge": "The department of the course."},
                {"hidden_knowledge": "The departments of the students."},
            ),
        ),
    ),
    Subcategory(
        id="lexical_vagueness",
        name="Lexical Vagueness",
        category="Lexical Vagueness",
        group=Group.AMBIGUOUS,
        definition="A term lacks a precise boundary (recent, high, young, large), so the selection criterion is indeterminate.",
        characteristics=(
            "A vague adjective or adverb over a numeric or temporal attribute.",
            "Different thresholds give different, equally defensible answers.",
        ),
        examples=(
            _amb(
                "List recent courses.",
                {"hidden_knowledge": "Recent means courses of the last year (2026)."},
                {"hidden_knowledge": "Recent means courses of the last two years (2025 onwards)."},
            ),
            _amb(
                "Which students have high grades in 'Database'?",
                {"hidden_knowledge": "High means a grade of at least 28."},
                {"hidden_knowledge": "High means a grade of 30 or 31."},
            ),
            _amb(
                "Show the departments with a large budget.",
                {"hidden_knowledge": "Large means above 1,000,000."},
                {"hidden_knowledge": "Large means above 800,000."},
            ),
        ),
    ),
    Subcategory(
        id="missing_user_knowledge",
        name="Missing User Knowledge",
        category="Missing User Knowledge",
        group=Group.AMBIGUOUS,
        definition="The interpretation depends on an objective, user-specific fact absent from the database and knowledge base, which the user can supply in dialogue.",
        characteristics=(
            "Uses first-person references: my department, my courses, my student id.",
            "One valid SQL exists per possible value of the user's fact.",
        ),
        examples=(
            _amb(
                "List the students in my department.",
                {"hidden_knowledge": "The user's department is Engineering."},
                {"hidden_knowledge": "The user's department is Physics."},
            ),
            _amb(
                "What grades did I get?",
                {"hidden_knowledge": "The user is student 17."},
                {"hidden_knowledge": "The user is student 42."},
            ),
            _amb(
                "Which courses of my year are offered in Spring?",
                {"hidden_knowledge": "The user's year is 2025."},
                {"hidden_knowledge": "The user's year is 2026."},
            ),
        ),
    ),
    Subcategory(
        id="conflicting_knowledge",
        name="Conflicting Knowledge",
        category="Conflicting Knowledge",
        group=Group.AMBIGUOUS,
        has_evidence=True,
        definition="The knowledge base holds several non-equivalent pieces of evidence for the same concept of the question.",
        characteristics=(
            "The evidence contains two definitions of one concept.",
            "The question itself is clear; the inconsistency lives in the knowledge.",
        ),
        examples=(
            _amb(
                "List the top five students' performance.",
                {"hidden_knowledge": "Performance is the average grade."},
                {"hidden_knowledge": "Performance is the average grade weighted by course credits."},
                evidence="A student's performance is their average grade. A student's performance is the average grade weighted by the course credits.",
            ),
            _amb(
                "How many senior students are there?",
                {"hidden_knowledge": "Senior: more than 90 credits."},
                {"hidden_knowledge": "Senior: enrolled before 2022."},
                evidence="Senior students have more than 90 credits. Senior students enrolled before 2022.",
            ),
            _amb(
                "Which courses are advanced?",
                {"hidden_knowledge": "Advanced: 12 credits."},
                {"hidden_knowledge": "Advanced: offered in 2026."},
                evidence="Advanced courses are worth 12 credits. Advanced courses are those offered in 2026.",
            ),
        ),
    ),
    # ------------------------------------------------------------------ unanswerable
    Subcategory(
        id="missing_entity",
        name="Missing Entities or Attributes",
        category="Missing Schema Elements",
        group=Group.UNANSWERABLE,
        definition="Key information (a table or column) the question asks for is absent from the schema.",
        characteristics=(
            "The question is about the database's domain.",
            "It names an entity or attribute no table or column holds.",
        ),
        examples=(
            {
                "question": "List the administrative staff in the engineering department.",
                "feedback": "The schema has no table or column about staff; ask the database administrator to add staff data.",
            },
            {
                "question": "What is the phone number of student 12?",
                "feedback": "The students table has no phone number column.",
            },
            {
                "question": "Which classroom hosts the 'Database' course?",
                "feedback": "No table records classrooms or course locations.",
            },
        ),
    ),
    Subcategory(
        id="missing_relationship",
        name="Missing Relationship",
        category="Missing Schema Elements",
        group=Group.UNANSWERABLE,
        definition="Both entities exist in the schema but no relationship links them.",
        characteristics=(
            "Mentions two entities that both exist as tables.",
            "No foreign key path connects them in the required way.",
        ),
        examples=(
            {
                "question": "List the professors for the course 'database'.",
                "feedback": "Professors and courses exist but no table records which professor teaches which course.",
            },
            {
                "question": "Which professor advises student 8?",
                "feedback": "There is no advisor relationship between students and professors.",
            },
            {
                "question": "How many students does professor Rossi teach?",
                "feedback": "No link exists between professors and the courses or students they teach.",
            },
        ),
    ),
    Subcategory(
        id="missing_external_knowledge",
        name="Missing External Knowledge",
        category="Missing External Knowledge",
        group=Group.UNANSWERABLE,
        definition="The interpretation depends on objective domain facts or policies that are neither in the database nor in the knowledge base.",
        characteristics=(
            "Requires a mapping, conversion or policy the data does not hold.",
            "The fact is objective (not user-specific), so dialogue with the user is not the fix.",
        ),
        examples=(
            {
                "question": "List all the grades of the students for the course 'database' using alphabetic notation (A-F).",
                "feedback": "The mapping from numeric grades to letters is not in the database or knowledge base.",
            },
            {
                "question": "Which courses satisfy the national accreditation requirements?",
                "feedback": "Accreditation requirements are not stored.",
            },
            {
                "question": "Convert each department's budget to Japanese yen at today's rate.",
                "feedback": "Exchange rates are external data not held in the database.",
            },
        ),
    ),
    Subcategory(
        id="improper_question",
        name="Improper Question",
        category="Improper Question",
        group=Group.UNANSWERABLE,
        definition="The request is unrelated to the domain of the database or knowledge base, or is not a database query.",
        characteristics=(
            "Chit-chat, open-world reasoning, or an action request (update, delete).",
            "Domain-irrelevant, unlike missing schema elements.",
        ),
        examples=(
            {"question": "Hello!", "feedback": "This is a greeting, not a question about the university data."},
            {"question": "What is the meaning of life?", "feedback": "This question is not about the database."},
            {
                "question": "Update my mailing address.",
                "feedback": "This is a write request; the assistant only answers read-only questions.",
            },
        ),
    ),
)

SUBCATEGORY_BY_ID: dict[str, Subcategory] = {s.id: s for s in SUBCATEGORIES}


def subcategory(sub_id: str) -> Subcategory:
    try:
        return SUBCATEGORY_BY_ID[sub_id]
    except KeyError:
        raise KeyError(f"unknown subcategory {sub_id!r}; known: {', '.join(SUBCATEGORY_BY_ID)}") from None


def subcategories_in(group: Group | str) -> list[Subcategory]:
    g = Group(group)
    return [s for s in SUBCATEGORIES if s.group is g]


# ------------------------------------------------------------------ styles and difficulties


@dataclass(frozen=True)
class Style:
    id: str
    description: str
    example: str


STYLES: tuple[Style, ...] = (
    Style(
        "formal",
        "Complete, grammatical sentences with precise, neutral wording and no contractions.",
        "Please list the institutional email addresses of all students enrolled in the Database course.",
    ),
    Style(
        "colloquial",
        "Casual everyday speech: contractions, informal words, as if talking to a colleague.",
        "hey, who's taking the database class? need their emails",
    ),
    Style(
        "imperative",
        "A direct command starting with a verb (List, Show, Give, Find).",
        "Show the students enrolled in the Database course.",
    ),
    Style(
        "interrogative",
        "A direct question ending with a question mark (Who, What, Which, How many).",
        "Which students are enrolled in the Database course?",
    ),
    Style(
        "descriptive",
        "Describes the information need in a declarative sentence ('I need ...', 'I am looking for ...').",
        "I am looking for the students who are enrolled in the Database course.",
    ),
    Style("concise", "As few words as possible, keyword-like, possibly without a verb.", "Database course students"),
)
STYLE_BY_ID = {s.id: s for s in STYLES}
DEFAULT_STYLES = ("formal", "colloquial", "interrogative")  # the paper's set (§4.1)


@dataclass(frozen=True)
class Difficulty:
    id: str
    description: str
    rank: int = field(default=0)


DIFFICULTIES: tuple[Difficulty, ...] = (
    Difficulty("simple", "A single table, a few conditions, at most a basic aggregate; no joins or subqueries.", 0),
    Difficulty("moderate", "One or two joins, or GROUP BY with aggregates, or ORDER BY with LIMIT.", 1),
    Difficulty("complex", "Several joins combined with grouping, HAVING, or a subquery.", 2),
    Difficulty(
        "highly complex",
        "Nested subqueries, set operations, window functions or CTEs, several joins and many conditions.",
        3,
    ),
)
DIFFICULTY_BY_ID = {d.id: d for d in DIFFICULTIES}


# ------------------------------------------------------------------ output schemas


class _Strict(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)


class Interpretation(_Strict):
    hidden_knowledge: str = Field(min_length=1, description="Disambiguation information selecting this reading.")


@cache
def output_model_for(sub_id: str) -> type[BaseModel]:
    """The structured output the generator fills for a subcategory (pydantic model)."""
    sub = subcategory(sub_id)
    fields: dict = {"question": (str, Field(min_length=1, description="The natural-language question."))}
    if sub.has_evidence:
        fields["evidence"] = (str, Field(min_length=1, description="Domain knowledge from the knowledge base."))
    if sub.group is Group.AMBIGUOUS:
        fields["interpretations"] = (
            list[Interpretation],
            Field(min_length=2, max_length=2, description="Exactly two readings, each with its hidden knowledge."),
        )
    elif sub.group is Group.UNANSWERABLE:
        fields["feedback"] = (
            str,
            Field(min_length=1, description="Why it cannot be answered and what the user could do."),
        )
    name = "".join(part.title() for part in sub.id.split("_")) + "Output"
    return create_model(name, __base__=_Strict, **fields)


def taxonomy_dict() -> dict:
    return {
        "subcategories": [s.to_dict() for s in SUBCATEGORIES],
        "styles": [{"id": s.id, "description": s.description, "example": s.example} for s in STYLES],
        "default_styles": list(DEFAULT_STYLES),
        "difficulties": [{"id": d.id, "description": d.description} for d in DIFFICULTIES],
    }
