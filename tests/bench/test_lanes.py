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
    assert lane("tests/dagster/test_webserver.py::test_demo_then_webserver_shows_materializations") is None
    assert lane("tests/abiss/test_cascade_stages.py::test_stage9_stops_at_the_first_loss") is None
