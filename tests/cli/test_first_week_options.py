"""#42 items 1-2: every option of `aisql judge`, `interact`, `ambitab build` and `ambitab eval` is
checked before a run exists, in one line naming the fix (exit 2), through the real command line
(`cli.main` in the test process: no run starts, so a process of its own adds nothing but its imports);
argparse's own errors are one line too; a zero-sized interaction run is refused and the stored
results stay."""

import polars as pl
import pytest

from storage.stores import artifact_store
from tests.cli.conftest import quandary_here, runs_in
from tests.conftest import SHARED_DATA

STORED = pl.DataFrame(
    {"question_id": ["q1"], "mode": ["ground_truth"]}, schema={"question_id": pl.String, "mode": pl.String}
)


def _refused(args, says, env):
    r = quandary_here(*args, env=env)
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], (args, r.stderr)
    assert "Traceback" not in r.stdout + r.stderr
    return lines[0]


@pytest.mark.integration
def test_bad_options_are_one_line_before_any_run(cli_env, tmp_path):
    store = artifact_store()
    before = store.write_version(STORED, "interaction_conversations", "university")
    cases = [
        (("aisql", "judge", "--scenario", "moive"), "--scenario moive: unknown scenario; scenarios: medical, movie"),
        (("aisql", "judge", "--methods", "ex,ourz"), "--methods ex,ourz: unknown ourz; known: ex, layers, mm"),
        (("interact", "--db", "university", "--max-steps", "-1"), "--max-steps -1: give 0 or more"),
        (("interact", "--db", "university", "--agents", "smolm2"), "--agents smolm2: not a system_agents member"),
        (("interact", "--db", "universty"), "'universty' is not registered (registered: university)"),
        (("interact", "--db", "university", "--max-questions", "0"), "--max-questions 0: give at least 1"),
        (("interact", "--db", "university", "--modes", "gold"), "unknown mode 'gold'"),
        (("interact", "--db", "university"), "no dataset for 'university'"),
        (("ambitab", "build", "--corpus", "ambrosia", "--data", str(tmp_path), "--max-rows", "-5"), "--max-rows -5"),
        (("ambitab", "eval", "--corpus", "ambrosia", "--limit", "-1"), "--limit -1: give at least 1 record"),
        (("ambitab", "eval", "--corpus", "ambrosia", "--split", "test"), "no ambrosia records materialized"),
        # argparse's own errors: the problem and where the help is, no usage block
        (("interact", "--db"), "expected at least one argument (see `quandary interact --help`)"),
        (("aisql", "judge", "--generate", "two"), "invalid int value: 'two' (see `quandary aisql judge --help`)"),
        (("ambitab", "buid"), "invalid choice: 'buid'"),
    ]
    for args, says in cases:
        _refused(args, says, cli_env)
    for budget in ("3s", "0", "-5"):  # the verifier's budget is read in the judge's step: checked first
        _refused(("aisql", "judge"), "QUANDARY_VERIFIER_BUDGET_MS=", {**cli_env, "QUANDARY_VERIFIER_BUDGET_MS": budget})
    assert runs_in(tmp_path / "dagster_home") == []
    assert store.latest_location("interaction_conversations", "university") == str(before.path)
    assert store.read_latest("interaction_conversations", "university").equals(STORED)


@pytest.mark.integration
def test_aisql_question_ids_are_checked_against_the_scenario(cli_env, tmp_path):
    if not (SHARED_DATA / "sembench").is_dir():
        pytest.skip(f"SemBench data not found under {SHARED_DATA}")
    line = _refused(
        ("aisql", "judge", "--data", str(SHARED_DATA), "--questions", "Q2,Q99"),
        "--questions Q2,Q99: unknown Q99",
        cli_env,
    )
    assert "known: Q1, Q2, Q3" in line  # in the scenario's own order
    _refused(
        ("aisql", "judge", "--data", str(SHARED_DATA), "--variants", "paraphrse"),
        "--variants paraphrse: unknown paraphrse",
        cli_env,
    )
    assert runs_in(tmp_path / "dagster_home") == []
