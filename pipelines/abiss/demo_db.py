"""The paper's running example: a deterministic university database (ABISS Table 1 and §3).

Schema (as in the paper's examples):

* ``departments``  — id, name (e.g. 'Engineering'), building, budget
* ``students``     — personal_email *and* institutional_email (lexical overlap), their own
  ``enrollment_date`` at the university (entity ambiguity with the course enrolment date),
  ``credits`` earned (e.g. "senior students = more than 90 credits"), department
* ``professors``   — with their department and hire date
* ``courses``      — title (one is 'Database'), credits, semester, year, department
* ``student_courses`` — enrolment of a student in a course, with its own ``enrollment_date``
  and ``grade`` (Italian scale 18–30, 31 = 30 cum laude)

Like the paper's schema there is deliberately **no** table linking professors to the courses
they teach (missing relationship) and **no** staff table (missing entity), so those examples stay
unanswerable. Everything is generated from a fixed seed: the same file bytes every time.
"""

from __future__ import annotations

import random
import sqlite3
from datetime import date, timedelta
from pathlib import Path

DEMO_DB_ID = "university"
SEED = 20260731

DEPARTMENTS = [
    ("Engineering", "Building A", 1_450_000),
    ("Computer Science", "Building B", 1_200_000),
    ("Mathematics", "Building C", 650_000),
    ("Physics", "Building C", 900_000),
    ("Economics", "Building D", 700_000),
    ("Biology", "Building E", 820_000),
]

COURSES = {
    "Engineering": [
        "Statics",
        "Thermodynamics",
        "Control Systems",
        "Fluid Mechanics",
        "Circuit Analysis",
        "Materials Science",
    ],
    "Computer Science": [
        "Database",
        "Operating Systems",
        "Algorithms",
        "Computer Networks",
        "Machine Learning",
        "Programming Fundamentals",
        "Software Engineering",
    ],
    "Mathematics": ["Calculus I", "Linear Algebra", "Probability", "Real Analysis", "Numerical Methods"],
    "Physics": ["Classical Mechanics", "Electromagnetism", "Quantum Physics", "Optics", "Astrophysics"],
    "Economics": ["Microeconomics", "Macroeconomics", "Econometrics", "Financial Markets", "Game Theory"],
    "Biology": ["Cell Biology", "Genetics", "Ecology", "Biochemistry", "Microbiology"],
}

FIRST_NAMES = [
    "Alice",
    "Marco",
    "Giulia",
    "Luca",
    "Sofia",
    "Matteo",
    "Emma",
    "Leonardo",
    "Chiara",
    "Davide",
    "Sara",
    "Andrea",
    "Martina",
    "Francesco",
    "Elena",
    "Alessandro",
    "Anna",
    "Lorenzo",
    "Laura",
    "Tommaso",
    "Paolo",
    "Irene",
    "Simone",
    "Federica",
    "Nicola",
    "Beatrice",
    "Riccardo",
    "Valentina",
    "James",
    "Olivia",
    "Noah",
    "Mia",
    "Lucas",
    "Amelia",
    "Ethan",
    "Hannah",
    "Omar",
    "Priya",
    "Wei",
    "Yuki",
]
LAST_NAMES = [
    "Rossi",
    "Bianchi",
    "Romano",
    "Colombo",
    "Ricci",
    "Marino",
    "Greco",
    "Bruno",
    "Gallo",
    "Conti",
    "De Luca",
    "Costa",
    "Giordano",
    "Mancini",
    "Rizzo",
    "Lombardi",
    "Moretti",
    "Barbieri",
    "Fontana",
    "Santoro",
    "Smith",
    "Johnson",
    "Brown",
    "Garcia",
    "Miller",
    "Davis",
    "Chen",
    "Kumar",
    "Tanaka",
    "Nguyen",
]
EMAIL_DOMAINS = ["gmail.com", "outlook.com", "yahoo.com", "proton.me"]
RANKS = ["Assistant Professor", "Associate Professor", "Full Professor"]

DDL = """
CREATE TABLE departments (
    department_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    building TEXT NOT NULL,
    budget INTEGER NOT NULL
);
CREATE TABLE students (
    student_id INTEGER PRIMARY KEY,
    first_name TEXT NOT NULL,
    last_name TEXT NOT NULL,
    personal_email TEXT NOT NULL,
    institutional_email TEXT NOT NULL UNIQUE,
    enrollment_date DATE NOT NULL,
    birth_date DATE NOT NULL,
    credits INTEGER NOT NULL,
    department_id INTEGER NOT NULL REFERENCES departments(department_id)
);
CREATE TABLE professors (
    professor_id INTEGER PRIMARY KEY,
    first_name TEXT NOT NULL,
    last_name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    rank TEXT NOT NULL,
    hire_date DATE NOT NULL,
    department_id INTEGER NOT NULL REFERENCES departments(department_id)
);
CREATE TABLE courses (
    course_id INTEGER PRIMARY KEY,
    title TEXT NOT NULL,
    credits INTEGER NOT NULL,
    semester TEXT NOT NULL,
    year INTEGER NOT NULL,
    start_date DATE NOT NULL,
    department_id INTEGER NOT NULL REFERENCES departments(department_id)
);
CREATE TABLE student_courses (
    student_id INTEGER NOT NULL REFERENCES students(student_id),
    course_id INTEGER NOT NULL REFERENCES courses(course_id),
    enrollment_date DATE NOT NULL,
    grade INTEGER,
    PRIMARY KEY (student_id, course_id)
);
"""


def _slug(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def build_rows(seed: int = SEED) -> dict[str, list[tuple]]:
    """All rows of the demo database, deterministic for ``seed``."""
    rng = random.Random(seed)
    departments = [(i + 1, name, building, budget) for i, (name, building, budget) in enumerate(DEPARTMENTS)]
    dept_id = {name: i for i, name, _, _ in departments}

    students = []
    used_inst: set[str] = set()
    for sid in range(1, 301):
        first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
        base = f"{_slug(first)}.{_slug(last)}"
        inst = f"{base}@university.edu"
        k = 2
        while inst in used_inst:
            inst, k = f"{base}{k}@university.edu", k + 1
        used_inst.add(inst)
        personal = f"{_slug(first)}{_slug(last)}{rng.randint(1, 99)}@{rng.choice(EMAIL_DOMAINS)}"
        enroll_year = rng.choice([2020, 2021, 2022, 2023, 2024, 2025])
        enrollment = date(enroll_year, rng.choice([9, 10]), rng.randint(1, 28))
        birth = date(enroll_year - rng.randint(18, 24), rng.randint(1, 12), rng.randint(1, 28))
        years_in = 2026 - enroll_year
        credits = min(180, max(0, years_in * 55 + rng.randint(-25, 10)))
        dept = rng.choice(departments)[0]
        students.append((sid, first, last, personal, inst, enrollment.isoformat(), birth.isoformat(), credits, dept))

    professors = []
    for pid in range(1, 41):
        first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
        email = f"{_slug(first)[0]}.{_slug(last)}{pid}@university.edu"
        hire = date(rng.randint(1995, 2024), rng.randint(1, 12), rng.randint(1, 28))
        dept = departments[(pid - 1) % len(departments)][0]
        professors.append((pid, first, last, email, rng.choice(RANKS), hire.isoformat(), dept))

    courses = []
    cid = 0
    for dname, titles in COURSES.items():
        for title in titles:
            cid += 1
            year = rng.choice([2023, 2024, 2025, 2026])
            semester = rng.choice(["Fall", "Spring"])
            start = date(year, 9 if semester == "Fall" else 2, rng.randint(1, 20))
            courses.append((cid, title, rng.choice([6, 6, 9, 12]), semester, year, start.isoformat(), dept_id[dname]))

    enrolments = []
    for s in students:
        sid, enrolled_at = s[0], date.fromisoformat(s[5])
        for course in rng.sample(courses, rng.randint(3, 9)):
            course_start = date.fromisoformat(course[5])
            when = max(enrolled_at, course_start - timedelta(days=rng.randint(5, 40)))
            grade = None if rng.random() < 0.08 else rng.choice(list(range(18, 32)))
            enrolments.append((sid, course[0], when.isoformat(), grade))
    enrolments.sort()
    # Make sure the paper's example questions have answers: engineering students in 'Database'.
    database_course = next(c[0] for c in courses if c[1] == "Database")
    eng = dept_id["Engineering"]
    have = {(e[0], e[1]) for e in enrolments}
    for s in [s for s in students if s[8] == eng][:12]:
        if (s[0], database_course) not in have:
            enrolments.append((s[0], database_course, "2025-09-15", 27))
    enrolments.sort()
    return {
        "departments": departments,
        "students": students,
        "professors": professors,
        "courses": courses,
        "student_courses": enrolments,
    }


def write_demo_db(path: str | Path, seed: int = SEED) -> Path:
    """Write the demo database to ``path`` (replacing it); byte-identical for the same seed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.unlink(missing_ok=True)
    con = sqlite3.connect(tmp)
    try:
        con.executescript(DDL)
        for table, rows in build_rows(seed).items():
            marks = ",".join("?" * len(rows[0]))
            con.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
        con.commit()
        con.execute("VACUUM")
    finally:
        con.close()
    tmp.replace(path)
    return path
