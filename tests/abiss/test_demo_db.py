import hashlib

from cli import main
from pipelines.abiss.demo_db import write_demo_db
from resources.catalog import inspect_database
from resources.sql import execute_sql


def test_deterministic_bytes(tmp_path):
    a = write_demo_db(tmp_path / "a.sqlite").read_bytes()
    b = write_demo_db(tmp_path / "b.sqlite").read_bytes()
    assert hashlib.sha256(a).digest() == hashlib.sha256(b).digest()


def test_paper_examples_have_answers(demo_db_path):
    answerable = [
        # lexical overlap (§3.2.2): both email readings are non-empty and differ
        "SELECT s.personal_email FROM students s JOIN student_courses sc ON sc.student_id = s.student_id "
        "JOIN courses c ON c.course_id = sc.course_id WHERE c.title = 'Database'",
        "SELECT s.institutional_email FROM students s JOIN student_courses sc ON sc.student_id = s.student_id "
        "JOIN courses c ON c.course_id = sc.course_id WHERE c.title = 'Database'",
        # entity ambiguity: both enrollment dates
        "SELECT s.enrollment_date, sc.enrollment_date FROM students s JOIN student_courses sc "
        "ON sc.student_id = s.student_id JOIN courses c ON c.course_id = sc.course_id WHERE c.title = 'Database'",
        # attachment ambiguity: students in engineering
        "SELECT s.student_id FROM students s JOIN departments d ON d.department_id = s.department_id "
        "WHERE d.name = 'Engineering'",
        # senior students (evidence: > 90 credits)
        "SELECT student_id FROM students WHERE credits > 90",
        # missing user knowledge: my department = Engineering
        "SELECT p.professor_id FROM professors p JOIN departments d USING (department_id) WHERE d.name = 'Engineering'",
    ]
    for sql in answerable:
        r = execute_sql(demo_db_path, sql)
        assert r.ok and r.row_count > 0, sql
    a = execute_sql(demo_db_path, answerable[0]).rows
    b = execute_sql(demo_db_path, answerable[1]).rows
    assert set(a) != set(b)


def test_unanswerable_examples_stay_unanswerable(demo_db_path):
    info = inspect_database(demo_db_path)
    assert not any("staff" in t.name for t in info.tables)
    # no professor <-> course link anywhere: neither column nor bridge table
    for t in info.tables:
        cols = {c.name for c in t.columns}
        assert not ({"professor_id", "course_id"} <= cols), t.name
    assert execute_sql(demo_db_path, "SELECT * FROM staff").kind.value == "runtime"


def test_cli_demo_db_writes_file(tmp_path, capsys):
    out = tmp_path / "u.sqlite"
    assert main(["demo-db", str(out)]) == 0
    assert out.exists() and str(out) in capsys.readouterr().out
