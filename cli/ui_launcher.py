"""`make ui`: ``dagster dev`` in a process group of its own that Ctrl-C and SIGTERM stop cleanly.

``dagster dev`` started from make (or with ``&``) ignored SIGTERM and left its webserver and daemon
running; stopping it took SIGKILL of its children (#31 item 6, ../shared/DESIGN.md pitfalls). Here
it runs in a new session (``start_new_session=True``); this launcher forwards SIGINT/SIGTERM to the
whole group as SIGINT (which dagster dev handles: it stops its webserver and daemon), waits on the
members' exits, kills the stateless ones (webserver, code servers) once the daemon and any run have
stopped, kills whatever is left after a grace period (``$QUANDARY_UI_GRACE_S``, 20 s), and ends with
one line. Ctrl-C took 8.7 s at load 5 waiting out dagster's teardown and a zombie; 3.4 s at load 6
now (#42).

Usage: ``python -m cli.ui_launcher [dagster dev options]``, or ``-- COMMAND ...`` to run another
command the same way (the tests).
"""

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

GRACE_S = 20.0  # how long the group gets to stop cleanly before SIGKILL
KILL_WAIT_S = 10.0  # how long SIGKILLed members get to disappear

# Members of dagster dev's group that keep no state of their own: once every other member (the
# daemon, which writes ticks and the run queue; a run in progress) has stopped, what is left of these
# is interpreter teardown and the code servers' grpc shutdown, 3-5 s at load 5 of the 8.7 s `make ui`
# took to stop (#42 item 3 of round 2). They are killed then; dagster dev itself is left to finish
# (it removes its workspace's temporary sockets). A run launched from the UI runs in a process the
# code server spawns (multiprocessing's spawn: its own command line), so it is waited for; the
# resource tracker spawning starts waits for its parent's pipe to close, so it is one of these.
STATELESS = (
    "-m dagster_webserver",
    "-m dagster code-server",
    "-m dagster api grpc",
    "from multiprocessing.resource_tracker import main",
)


def _members(pgid: int) -> dict[int, str]:
    """The group's living members (pid -> command line); zombies are gone. Off Linux: the leader
    while the group can be signalled."""
    if not os.path.isdir("/proc/self"):
        return {pgid: ""} if _signallable(pgid) else {}
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid or fields[0] == "Z":
                continue
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                out[int(name)] = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue  # it ended while we read it
    return out


def _signallable(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member we cannot signal still exists
        return True
    return True


def _group_alive(pgid: int) -> bool:
    return bool(_members(pgid))


def _wait_any_exit(pids, timeout_s: float) -> None:
    """Block until one of ``pids`` exits or ``timeout_s`` passes: each process's pidfd becomes
    readable when it ends, child or not (Linux 5.3+; elsewhere a short wait)."""
    fds = []
    try:
        for pid in pids:
            try:
                fds.append(os.pidfd_open(pid))
            except ProcessLookupError:
                return  # already gone
            except (AttributeError, OSError):
                time.sleep(min(timeout_s, 0.1))  # no pidfd here: look again shortly
                return
        if fds:
            select.select(fds, [], [], max(0.0, timeout_s))
    finally:
        for fd in fds:
            os.close(fd)


def _kill(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def stop_group(proc: subprocess.Popen, grace_s: float = GRACE_S) -> None:
    """SIGINT to the group; once every member left but the leader is stateless (:data:`STATELESS`),
    SIGKILL those; SIGKILL to the whole group after ``grace_s``. Waits on the members' exits (their
    pidfds), not on a timer; returns once the leader is reaped and no member is left (or
    ``KILL_WAIT_S`` after the kill)."""
    pgid = proc.pid  # a new session: the leader's pid is the group id
    try:
        os.killpg(pgid, signal.SIGINT)
    except ProcessLookupError:
        proc.poll()
        return
    deadline = time.monotonic() + grace_s
    killed_all, killed = False, set()
    while True:
        proc.poll()  # reap the leader once it has exited
        members = _members(pgid)
        now = time.monotonic()
        if not members or (killed_all and now >= deadline):
            break
        if now >= deadline:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                break
            killed_all, deadline = True, now + KILL_WAIT_S
            continue
        stateless = {p for p, cmd in members.items() if any(s in cmd for s in STATELESS)}
        if not killed_all and not set(members) - stateless - {pgid}:
            _kill(stateless - killed)  # the daemon and any run have stopped: nothing left to keep
            killed |= stateless
        # woken by any member's exit; at most a second, to see a member that joined meanwhile
        _wait_any_exit(list(members), min(1.0, deadline - now))
    proc.poll()


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# The launcher takes its stops, and its child's exit, as signals it waits for (sigwait), never as
# handlers that interrupt it. A handler runs between any two instructions, and make forwards its own
# SIGTERM to the launcher just after the terminal's: when that second one ran inside the first one's
# handler, neither raised the stop, and the launcher went on waiting for a child nobody had signalled
# (`make ui` then never ended: its test failed in 2 of 6 suite runs, #44). Blocked, they wait in
# the kernel until asked for, whenever they come: before the child exists, during the stop, twice.
WATCHED = (*STOP_SIGNALS, signal.SIGCHLD)


def _held(signum, frame) -> None:
    """Installed while :data:`WATCHED` is blocked, so that none counts as ignored (a blocked signal
    whose action is to ignore it may be dropped rather than held; POSIX leaves that open). Runs only
    for a signal still pending when :func:`run` unblocks them at its end, and does nothing."""


def _unblock_watched() -> None:
    """In the child, before exec: :data:`WATCHED` unblocked, as the command expects. Their handlers
    need no reset: a caught signal reverts to its default at exec. (Started with ``&``, the launcher
    inherits SIGINT ignored, which exec would keep: dagster dev then ignored the SIGINT forwarded to
    it, the pitfall in ../shared/DESIGN.md. Catching it here undoes that for the child.)"""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, WATCHED)


def run(cmd: list[str], grace_s: float = GRACE_S) -> int:
    """Run ``cmd`` in its own session until it exits or this process gets SIGINT/SIGTERM: then stop
    its group (:func:`stop_group`), say so in one line and return 0 (a stop the user asked for is a
    success: `make ui` then ends without "Error 143", #42 item 4). Further stops are held until the
    group has ended, then dropped: a second Ctrl-C does not cut the clean stop short."""
    old = {s: signal.signal(s, _held) for s in WATCHED}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)
    try:
        try:
            # preexec_fn: this launcher is single-threaded here, so it is safe
            proc = subprocess.Popen(cmd, start_new_session=True, preexec_fn=_unblock_watched)  # noqa: PLW1509
        except OSError as exc:  # missing or not executable: one line, no trace
            print(f"cannot start {cmd[0]}: {exc.strerror or exc}; is it installed (make install)?", file=sys.stderr)
            return 127
        while proc.poll() is None:
            got = signal.sigwait(WATCHED)  # SIGCHLD: the child exited (or stopped): look again
            if got in STOP_SIGNALS:
                stop_group(proc, grace_s)
                name = signal.Signals(got).name
                print(f"\n{Path(cmd[0]).name} stopped ({name}): its process group has ended", file=sys.stderr)
                return 0
        if _group_alive(proc.pid):  # the leader ended, a child of it did not
            stop_group(proc, grace_s)
        return proc.returncode
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # what is still pending goes to _held
        for s, h in old.items():
            signal.signal(s, h)


def _grace_s() -> float:
    """``$QUANDARY_UI_GRACE_S`` (seconds) or :data:`GRACE_S`."""
    try:
        return float(os.environ.get("QUANDARY_UI_GRACE_S", GRACE_S))
    except ValueError:
        return GRACE_S


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--"]:
        cmd = argv[1:]
    else:
        cmd = [str(Path(sys.executable).parent / "dagster"), "dev", *argv]
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    return run(cmd, _grace_s())


if __name__ == "__main__":
    sys.exit(main())
