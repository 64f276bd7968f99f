"""How long `make ui` takes to stop on Ctrl-C / SIGTERM, and which process holds it up (#42).

Runs `make ui`'s launcher (``python -m cli.ui_launcher``) with ``dagster dev`` on a scratch Dagster
home, waits until the webserver answers, signals the launcher's process group as a terminal does,
and prints when each process of the tree exited (read from /proc) and the total. ``--smoke`` runs
the same path with a stand-in server (a child that stops on SIGINT) in a few seconds.

    python bench/bench_ui_stop.py [--signal INT|TERM] [--port 3952] [--smoke]
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# waits for SIGINT blocked (sigwait): a handler and signal.pause() would sleep through one arriving
# just before pause(), leaving the launcher to kill it after its grace period
STAND_IN = "import signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, [2])\nsignal.sigwait([2])\n"


def _tree(root: int) -> dict[int, str]:
    """Living (non-zombie) processes under ``root`` and those in the process groups they lead."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{name}/cmdline", "rb") as fh:
                    cmd = fh.read().replace(b"\0", b" ").decode(errors="replace").replace("\n", " ")[:90]
            except (OSError, IndexError):
                continue
            if fields[0] != "Z":
                table[int(name)] = (int(fields[1]), int(fields[2]), cmd)
    out, frontier = {}, {root}
    while frontier:
        found = {p for p, (pp, pg, _) in table.items() if (pp in frontier or pg in frontier) and p not in out}
        out.update({p: table[p][2] for p in found})
        frontier = found
    if root in table:
        out[root] = table[root][2]
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--signal", choices=("INT", "TERM"), default="INT")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--smoke", action="store_true", help="a stand-in server instead of dagster dev (seconds)")
    args = ap.parse_args()
    port = args.port or _free_port()
    home = tempfile.mkdtemp(prefix="bench_ui_stop_")
    env = {**os.environ, "DAGSTER_HOME": home, "PYTHONPATH": str(REPO)}
    Path(home, "dagster.yaml").write_text("telemetry:\n  enabled: false\nnux:\n  enabled: false\n")
    if args.smoke:
        cmd = [sys.executable, "-m", "cli.ui_launcher", "--", sys.executable, "-c", STAND_IN]
    else:
        cmd = [sys.executable, "-m", "cli.ui_launcher", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)]
    launcher = subprocess.Popen(
        cmd, cwd=REPO, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    t0 = time.monotonic()
    while True:  # up: the webserver answers (the stand-in: it has started)
        if launcher.poll() is not None:
            print(f"the launcher ended before it was up: {launcher.stderr.read()[-500:]}")
            return 1
        if args.smoke and len(_tree(launcher.pid)) >= 2:
            break
        if not args.smoke:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2).read()
                break
            except OSError:
                pass
        time.sleep(0.2)  # polling a server coming up: there is no event to wait on
    print(f"up after {time.monotonic() - t0:.1f} s; load {os.getloadavg()[0]:.1f}")
    alive = _tree(launcher.pid)
    t1 = time.monotonic()
    os.killpg(launcher.pid, getattr(signal, f"SIG{args.signal}"))
    while alive:
        now = _tree(launcher.pid) if launcher.poll() is None else {}
        for pid in [p for p in alive if p not in now]:
            print(f"  +{time.monotonic() - t1:5.2f} s  {alive.pop(pid)}")
        time.sleep(0.05)  # sampling /proc for the report's timeline (the launcher waits on events)
    launcher.wait()
    err = launcher.stderr.read().strip().splitlines()
    print(f"stopped after {time.monotonic() - t1:.2f} s (SIG{args.signal}); launcher exit {launcher.returncode}")
    print(f"its last line: {err[-1] if err else ''}")
    return 0 if launcher.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
