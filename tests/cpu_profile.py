"""Where the suite's CPU goes (#44): ``pytest -p tests.cpu_profile`` with ``QUANDARY_TEST_CPU_LOG=DIR``
writes one JSON line per test phase (setup, call, teardown) to ``DIR/<worker>.jsonl``: wall seconds
and CPU seconds of the test process and of its waited-for children (CLIs, run workers, servers stopped
by the test). A session fixture's cost lands on the first test that sets it up and the last that tears
it down. ``python -m tests.cpu_profile DIR`` sums the lines by file and by lane.

Wall time says which test is slow; CPU time says which test keeps the other lane and every other
process on a loaded machine from running, which is what the suite's time beside other work is."""

import json
import os
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


class _Recorder:
    def __init__(self, out: Path, worker: str):
        out.mkdir(parents=True, exist_ok=True)
        # "w": a run's log is its own (appended to an earlier run's, the summary counted both)
        self._fh = open(out / f"{worker}.jsonl", "w", buffering=1)  # noqa: SIM115 (open for the session)
        self._worker = worker
        self._start = time.monotonic()

    def record(self, nodeid: str, phase: str, wall: float, own: float, kids: float) -> None:
        line = {"id": nodeid, "phase": phase, "wall": round(wall, 3), "cpu": round(own, 3)}
        line["children"] = round(kids, 3)
        line["worker"] = self._worker
        self._fh.write(json.dumps(line) + "\n")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item):
        yield from self._measure(item, "setup")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        yield from self._measure(item, "call")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item):
        yield from self._measure(item, "teardown")

    def pytest_sessionfinish(self):
        # the whole worker: collection, imports and fixtures outside any test phase included
        own, kids = _cpu()
        self.record("<session>", "session", time.monotonic() - self._start, own, kids)
        self._fh.close()

    def _measure(self, item, phase):
        start, (own0, kids0) = time.monotonic(), _cpu()
        yield
        own1, kids1 = _cpu()
        self.record(item.nodeid, phase, time.monotonic() - start, own1 - own0, kids1 - kids0)


def pytest_configure(config):
    out = os.environ.get("QUANDARY_TEST_CPU_LOG")
    if out:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        config.pluginmanager.register(_Recorder(Path(out), worker), "quandary-cpu-recorder")


def summarize(folder: Path, top: int = 40) -> None:
    from tests.conftest import lane

    by_test: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    by_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    by_lane: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for path in sorted(folder.glob("*.jsonl")):
        for raw in path.read_text().splitlines():
            row = json.loads(raw)
            if row["phase"] == "session":
                print(f"{path.stem}: wall {row['wall']:.0f} s, CPU {row['cpu']:.0f} + {row['children']:.0f} s")
                continue
            values = (row["wall"], row["cpu"], row["children"])
            for table, key in (
                (by_test, row["id"]),
                (by_file, row["id"].split("::", 1)[0]),
                (by_lane, lane(row["id"]) or "pool"),
            ):
                for i, v in enumerate(values):
                    table[key][i] += v

    def show(title, table, n):
        print(f"\n{title}: wall s, CPU s (own + children)")
        rows = sorted(table.items(), key=lambda kv: -(kv[1][1] + kv[1][2]))
        for key, (wall, own, kids) in rows[:n]:
            print(f"{wall:8.1f} {own + kids:8.1f} = {own:7.1f} + {kids:7.1f}  {key}")

    total = [sum(v[i] for v in by_lane.values()) for i in range(3)]
    print(f"total: wall {total[0]:.0f} s, CPU {total[1] + total[2]:.0f} s ({total[1]:.0f} + {total[2]:.0f})")
    show("lanes", by_lane, 5)
    show("files", by_file, top)
    show("tests", by_test, top)


if __name__ == "__main__":
    summarize(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 40)
