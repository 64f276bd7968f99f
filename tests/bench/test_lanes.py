"""The lanes of `make test` (tests/conftest.py): the embedded model's tests on one xdist worker, the
multi-node tests on another, everything else anywhere (#44)."""

from tests.conftest import REPO_ROOT, lane


def test_the_embedded_model_tests_share_a_lane():
    files = sorted(p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / "tests").rglob("test_*embedded*.py"))
    assert len(files) >= 5, files
    for f in [*files, "tests/cli/test_interrupt.py"]:
        assert lane(f"{f}::test_x") == "embedded", f
    assert lane("tests/bench/test_bench_smoke.py::test_bench_smoke[bench_embedded_demo.py]") == "embedded"
    # its smoke run uses the scripted council: no model, no lane
    assert lane("tests/bench/test_bench_smoke.py::test_bench_smoke[bench_embedded_tokens.py]") is None


def test_the_multi_node_tests_share_another_and_the_rest_none():
    assert lane("tests/distributed/test_recovery.py::test_x") == "distributed"
    # the trainer's in-process tests share a third (torch imported on one worker); its subprocess ones none
    assert lane("tests/ambitab/training/test_learning.py::test_a_toy_reward_rises_over_updates") == "training"
    assert lane("tests/ambitab/training/test_interrupt.py::test_x") is None
    assert lane("tests/ambitab/training/test_bench_smoke.py::test_x") is None
    assert lane("tests/dagster/test_webserver.py::test_demo_then_webserver_shows_materializations") is None
    assert lane("tests/abiss/test_cascade_stages.py::test_stage9_stops_at_the_first_loss") is None


class _Config:
    """What xdist's scheduler reads of pytest's config: ``-n 2 --dist loadgroup``."""

    class option:
        loadscopereorder = True

    def getvalue(self, name):
        return {"dist": "loadgroup", "tx": ["2*popen"]}[name]


class _Worker:
    def __init__(self, name):
        self.gateway = type("Gateway", (), {"id": name})()
        self.sent: list[int] = []
        self.shutting_down = False

    def send_runtest_some(self, indexes):
        self.sent += indexes

    def shutdown(self):
        self.shutting_down = True


def test_the_lanes_start_first_and_a_file_with_module_fixtures_stays_on_one_worker():
    """#44: a file's module-scoped fixture (the blind pairs' judged set, 13 s of CPU) was computed on
    both workers when its tests were split between them; the two lanes still start first, one each."""
    from tests.conftest import pytest_xdist_make_scheduler, shares_module_fixtures

    assert shares_module_fixtures("tests/aisql/test_blind_pairs.py")
    # a module fixture made by a conftest factory (its tests, split over the workers, judged the whole set on each, #44)
    assert shares_module_fixtures("tests/aisql/test_division_by_zero.py")
    assert not shares_module_fixtures("tests/abiss/test_cascade_stages.py")
    shared = [f"tests/aisql/test_blind_pairs.py::test_{i}" for i in range(40)]  # the largest unit
    collection = [
        *shared,
        "tests/distributed/test_recovery.py::test_a",
        *(f"tests/abiss/test_cascade_stages.py::test_{i}" for i in range(3)),
        "tests/abiss/test_abiss_embedded.py::test_a",
        "tests/abiss/test_abiss_embedded.py::test_b",
    ]
    sched = pytest_xdist_make_scheduler(_Config(), None)
    workers = [_Worker("gw0"), _Worker("gw1")]
    for w in workers:
        sched.add_node(w)
        sched.add_node_collection(w, collection)
    sched.schedule()
    done = {w: 0 for w in workers}
    while any(done[w] < len(w.sent) for w in workers):  # each finishes what it was sent, then gets more
        for w in workers:
            while done[w] < len(w.sent):
                sched.mark_test_complete(w, w.sent[done[w]])
                done[w] += 1
    first = [collection[w.sent[0]] for w in workers]
    assert [lane(t) for t in first] == ["embedded", "distributed"], first
    on = [{collection[i] for i in w.sent} for w in workers]
    assert all(set(shared) <= tests or not set(shared) & tests for tests in on), "the file was split"
    assert sorted(i for w in workers for i in w.sent) == list(range(len(collection)))  # every test, once


def test_collecting_the_trainer_tests_imports_no_torch():
    """Every xdist worker collects every file: the trainer's tests import torch, transformers, peft
    and TRL on first use (tests/lazy_modules.py), on the training lane's worker only (#44)."""
    import subprocess
    import sys

    probe = (
        "import sys, pytest; code = pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', "
        "'tests/ambitab/training']); heavy = sorted({'torch', 'transformers', 'peft', 'trl'} & set(sys.modules)); "
        "print('HEAVY', heavy); sys.exit(code or bool(heavy))"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "HEAVY []" in done.stdout


class _Item:
    """What the collection hook reads of a test item: its id and markers."""

    def __init__(self, nodeid: str, *marks):
        self.nodeid, self.marks = nodeid, [m.mark for m in marks]

    def get_closest_marker(self, name):
        return next((m for m in self.marks if m.name == name), None)

    def add_marker(self, mark):
        self.marks.insert(0, mark.mark)


def test_the_embedded_lane_gets_its_own_time_limit_unless_a_test_sets_one():
    import pytest

    from tests.conftest import EMBEDDED_TIMEOUT_S, pytest_collection_modifyitems

    embedded = _Item("tests/abiss/test_abiss_embedded.py::test_abiss_job_on_embedded_model", pytest.mark.e2e)
    own = _Item("tests/interaction/test_interaction_embedded.py::test_x", pytest.mark.e2e, pytest.mark.timeout(1500))
    pool = _Item("tests/abiss/test_abiss_pipeline.py::test_x", pytest.mark.integration)
    pytest_collection_modifyitems([embedded, own, pool])
    assert embedded.get_closest_marker("timeout").args == (EMBEDDED_TIMEOUT_S,)
    assert own.get_closest_marker("timeout").args == (1500,)
    assert pool.get_closest_marker("timeout") is None  # the suite's 600 s (pyproject.toml)
