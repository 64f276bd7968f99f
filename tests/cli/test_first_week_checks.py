"""#31 items 1-2: everything typed is checked before a run exists, in one line, and no run, no file
and no network call is left behind; every member's key variable is checked from the environment."""

import polars as pl
import pytest

from assets.ambitab.card import eval_config, eval_preflight
from assets.shared.preflight import PreflightError, check_keys
from resources.llm.config import CouncilConfig, missing_keys
from storage.artifacts import SchemalessFrame
from storage.stores import artifact_store
from tests.cli.conftest import GatedStub, council_file, quandary, quandary_here, runs_in


class NoDecide:
    """A custom asker class that forgot its decide(inp) method."""


def not_a_class(inp):
    return "stop"


class Asks:
    def decide(self, inp):
        return "stop"


@pytest.fixture
def records():
    """ambitab_records of one corpus with two splits, in the test's own store."""
    frame = pl.DataFrame({"record_id": ["a", "b", "c"], "split": ["slice_test", "slice_test", "train"]})
    artifact_store().write_version(frame, "ambitab_records", "ambrosia")
    return frame


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"limit": -1}, "--limit -1"),
        ({"limit": 0}, "--limit 0"),
        ({"seeds": []}, "--seeds 0"),
        ({"split": "bogus"}, "splits: slice_test, train"),
        ({"oracles": ["llm@nosuch"]}, "no member 'nosuch' in the oracles council"),
        ({"askers": [f"{__name__}:NoDecide"]}, "has no decide(inp) method"),
        ({"askers": [f"{__name__}:not_a_class"]}, "is a function, not a class"),
        ({"askers": ["tests.cli.nowhere:Asker"]}, "cannot be loaded"),
        ({"oracles": ["oracle_of_delphi"]}, "unknown oracle"),
    ],
)
def test_eval_options_are_refused_before_a_run(records, values, says):
    with pytest.raises(PreflightError) as exc:
        eval_preflight("ambrosia", eval_config(**values))
    assert says in str(exc.value) and "\n" not in str(exc.value)


def test_good_eval_options_pass(records):
    eval_preflight(
        "ambrosia",
        eval_config(limit=1, seeds=[0], split="train", oracles=["llm@smollm2"], askers=["none", f"{__name__}:Asks"]),
    )


def test_store_refuses_a_frame_without_columns(isolated_home):
    store = artifact_store()
    with pytest.raises(SchemalessFrame, match="no columns"):
        store.write_version(pl.DataFrame(), "ambitab_episodes", "ambrosia")
    assert store.latest_location("ambitab_episodes", "ambrosia") is None
    # zero rows with a schema is a real, readable result
    store.write_version(pl.DataFrame({"x": []}, schema={"x": pl.Int64}), "ambitab_episodes", "ambrosia")
    assert store.read_latest("ambitab_episodes", "ambrosia").columns == ["x"]


def _hosted(key_env: str | None = "QUANDARY_KEY_GPT", model: str = "openai/gpt-4o") -> CouncilConfig:
    member = {"model": model, **({"api_key_env": key_env} if key_env else {})}
    return CouncilConfig.model_validate({"members": {"gpt": member}, "councils": {"default": ["gpt"]}})


def test_missing_key_names_the_variable_quandary_reads(monkeypatch):
    monkeypatch.delenv("QUANDARY_KEY_GPT", raising=False)
    with pytest.raises(PreflightError, match=r"\$QUANDARY_KEY_GPT is not set"):
        check_keys(_hosted())
    monkeypatch.setenv("QUANDARY_KEY_GPT", "sk-test")
    check_keys(_hosted())
    # a hosted member naming no variable: told which QUANDARY_KEY_ name to add, unless the provider's is set
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert "api_key_env: QUANDARY_KEY_OPENAI" in missing_keys(_hosted(None))[0]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert missing_keys(_hosted(None)) == []
    # the embedded default and local servers need no key
    assert (
        missing_keys(CouncilConfig.model_validate(__import__("resources.llm.config").llm.config.DEFAULT_CONFIG)) == []
    )


@pytest.mark.integration
def test_council_check_and_run_refuse_a_missing_key_without_a_call(cli_env, tmp_path):
    env = {k: v for k, v in cli_env.items() if k != "QUANDARY_KEY_STUB"}
    with GatedStub() as stub:
        council = council_file(tmp_path / "council.json", stub.base_url)
        check = quandary("council", "check", "--config", str(council), env=env)
        env["QUANDARY_COUNCIL_CONFIG"] = str(council)
        run = quandary("run", "--db", "university", "--grid", str(tmp_path / "grid.yaml"), env=env)
        assert stub.requests == []  # no server was contacted
    assert check.returncode == 2 and "$QUANDARY_KEY_STUB is not set" in check.stderr
    assert run.returncode == 2 and "$QUANDARY_KEY_STUB is not set" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert runs_in(tmp_path / "dagster_home") == []


@pytest.mark.integration
def test_bad_options_and_job_names_are_one_line_and_leave_no_run(cli_env, tmp_path):
    env = {**cli_env}
    artifact_store().write_version(
        pl.DataFrame({"record_id": ["a"], "split": ["train"]}), "ambitab_records", "ambrosia"
    )
    for args, says in [
        (("ambitab", "eval", "--corpus", "ambrosia", "--limit", "-1"), "--limit -1"),
        (("ambitab", "eval", "--corpus", "ambrosia", "--seeds", "0"), "--seeds 0"),
        (("ambitab", "eval", "--corpus", "ambrosia", "--split", "bogus"), "--split 'bogus'"),
        (("run", "--db", "university", "--job", "abiss_datset_job"), "unknown job 'abiss_datset_job'"),
        (("rerun", "--job", "abiss_datset_job", "--db", "university"), "unknown job 'abiss_datset_job'"),
    ]:
        r = quandary_here(*args, env=env)  # refused before a run: the process boundary adds nothing
        assert r.returncode == 2, (args, r.stderr)
        assert says in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
    assert runs_in(tmp_path / "dagster_home") == []
    assert artifact_store().latest_location("ambitab_episodes", "ambrosia") is None
