"""#42 item 4: Ctrl-C stops a run at once and reads as cancelled. The process exits while the LLM
call it was waiting on is still held by the server (it cancelled the call rather than waiting it
out), completed work is kept, and the Dagster run is CANCELED (as a termination from the UI
marks it), not a failure with a stack trace."""

import json
import os
import signal
import time

from storage.stores import artifact_store
from tests.cli.conftest import GatedStub, council_file, quandary, runs_in
from tests.cli.test_runs import _answerable, _start


def test_ctrl_c_cancels_the_run_and_exits_without_waiting_on_calls(cli_env, tmp_path):
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
        proc = _start("interact", "--db", "university", "--max-steps", "1", env=env)
        try:
            assert stub.held.wait(300), "the interaction run never sent the LLM call the stub holds"
            answered = len(stub.answered)
            sent = time.monotonic()
            os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole process group
            out, err = proc.communicate(timeout=120)
            took = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        # the held call (600 s timeout) was never answered: the process did not wait it out
        assert len(stub.answered) == answered
    print(f"exit {took:.1f} s after SIGINT")
    assert proc.returncode == 130, out[-2000:] + err[-2000:]
    assert [line for line in err.splitlines() if line.strip()][0].startswith("interrupted:"), err
    [run] = runs_in(tmp_path / "dagster_home")
    assert run.status.value == "CANCELED", run.status  # as a termination: no "failure" to read in the UI
    # what completed before the interrupt is kept; `rerun` resumes the canceled run
    assert artifact_store().latest_location("interaction_subset", "university") is not None
