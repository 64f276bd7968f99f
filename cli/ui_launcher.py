"""`make ui`: ``dagster dev`` in a process group of its own that Ctrl-C and SIGTERM stop cleanly.

``dagster dev`` started from make (or with ``&``) ignored SIGTERM and left its webserver and daemon
running; stopping it took SIGKILL of its children (#31 item 6, ../shared/DESIGN.md pitfalls). Here
it runs in a new session (``start_new_session=True``); this launcher forwards SIGINT/SIGTERM to the
whole group as SIGINT (which dagster dev handles: it stops its webserver and daemon), waits a grace
period, then kills whatever of the group is left, and ends with one line.

Usage: ``python -m cli.ui_launcher [dagster dev options]``, or ``-- COMMAND ...`` to run another
command the same way (the tests).
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

GRACE_S = 20.0  # how long dagster dev gets to stop its webserver and daemon before SIGKILL
LEFTOVER_S = 1.0  # how long what is left of the group gets once dagster dev itself has exited


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member we cannot signal still exists
        return True
    return True


def stop_group(proc: subprocess.Popen, grace_s: float = GRACE_S) -> None:
    """SIGINT to the group, then SIGKILL to what is left of it after ``grace_s``; returns once the
    leader is reaped and no member is left (or after the kill)."""
    pgid = proc.pid  # a new session: the leader's pid is the group id
    for sig in (signal.SIGINT, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + (grace_s if sig == signal.SIGINT else 10.0)
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                if not _group_alive(pgid):
                    return
                # the leader has stopped its services and exited: what is left of its group are
                # stragglers (dagster dev's code server took ~4 s more, #42 item 4); give them a second
                deadline = min(deadline, time.monotonic() + LEFTOVER_S)
            time.sleep(0.1)  # polling a process group: there is no event to wait on
    proc.poll()


def _default_signals() -> None:
    """In the child: SIGINT and SIGTERM back to their defaults. Started with ``&`` from a shell, the
    launcher inherits SIGINT ignored, and so would dagster dev: the SIGINT forwarded to it then did
    nothing (the pitfall in ../shared/DESIGN.md)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def run(cmd: list[str], grace_s: float = GRACE_S) -> int:
    """Run ``cmd`` in its own session until it exits or this process gets SIGINT/SIGTERM."""
    # preexec_fn: this launcher is single-threaded here, so it is safe
    proc = subprocess.Popen(cmd, start_new_session=True, preexec_fn=_default_signals)  # noqa: PLW1509
    stopping: list[int] = []

    def forward(signum, frame):
        stopping.append(signum)
        if len(stopping) == 1:  # only the first: make forwards its own SIGTERM too, which must not cut the stop short
            raise KeyboardInterrupt

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = proc.wait()
        if _group_alive(proc.pid):  # the leader ended, a child of it did not
            stop_group(proc, grace_s)
        return code
    except KeyboardInterrupt:
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, signal.SIG_IGN)  # a second Ctrl-C does not cut the clean stop short
        stop_group(proc, grace_s)
        name = signal.Signals(stopping[0]).name if stopping else "SIGINT"
        print(f"\n{Path(cmd[0]).name} stopped ({name}): its process group has ended", file=sys.stderr)
        # a stop the user asked for is a success: `make ui` then ends without "Error 143" (#42 item 4)
        return 0
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--"]:
        cmd = argv[1:]
    else:
        cmd = [str(Path(sys.executable).parent / "dagster"), "dev", *argv]
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    return run(cmd)


if __name__ == "__main__":
    sys.exit(main())
