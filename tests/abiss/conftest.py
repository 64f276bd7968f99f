"""Fixtures for the benchmark-quality tests: programmatic candidates generated once per database."""

import random
import sqlite3
from pathlib import Path

import pytest

from pipelines.abiss.programmatic import generate_candidates
from pipelines.abiss.stages import StageContext
from pipelines.sqltools.schema_context import render_schema_context
from resources.catalog import inspect_database
from tests.abiss.cascade_helpers import council
from tests.abiss.pipeline_helpers import scripted_council  # noqa: F401 - the fixture of the folder's pipeline tests
from tests.conftest import SHARED_DATA


def _college(path: Path) -> Path:
    """A small college database shaped like Spider's college_2: text primary keys (dept_name), a
    building column whose values repeat, and a relationship table named by a verb (``takes``)."""
    rng = random.Random(7)
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE department (dept_name TEXT PRIMARY KEY, building TEXT, budget REAL);
        CREATE TABLE student (ID TEXT PRIMARY KEY, name TEXT, dept_name TEXT REFERENCES department(dept_name),
                              tot_cred INTEGER);
        CREATE TABLE course (course_id TEXT PRIMARY KEY, title TEXT, dept_name TEXT REFERENCES department(dept_name),
                             credits INTEGER);
        CREATE TABLE takes (ID TEXT REFERENCES student(ID), course_id TEXT REFERENCES course(course_id),
                            semester TEXT, year INTEGER, grade TEXT, PRIMARY KEY (ID, course_id, semester, year));
    """)
    depts = ["Biology", "Physics", "History", "Finance", "Music", "Comp. Sci.", "Statistics", "Geology"]
    buildings = ["Brodhead", "Bronfman", "Taylor", "Watson"]
    con.executemany(
        "INSERT INTO department VALUES (?,?,?)",
        [(d, buildings[i % 4], 50000.0 + 13000 * i) for i, d in enumerate(depts)],
    )
    first = [
        "Ana",
        "Ben",
        "Chen",
        "Dara",
        "Eli",
        "Fay",
        "Gus",
        "Hana",
        "Ivo",
        "Jun",
        "Kai",
        "Lea",
        "Mo",
        "Nia",
        "Oto",
        "Pia",
        "Quin",
        "Rui",
        "Sol",
        "Tao",
        "Uma",
        "Vic",
        "Wen",
        "Xia",
        "Yo",
        "Zed",
    ]
    con.executemany(
        "INSERT INTO student VALUES (?,?,?,?)",
        [(f"S{i:03d}", n, depts[i % 8], 10 + 7 * i) for i, n in enumerate(first)],
    )
    titles = [
        "Genetics",
        "Mechanics",
        "Modern Europe",
        "Markets",
        "Harmony",
        "Databases",
        "Probability",
        "Minerals",
        "Ecology",
        "Optics",
        "Rome",
        "Banking",
    ]
    con.executemany(
        "INSERT INTO course VALUES (?,?,?,?)",
        [(f"C{i:02d}", t, depts[i % 8], 3 + (i % 3)) for i, t in enumerate(titles)],
    )
    rows = {}
    while len(rows) < 90:
        key = (
            f"S{rng.randrange(26):03d}",
            f"C{rng.randrange(12):02d}",
            rng.choice(["Fall", "Spring"]),
            rng.choice([2017, 2018, 2019, 2020]),
        )
        rows[key] = rng.choice(["A", "B", "C", "A-", "B+"])
    con.executemany("INSERT INTO takes VALUES (?,?,?,?,?)", [(*k, g) for k, g in sorted(rows.items())])
    con.commit()
    con.close()
    return path


@pytest.fixture(scope="session")
def college_db(tmp_path_factory) -> Path:
    return _college(tmp_path_factory.mktemp("college") / "college.sqlite")


def _spider(name: str) -> Path:
    p = SHARED_DATA / "spider" / "database" / name / f"{name}.sqlite"
    if not p.is_file():
        pytest.skip(f"Spider database {name} not found under ../shared/data/spider/database (workplace only)")
    return p


_CACHE: dict = {}


@pytest.fixture(scope="session")
def generated(demo_db_path, college_db):
    """``name -> (db_path, GenerationReport)`` for the databases the issue's examples came from."""

    def get(name: str):
        if name not in _CACHE:
            path = {"university": demo_db_path, "college": college_db}.get(name) or _spider(name)
            _CACHE[name] = (path, generate_candidates(path, per_subcategory=3, seed=0))
        return _CACHE[name]

    return get


# the cascade stages run over the demo database's rendered schema context
@pytest.fixture(scope="module")
def schema_context(demo_db_path):
    return render_schema_context(inspect_database(demo_db_path))


@pytest.fixture
def make_ctx(demo_db_path, schema_context):
    def make(c: object | None = None, **kw) -> StageContext:
        return StageContext(str(demo_db_path), schema_context, c if c is not None else council(), **kw)

    return make
