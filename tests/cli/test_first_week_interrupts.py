"""#31 item 6: Ctrl-C during `interact` ends with one line (no sqlalchemy traceback), like SIGTERM;
#42 item 4: at once, cancelling the call in flight, and the run reads as CANCELED."""

import json
import os
import signal
import sys

import pytest

from storage.stores import artifact_store
from tests.cli.conftest import GatedStub, council_file, quandary, runs_in
from tests.cli.test_runs import _answerable, _start


def _interrupt_when_held(stub, proc, sig, what):
    """A terminal's Ctrl-C reaches the whole foreground process group, children included."""
    try:
        assert stub.held.wait(300), f"{what} never sent the LLM call the stub holds"
        os.killpg(proc.pid, sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, out, err


@pytest.mark.integration  # real processes, servers or a Dagster instance
def test_ctrl_c_during_interact_is_one_line(cli_env, tmp_path):
    records = tmp_path / "questions.json"
    records.write_text(
        json.dumps(
            [
                _answerable("How many departments are there?", "SELECT COUNT(*) FROM departments"),
                _answerable("How many students are there?", "SELECT COUNT(*) FROM students"),
            ]
        )
    )
    with GatedStub(answer_first=1) as stub:
        env = {**cli_env, "QUANDARY_COUNCIL_CONFIG": str(council_file(tmp_path / "c.json", stub.url, 600))}
        assert quandary("import", str(records), env=env).returncode == 0
        code, out, err = _interrupt_when_held(
            stub,
            _start("interact", "--db", "university", "--max-steps", "1", env=env),
            signal.SIGINT,
            "the interaction run",
        )
        # #42 item 4: the held call (600 s timeout) was never answered: the process cancelled it
        # rather than waiting it out
        assert len(stub.answered) == 1
    assert code == 130, out[-2000:] + err[-2000:]
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("interrupted:"), err
    assert "Traceback" not in out + err and "sqlalchemy" not in (out + err).lower()
    # a termination, as the UI's terminate marks it: CANCELED, not a failure with a stack trace
    [run] = runs_in(tmp_path / "dagster_home")
    assert run.status.value == "CANCELED", run.status
    assert artifact_store().latest_location("interaction_subset", "university") is not None  # completed work kept


@pytest.mark.integration  # real processes, servers or a Dagster instance
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_command_without_a_run_ends_on_an_interrupt_with_one_line(cli_env, tmp_path, sig):
    """`council check` waiting on a held call: Ctrl-C or SIGTERM ends it with one line, exit 130."""
    with GatedStub(answer_first=0) as stub:
        council = council_file(tmp_path / "c.json", stub.url, 600)
        code, out, err = _interrupt_when_held(
            stub, _start("council", "check", "--config", str(council), env=cli_env), sig, "council check"
        )
    assert code == 130, out[-2000:] + err[-2000:]
    assert [line for line in err.splitlines() if line.strip()] == ["interrupted: quandary council stopped"], err


@pytest.mark.integration  # real processes, servers or a Dagster instance
def test_a_canceled_run_leaves_no_asset_failed_even_if_read_while_it_read_failure(tmp_path):
    """#42 item 4: Dagster records an interrupted run as FAILURE before the CLI marks it CANCELED.
    A UI reading the asset statuses in between cached the partition as failed, and it stayed so
    after the mark ("Latest materialization: Failed"); the mark drops that cache."""
    from dagster import AssetKey, DagsterInstance, StaticPartitionsDefinition, asset, materialize
    from dagster._core.storage.partition_status_cache import get_and_update_asset_status_cache_value

    from cli.runs import mark_run_canceled

    parts = StaticPartitionsDefinition(["university"])

    @asset(partitions_def=parts)
    def interrupted():
        raise RuntimeError("the step the interrupt stopped")

    def failed(instance):
        value = get_and_update_asset_status_cache_value(instance, AssetKey("interrupted"), parts)
        return list(value.deserialize_failed_partition_subsets(parts).get_partition_keys())

    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        run = materialize([interrupted], instance=instance, partition_key="university", raise_on_error=False)
        assert instance.get_run_by_id(run.run_id).status.value == "FAILURE"
        assert failed(instance) == ["university"]  # the UI's read in between
        assert mark_run_canceled(instance, run.run_id)
        assert instance.get_run_by_id(run.run_id).status.value == "CANCELED"
        assert failed(instance) == []


def test_an_interrupt_while_the_commands_load_is_one_line(monkeypatch, capsys):
    """#31 item 6: Ctrl-C in the seconds `quandary` spends importing its commands (Dagster, the job
    cards) is one line and exit 130, like one while a command works: it was a KeyboardInterrupt
    traceback, the parser being built before any handler."""
    import cli

    def loading():
        raise KeyboardInterrupt  # the user's Ctrl-C, landing inside the imports

    monkeypatch.setattr(cli, "build_parser", loading)
    try:
        code = cli.main(["council", "check"])
    except KeyboardInterrupt:
        pytest.fail("the interrupt escaped cli.main: the user sees a traceback")
    assert code == 130
    assert [line for line in capsys.readouterr().err.splitlines() if line.strip()] == ["interrupted: quandary stopped"]


def test_the_console_script_ends_an_interrupt_at_once_when_its_output_pipe_is_gone(monkeypatch):
    """#42 item 4: after an interrupt the console script ends with os._exit(130), skipping the
    interpreter teardown that hung on the embedded model. `quandary … | tee log` and Ctrl-C: the
    terminal's interrupt ends tee too, flushing stdout raised BrokenPipeError, and the process went
    on into that teardown (with a traceback) instead."""
    import io

    import cli

    class GonePipe(io.StringIO):
        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

    ended = []

    def _exit(code):  # os._exit would end the test process
        ended.append(code)
        raise SystemExit(code)

    monkeypatch.setattr(cli, "main", lambda: 130)
    monkeypatch.setattr(sys, "stdout", GonePipe())
    monkeypatch.setattr(os, "_exit", _exit)
    with pytest.raises(SystemExit):
        cli.run()
    assert ended == [130]
