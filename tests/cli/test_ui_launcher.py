"""#31 item 6: `make ui`'s launcher stops the command it runs — and every process that command
started — on Ctrl-C or SIGTERM, with one line, even when the command ignores SIGTERM (as dagster
dev did) and was started from a shell that ignores SIGINT (`&`)."""

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.waiting import wait_until

# A stand-in for dagster dev: ignores SIGTERM, starts a grandchild (its webserver), stops on SIGINT
# only after a moment of cleanup; writes the grandchild's pid so the test can check it is gone.
SERVER = textwrap.dedent(
    """
    import signal, subprocess, sys
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # both idle on signals, not on a timer: the grandchild until it is killed, the server until SIGINT
    child = subprocess.Popen([sys.executable, "-c", "import signal\\nsignal.signal(2, signal.SIG_IGN)\\nwhile True: signal.pause()"])
    open(sys.argv[1], "w").write(str(child.pid))
    try:
        while True:
            signal.pause()
    except KeyboardInterrupt:
        child.kill(); child.wait()
        print("cleaned up", flush=True)
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purposes
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_the_launcher_stops_the_whole_group_with_one_line(tmp_path, sig):
    script, pidfile = tmp_path / "server.py", tmp_path / "grandchild.pid"
    script.write_text(SERVER)

    def ignore_sigint():  # as a shell's `&` leaves it
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    launcher = subprocess.Popen(
        [sys.executable, "-m", "cli.ui_launcher", "--", sys.executable, str(script), str(pidfile)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ignore_sigint,  # noqa: PLW1509 - the test process starts it before any thread needs it
        start_new_session=True,
    )
    try:
        wait_until(lambda: pidfile.is_file() and pidfile.read_text(), 60, "the server's grandchild")
        grandchild = int(pidfile.read_text())
        launcher.send_signal(sig)
        out, err = launcher.communicate(timeout=60)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
    assert "cleaned up" in out  # the forwarded SIGINT reached it despite the inherited SIG_IGN
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "stopped" in lines[0] and signal.Signals(sig).name in lines[0], err
    assert launcher.returncode == 0  # a requested stop: `make ui` prints no "Error 143" (#42 item 4)
    wait_until(lambda: not _alive(grandchild), 30, "the grandchild to end")


def test_make_ui_stops_quietly_on_sigterm(tmp_path):
    """#42 item 4: SIGTERM to `make ui`'s process group (a terminal closing, `kill -- -PGID`) stops
    the launcher, the server and its grandchild; make ends with exit 0 and no "Error 143"."""
    import shutil

    if shutil.which("make") is None:
        pytest.skip("make not installed")
    script, pidfile = tmp_path / "server.py", tmp_path / "grandchild.pid"
    script.write_text(SERVER)
    # the Makefile's ui recipe, with the stand-in server for dagster dev
    (tmp_path / "Makefile").write_text(
        f"ui:\n\t{sys.executable} -m cli.ui_launcher -- {sys.executable} {script} {pidfile}\n"
    )
    repo = str(Path(__file__).resolve().parents[2])  # make -C runs the recipe in tmp_path
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([repo, os.environ.get("PYTHONPATH", "")])}
    make = subprocess.Popen(
        ["make", "-s", "-C", str(tmp_path), "ui"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=env,
    )
    try:
        wait_until(
            lambda: pidfile.is_file() and pidfile.read_text(),
            60,
            "the server's grandchild",
            alive=lambda: make.poll() is None,
        )
        grandchild = int(pidfile.read_text())
        os.killpg(make.pid, signal.SIGTERM)  # the whole foreground group, as a terminal's hangup or kill does
        out, err = make.communicate(timeout=60)
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGKILL)
    assert "Error" not in err and "***" not in err, err
    assert make.returncode in (0, -signal.SIGTERM), err  # make itself may die of the SIGTERM it got
    assert "Traceback" not in err, err
    wait_until(lambda: not _alive(grandchild), 30, "the grandchild to end")
