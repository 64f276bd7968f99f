"""SemBench text scenarios as local DuckDB databases, with the answer-giving label columns kept out.

Each scenario becomes two files:

* ``sembench_<scenario>.duckdb`` — what AI operators, generators and judges may see. Tables in ``main`` carry
  the ThalamusDB names (``Reviews``, ``Movies``); the BigQuery names (``movie.reviews``) are views in
  their own schema, since DuckDB identifiers are case-insensitive. The hidden label columns
  (:attr:`Scenario.hidden`) are never written to it.
* ``sembench_<scenario>_labels.duckdb`` — ``text_labels(text, label)``: the hidden label of every AI input
  text, read only by the label-oracle backend.

Queries come from the SemBench dialect files (BigQuery and ThalamusDB), questions from
``natural_language/``. ``--sample N`` keeps a seeded sample of N rows per group (Reviews per movie),
so an LLM operator stays practical.
"""

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from resources.sql import open_duckdb_readonly
from storage.faults import written_via_temp
from storage.sqlnames import quote_ident

SEMBENCH_FILES = Path("sembench") / "files"


@dataclass(frozen=True)
class Table:
    name: str  # ThalamusDB / main-schema name
    csv: str  # relative to the scenario folder
    bigquery_name: str  # view name inside the BigQuery schema
    hidden: tuple[str, ...] = ()  # label columns that give the answer away
    sample_group: str | None = None  # sample N rows per value of this column
    key: tuple[str, ...] = ()  # columns that identify a row of the shipped data (AI parts project them)
    # a key the benchmark's schema declares (PRIMARY KEY / UNIQUE NOT NULL). Only such a key, when the
    # data satisfies it, may become a uniqueness / NOT NULL assumption of a proof (#39): ``key`` above
    # is read off the data, and a key seen in one database is no law of every database.
    declared_key: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scenario:
    name: str
    bigquery_schema: str
    tables: tuple[Table, ...]
    query_dirs: dict[str, str]  # dialect -> folder with Q*.sql
    questions_dir: str
    # label oracle: the labelled source, which input text column maps to which label column
    label_sql: str  # run over the raw CSVs: SELECT text, label
    vocabulary: dict[str, str]  # prompt term -> label value it asks for
    score_of: dict[str, float] = field(default_factory=dict)  # label -> AI.SCORE answer
    text_queries: dict[str, tuple[str, ...]] = field(default_factory=dict)  # dialect -> runnable query ids
    wrong_columns: dict[str, str] = field(default_factory=dict)  # AI input column -> a wrong text column (variants)
    alternative_literals: dict[str, str] = field(default_factory=dict)  # literal -> another existing value

    @property
    def hidden(self) -> dict[str, tuple[str, ...]]:
        return {t.name: t.hidden for t in self.tables}

    def key_columns(self, declared: bool = False) -> dict[str, tuple[str, ...]]:
        """Row identifiers by every name of each table (``declared``: only the declared keys)."""
        out = {}
        for t in self.tables:
            key = t.declared_key if declared else t.key
            if declared and not key:
                continue
            out[t.name.lower()] = key
            out[f"{self.bigquery_schema}.{t.bigquery_name}".lower()] = key
            out[t.bigquery_name.lower()] = key
        return out


# SemBench declares no keys: its loaders (query/flockmtl/setup_db.sql, gold_sql/README.txt) create every
# table with read_csv_auto, no PRIMARY KEY or UNIQUE. So no table below has a ``declared_key``, and the
# verifier and the test-suite databases assume none: duplicates and NULLs anywhere (#39).
MOVIE = Scenario(
    name="movie",
    bigquery_schema="movie",
    tables=(
        Table(
            "Reviews",
            "data/sf_2000/Reviews.csv",
            "reviews",
            hidden=("scoreSentiment", "reviewState", "originalScore"),
            sample_group="id",
            key=("reviewId",),
        ),
        Table("Movies", "data/sf_2000/Movies.csv", "movies", key=("id",)),
    ),
    query_dirs={"bigquery": "query/bigquery", "thalamusdb": "query/thalamusdb_extracted"},
    questions_dir="query/natural_language",
    label_sql="SELECT reviewText AS text, scoreSentiment AS label FROM read_csv('{dir}/data/sf_2000/Reviews.csv', all_varchar=true)",
    vocabulary={"positive": "POSITIVE", "negative": "NEGATIVE"},
    score_of={"POSITIVE": 4.0, "NEGATIVE": 2.0},
    text_queries={"bigquery": tuple(f"Q{i}" for i in range(1, 11)), "thalamusdb": tuple(f"Q{i}" for i in range(1, 9))},
    wrong_columns={"reviewText": "criticName"},
    alternative_literals={"taken_3": "get_out", "ant_man_and_the_wasp_quantumania": "taken_3"},
)

_DISEASES = (
    "allergy",
    "acne",
    "varicose veins",
    "gastroesophageal reflux disease",
    "urinary tract infection",
    "impetigo",
    "pneumonia",
    "malaria",
    "fungal infection",
    "cervical spondylosis",
    "dimorphic hemorrhoids",
    "jaundice",
    "common cold",
    "dengue",
    "hypertension",
    "arthritis",
    "migraine",
    "drug reaction",
    "psoriasis",
    "diabetes",
    "chicken pox",
    "typhoid",
    "bronchial asthma",
    "peptic ulcer disease",
)

MEDICAL = Scenario(
    name="medical",
    bigquery_schema="medical_dataset",
    tables=(
        # patient_data.csv is the label-free file; patient_data_with_labels.csv feeds only the oracle.
        Table("patients", "data/patient_data.csv", "patients", key=("patient_id",)),
        Table("symptoms_texts", "data/text_symptoms_data.csv", "symptoms_texts", key=("symptom_id",)),
    ),
    query_dirs={"bigquery": "query/bigquery", "thalamusdb": "query/thalamusdb"},
    questions_dir="query/natural_language",
    label_sql=(
        "SELECT s.symptoms AS text, l.text_diagnosis AS label "
        "FROM read_csv('{dir}/data/text_symptoms_data.csv', all_varchar=true) s "
        "JOIN read_csv('{dir}/data/patient_data_with_labels.csv', all_varchar=true) l USING (patient_id)"
    ),
    vocabulary={**{d: d for d in _DISEASES}, "skin acne": "acne"},
    text_queries={"bigquery": ("Q1", "Q4", "Q10"), "thalamusdb": ("Q1", "Q4")},
    wrong_columns={"symptoms": "patient_id"},
)

SCENARIOS: dict[str, Scenario] = {s.name: s for s in (MOVIE, MEDICAL)}


class ScenarioError(ValueError):
    pass


def get_scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise ScenarioError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}") from None


def scenario_dir(data_root: Path, scenario: Scenario) -> Path:
    d = Path(data_root) / SEMBENCH_FILES / scenario.name
    if not d.is_dir():
        raise ScenarioError(f"SemBench scenario folder {d} not found; point --data at the folder holding sembench/")
    return d


@dataclass(frozen=True)
class ScenarioDB:
    scenario: str
    path: Path  # label-free database (the only one queries run on)
    labels_path: Path  # text -> label, for the oracle backend only
    sample: int | None
    row_counts: dict[str, int]


_q = quote_ident


def build_scenario_db(
    scenario: Scenario | str,
    data_root: Path,
    out_dir: Path,
    *,
    sample: int | None = None,
    seed: int = 0,
    sample_groups: tuple[str, ...] | None = None,
    rebuild: bool = True,
) -> ScenarioDB:
    """Write the label-free scenario database and its label file (idempotent per sample/seed).

    ``sample`` keeps N seeded rows per group (Reviews: per movie); ``sample_groups`` also keeps only
    those groups (e.g. ``taken_3``), for a tiny database an LLM operator can run on in seconds."""

    sc = get_scenario(scenario) if isinstance(scenario, str) else scenario
    src = scenario_dir(data_root, sc)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    groups = tuple(sorted(sample_groups or ()))
    suffix = (f"_s{sample}_{seed}" if sample else "") + (f"_g{stable_id(*groups)[:8]}" if groups else "")
    # the file name is DuckDB's catalog name: it must differ from the BigQuery schema name ("movie")
    path = out_dir / f"sembench_{sc.name}{suffix}.duckdb"
    labels_path = out_dir / f"sembench_{sc.name}{suffix}_labels.duckdb"
    if not rebuild and path.is_file() and labels_path.is_file():
        return ScenarioDB(sc.name, path, labels_path, sample, _row_counts(path, sc))
    counts: dict[str, int] = {}
    with written_via_temp(path, "the scenario database") as tmp:
        _build_tables(tmp, sc, src, sample, seed, groups, counts)
    with written_via_temp(labels_path, "the scenario's labels") as ltmp:
        _build_labels(ltmp, sc, src)
    return ScenarioDB(sc.name, path, labels_path, sample, counts)


def _build_tables(tmp: Path, sc: Scenario, src: Path, sample, seed, groups, counts: dict) -> None:
    con = duckdb.connect(str(tmp))
    try:
        con.execute(f"CREATE SCHEMA {_q(sc.bigquery_schema)}")
        for t in sc.tables:
            csv = src / t.csv
            if not csv.is_file():
                raise ScenarioError(f"{csv} not found (SemBench {sc.name} data)")
            cols = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM read_csv('{csv}')").fetchall()]
            keep = ", ".join(_q(c) for c in cols if c not in t.hidden)
            body = f"SELECT {keep} FROM read_csv('{csv}')"
            if sample and t.sample_group:
                # seeded per-group sample: the first N rows per group by hash(row key, seed)
                order = " , ".join(_q(k) for k in t.key) or "1"
                where = ""
                if groups:
                    where = (
                        f" WHERE {_q(t.sample_group)} IN ("
                        + ", ".join("'" + g.replace("'", "''") + "'" for g in groups)
                        + ")"
                    )
                body = (
                    f"SELECT {keep} FROM read_csv('{csv}'){where} QUALIFY row_number() OVER "
                    f"(PARTITION BY {_q(t.sample_group)} ORDER BY hash({order}, {int(seed)})) <= {int(sample)}"
                )
            con.execute(f"CREATE TABLE {_q(t.name)} AS {body}")
            con.execute(
                f"CREATE VIEW {_q(sc.bigquery_schema)}.{_q(t.bigquery_name)} AS SELECT * FROM main.{_q(t.name)}"
            )
            counts[t.name] = con.execute(f"SELECT count(*) FROM {_q(t.name)}").fetchall()[0][0]
        con.execute("CHECKPOINT")
    finally:
        con.close()


def _build_labels(ltmp: Path, sc: Scenario, src: Path) -> None:
    con = duckdb.connect(str(ltmp))
    try:
        con.execute(
            "CREATE TABLE text_labels AS SELECT DISTINCT text, label FROM ("
            + sc.label_sql.format(dir=str(src))
            + ") WHERE text IS NOT NULL"
        )
        con.execute("CHECKPOINT")
    finally:
        con.close()


def _row_counts(path: Path, sc: Scenario) -> dict[str, int]:
    con = open_duckdb_readonly(Path(path), threads=1)
    try:
        return {t.name: con.execute(f"SELECT count(*) FROM main.{_q(t.name)}").fetchall()[0][0] for t in sc.tables}
    finally:
        con.close()


def satisfied_keys(db_path: Path, key_columns: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """The declared keys the data of ``db_path`` satisfies (unique and never NULL), by the same
    table names as ``key_columns``. The movie data repeats ``Reviews.reviewId`` (135 duplicate
    rows) and ``Movies.id`` (11): a generated database that kept them unique could never tell
    ``COUNT(*)`` from ``COUNT(DISTINCT reviewId)`` (#39 item 3)."""
    tables = visible_columns(db_path)
    con = open_duckdb_readonly(Path(db_path), threads=1)
    ok: dict[str, bool] = {}
    try:
        for qualified in tables:
            _, _, bare = qualified.partition(".")
            key = key_columns.get(qualified.lower()) or key_columns.get(bare.lower())
            if not key:
                continue
            cols = ", ".join(f'"{c}"' for c in key)
            nonnull = " AND ".join(f'"{c}" IS NOT NULL' for c in key)
            total, distinct, full = con.execute(
                f"SELECT COUNT(*), (SELECT COUNT(*) FROM (SELECT DISTINCT {cols} FROM {qualified})), "
                f"COUNT(*) FILTER (WHERE {nonnull}) FROM {qualified}"
            ).fetchone()
            ok[bare.lower()] = total == distinct == full
    finally:
        con.close()
    return {name: key for name, key in key_columns.items() if ok.get(name.split(".")[-1], False)}


def visible_columns(db_path: Path) -> dict[str, list[str]]:
    """Every (schema.table -> columns) an AI-visible query can reach in ``db_path``."""

    con = open_duckdb_readonly(Path(db_path), threads=1)  # same config as the executor sessions
    try:
        rows = con.execute(
            "SELECT table_schema || '.' || table_name, column_name FROM information_schema.columns "
            "ORDER BY table_schema, table_name, ordinal_position"
        ).fetchall()
    finally:
        con.close()
    out: dict[str, list[str]] = {}
    for t, c in rows:
        out.setdefault(t, []).append(c)
    return out


def visible_types(db_path: Path) -> dict[str, dict[str, str]]:
    """Every (schema.table -> {column: DuckDB type}) of ``db_path`` (the normal forms' schema)."""

    con = open_duckdb_readonly(Path(db_path), threads=1)
    try:
        rows = con.execute(
            "SELECT table_schema || '.' || table_name, column_name, data_type FROM information_schema.columns "
            "ORDER BY table_schema, table_name, ordinal_position"
        ).fetchall()
    finally:
        con.close()
    out: dict[str, dict[str, str]] = {}
    for t, c, ty in rows:
        out.setdefault(t, {})[c] = ty
    return out


def leaked_label_columns(db_path: Path, scenario: Scenario) -> list[str]:
    """Hidden label columns reachable in the AI-visible database (must be empty)."""
    hidden = {c.lower() for t in scenario.tables for c in t.hidden}
    return [f"{t}.{c}" for t, cols in visible_columns(db_path).items() for c in cols if c.lower() in hidden]


def load_labels(labels_path: Path) -> dict[str, str]:
    con = duckdb.connect(str(labels_path), read_only=True)
    try:
        return dict(con.execute("SELECT text, label FROM text_labels").fetchall())
    finally:
        con.close()


@dataclass(frozen=True)
class GoldQuery:
    scenario: str
    dialect: str
    question_id: str
    question: str
    sql: str  # as written in the dialect file (placeholders filled at rewrite time)
    path: str


_QID = re.compile(r"^[Qq](\d+)")


def _qid_key(qid: str):
    m = _QID.match(qid)
    return (int(m.group(1)) if m else 10**6, qid)


def load_queries(
    scenario: Scenario | str, data_root: Path, dialects=("bigquery", "thalamusdb"), only_text: bool = True
) -> list[GoldQuery]:
    """The SemBench gold AI-SQL of a scenario: one record per (dialect, query file) with its question."""
    sc = get_scenario(scenario) if isinstance(scenario, str) else scenario
    src = scenario_dir(data_root, sc)
    out = []
    for dialect in dialects:
        folder = src / sc.query_dirs[dialect]
        for f in sorted(folder.glob("*.sql"), key=lambda p: _qid_key(p.stem)):
            qid = f.stem
            if only_text and qid not in sc.text_queries.get(dialect, ()):
                continue
            text = f.read_text()
            if not text.strip():
                continue
            qfile = src / sc.questions_dir / f"{qid}.txt"
            question = qfile.read_text().strip() if qfile.is_file() else ""
            out.append(GoldQuery(sc.name, dialect, qid, question, text, str(f)))
    return out


def stable_id(*parts) -> str:
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:16]
