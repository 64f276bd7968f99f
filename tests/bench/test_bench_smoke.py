"""Every bench runs in its seconds-long smoke mode, so none rots (#44).

The convention each ``bench/bench_*.py`` follows: ``--smoke`` runs
the same code path on tiny inputs in a few seconds, writes nothing into the repository and exits 0
on success. A smoke run that lacks an input it cannot make (``../shared/data``, the embedded
model's weights) prints ``SKIP: <reason>`` as its last line and exits 0; the test then skips with
that reason. A new bench is picked up by its file name; one without ``--smoke`` fails here.
A bench whose report a job's own test checks more closely is smoke-run there instead (OWN_SMOKE_TEST),
through the same :func:`tests.bench.smoke.run_smoke`: each smoke run happens once per suite.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.smoke import BENCH, run_smoke
from tests.conftest import REPO_ROOT

# review_checks.py is a library of bench_defects.py (no entry point): its smoke run exercises it
BENCHES = sorted(BENCH.glob("bench_*.py"))

# bench -> the test file that smoke-runs it (with run_smoke) and checks its report
OWN_SMOKE_TEST = {
    "bench_ambitab_train.py": "tests/ambitab/training/test_bench_smoke.py",
    "bench_ambitab_train_gpu.py": "tests/ambitab/training/test_bench_smoke.py",
    "bench_benchmark_audit.py": "tests/benchmark_audit/test_bench_smoke.py",
}


def test_every_bench_is_discovered_and_has_a_smoke_mode():
    assert len(BENCHES) >= 10, BENCHES  # the glob found the bench folder
    for script in BENCHES:
        assert "--smoke" in script.read_text(), (
            f"{script.name} has no --smoke mode (the bench convention, bench/README.md)"
        )


def test_the_benches_smoke_run_elsewhere_are_run_there():
    for name, test_file in OWN_SMOKE_TEST.items():
        assert (BENCH / name).is_file(), name
        source = (REPO_ROOT / test_file).read_text()
        assert "run_smoke" in source and f'"{name}"' in source, f"{test_file} does not smoke-run {name}"


# Benches whose smoke run starts the embedded model (tests/conftest.py gives them the model's lane;
# bench_embedded_tokens' smoke run uses the scripted council).
STARTS_THE_MODEL = {"bench_embedded_demo.py", "bench_embedded_reproducibility.py"}


def _param(script: Path):
    return pytest.param(script, id=script.name, marks=[pytest.mark.e2e] if script.name in STARTS_THE_MODEL else [])


@pytest.mark.integration
@pytest.mark.parametrize("script", [_param(p) for p in BENCHES if p.name not in OWN_SMOKE_TEST])
def test_bench_smoke(script: Path, tmp_path):
    # PYTHONDONTWRITEBYTECODE: the bench adds no __pycache__ of its own (it reads the suite's)
    proc = run_smoke(script.name, tmp_path, env={"PYTHONDONTWRITEBYTECODE": "1"})
    last = proc.stdout.strip().splitlines()[-1:] or [""]
    if last[0].startswith("SKIP:"):
        pytest.skip(f"{script.name} --smoke: {last[0][5:].strip()}")
