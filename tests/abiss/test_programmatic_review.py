"""Programmatic questions a careful annotator accepts (issue #35), on small real SQLite files built
here: identifiers become the words a person uses, templates run only where they fit, thresholds are
round, readings differ in content, column meaning is kept, undeclared relationships are found from
the data, and a database gets no two questions that mean the same."""

import csv
import re
import sqlite3
from pathlib import Path

import pytest

from pipelines.abiss.programmatic import generate_candidates
from pipelines.abiss.programmatic.phrasing import column_words, table_words
from pipelines.abiss.programmatic.schema_analysis import analyze
from pipelines.sqltools.identifiers import identifier_words

DIRECTORS = ["Ben Jones", "Brandon Vietti", "Michael Chang", "Dave Filoni"]


def _cartoons(path: Path) -> Path:
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE TV_Channel (id INTEGER PRIMARY KEY, series_name TEXT, Country TEXT);
        CREATE TABLE Cartoon (id INTEGER PRIMARY KEY, Title TEXT, Directed_by TEXT, Written_by TEXT,
                              Openning_Year INTEGER, Net_Worth_Millions REAL, Channel INTEGER REFERENCES TV_Channel(id),
                              current_address_id INTEGER);
    """)
    con.executemany(
        "INSERT INTO TV_Channel VALUES (?,?,?)",
        [(i, f"Channel {c}", ["Italy", "France", "Spain"][i % 3]) for i, c in enumerate("ABCDEF", 1)],
    )
    con.executemany(
        "INSERT INTO Cartoon VALUES (?,?,?,?,?,?,?,?)",
        [
            (i, f"Episode {i}", DIRECTORS[i % 4], DIRECTORS[(i + 1) % 4], 1990 + i, 1.5 * i, i % 6 + 1, i)
            for i in range(1, 41)
        ],
    )
    con.commit()
    con.close()
    return path


@pytest.fixture(scope="module")
def cartoons(tmp_path_factory) -> Path:
    return _cartoons(tmp_path_factory.mktemp("cartoons") / "cartoons.sqlite")


def test_identifiers_become_the_words_a_person_uses():
    assert identifier_words("Openning_Year") == ["opening", "year"]  # a schema typo, said right
    assert identifier_words("siz") == ["size"]
    assert identifier_words("18_49_Rating_Share") == ["18-49", "rating", "share"]
    assert column_words("Directed_by") == "director" and column_words("Written_by") == "writer"
    assert column_words("Net_Worth_Millions") == "net worth"
    assert table_words("Ref_Template_Types") == "template types"


def test_profiles_drop_key_suffixes_and_fix_typos(cartoons):
    a = analyze(cartoons)
    t = a.table("Cartoon")
    assert t.column("Openning_Year").words == "opening year"
    assert t.column("Directed_by").words == "director"


def test_predicate_columns_are_said_as_verbs(cartoons):
    report = generate_candidates(cartoons, per_subcategory=6, seed=1, subcategories=["answerable"])
    texts = [c.question for c in report.candidates]
    assert texts
    for text in texts:
        assert not re.search(r"\b(directed|written) by (is|are)\b|whose (directed|written) by", text), text
        assert "openning" not in text.lower(), text
    said = [t for t in texts if re.search(r"\b(directed|written) by '", t)]
    sql = [c.sql for c in report.candidates if re.search(r"\b(directed|written) by '", c.question)]
    assert all('"Directed_by" =' in s or '"Written_by" =' in s for s in sql), sql
    assert said and len(said) == len(sql)


def test_bird_column_descriptions_name_columns(tmp_path):
    db = tmp_path / "hero.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE superhero (id INTEGER PRIMARY KEY, superhero_name TEXT, hgt_cm INTEGER)")
    con.executemany("INSERT INTO superhero VALUES (?,?,?)", [(i, f"Hero {i}", 150 + i) for i in range(30)])
    con.commit()
    con.close()
    desc = tmp_path / "database_description"
    desc.mkdir()
    with (desc / "superhero.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["original_column_name", "column_name", "column_description", "data_format", "value_description"])
        w.writerow(["hgt_cm", "", "the height of the superhero", "integer", ""])
        w.writerow(["superhero_name", "", "the name of the superhero", "text", ""])
    a = analyze(db)
    assert a.table("superhero").column("hgt_cm").words == "height"
