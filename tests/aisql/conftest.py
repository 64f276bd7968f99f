"""Fixtures for the AI-operator SQL tests: real SemBench files from ../shared/data (skipped when absent)."""

from pathlib import Path

import pytest
import yaml

from pipelines.aisql.operators import AIRuntime, LabelOracle
from pipelines.aisql.scenarios import MOVIE, build_scenario_db, load_labels
from tests.conftest import SHARED_DATA

SEMBENCH = SHARED_DATA / "sembench" / "files"


@pytest.fixture(scope="session")
def sembench_root() -> Path:
    if not SEMBENCH.is_dir():
        pytest.skip(f"SemBench data not found at {SEMBENCH} (only present in the workplace checkout)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def movie_db(sembench_root, tmp_path_factory):
    return build_scenario_db("movie", sembench_root, tmp_path_factory.mktemp("aisql_movie"))


@pytest.fixture(scope="session")
def medical_db(sembench_root, tmp_path_factory):
    return build_scenario_db("medical", sembench_root, tmp_path_factory.mktemp("aisql_medical"))


@pytest.fixture(scope="session")
def movie_labels(movie_db):
    return load_labels(movie_db.labels_path)


@pytest.fixture
def oracle_runtime(movie_labels):
    """A fresh runtime over the movie label oracle; call with p (flip rate) and seed."""

    made = []

    def make(p: float = 0.0, seed: int = 0, budget: int = 5000) -> AIRuntime:
        rt = AIRuntime(
            LabelOracle(movie_labels, MOVIE.vocabulary, p=p, seed=seed, score_of=MOVIE.score_of), budget=budget
        )
        made.append(rt)
        return rt

    yield make
    for rt in made:
        rt.close()


def movie_query(root: Path, dialect: str, qid: str) -> str:
    folder = "bigquery" if dialect == "bigquery" else "thalamusdb_extracted"
    return (root / "sembench" / "files" / "movie" / "query" / folder / f"{qid}.sql").read_text()


JUDGE_ACCEPT = {
    "scores": {"overall_similarity": 5, "relational_similarity": 5, "ai_similarity": 4},
    "analysis": {"primary_error_source": "none", "justification": "paraphrase"},
}


def scripted_config(tmp_path: Path, names=("fake",)) -> Path:
    """A council config whose every role is the scripted provider."""

    members = {
        n: {
            "model": f"scripted/{n}",
            "max_tokens": 64,
            "max_in_flight": 8,
            "timeout_s": 5,
            "max_retries": 0,
            "backoff_base_s": 0.001,
            "repair": False,
        }
        for n in names
    }
    cfg = tmp_path / "council.yaml"
    cfg.write_text(yaml.safe_dump({"members": members, "councils": {"default": list(names)}}))
    return cfg


def judge_cases(scenario: str, root: Path, home: Path, cases) -> dict:
    """{id: PairJudgement} of (id, gold, candidate, dialect, ...) cases, judged like `aisql evaluate
    --methods ex,layers` (label oracle without noise) on the real scenario database."""
    from pipelines.aisql.judging import PairToJudge, judge_pairs, open_judging
    from pipelines.aisql.pipeline import AisqlSettings, prepare_db

    judging = open_judging(AisqlSettings(flip_rate=0.0), prepare_db(scenario, root, home))
    try:
        done = judge_pairs(judging, [PairToJudge(c[0], c[1], c[2], c[3]) for c in cases], ("ex", "layers"))
    finally:
        judging.close()
    return {c[0]: r for c, (r, _) in zip(cases, done)}


def judged_fixture(scenario: str, cases, dialect: str):
    """A module fixture: :func:`judge_cases` of (id, gold, candidate, ...) cases in ``dialect``."""

    @pytest.fixture(scope="module")
    def judged(sembench_root, tmp_path_factory):
        pairs = [(c[0], c[1], c[2], dialect) for c in cases]
        return judge_cases(scenario, sembench_root, tmp_path_factory.mktemp(scenario), pairs)

    return judged
