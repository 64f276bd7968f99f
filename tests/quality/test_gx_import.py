"""quality.gx_suite imports great_expectations without scipy.stats and altair (GX imports them for
one expectation we never run, ~1 s of CPU per process that runs an asset check, #44); a caller that
does use them, GX's KL-divergence expectation included, gets the real modules."""

import subprocess
import sys

from tests.conftest import REPO_ROOT

PROBE = """
import sys
from quality.gx_suite import _import_gx
gx = _import_gx()
assert type(sys.modules["scipy.stats"]).__name__ == "_Deferred", "scipy.stats was imported with GX"
assert type(sys.modules["altair"]).__name__ == "_Deferred", "altair was imported with GX"

import pandas as pd
ctx = gx.get_context(mode="ephemeral")
batch = (ctx.data_sources.add_pandas("p").add_dataframe_asset("a").add_batch_definition_whole_dataframe("w")
         .get_batch(batch_parameters={"dataframe": pd.DataFrame({"x": ["a", "a", "b", "b"]})}))
partition = {"values": ["a", "b"], "weights": [0.5, 0.5]}
same = batch.validate(gx.expectations.ExpectColumnKLDivergenceToBeLessThan(column="x", partition_object=partition, threshold=0.1))
other = {"values": ["a", "b"], "weights": [0.99, 0.01]}
far = batch.validate(gx.expectations.ExpectColumnKLDivergenceToBeLessThan(column="x", partition_object=other, threshold=0.1))
assert same.success and not far.success, (same.result, far.result)  # scipy.stats.entropy ran

import scipy.stats
from scipy.stats import norm
import altair as alt
assert abs(norm.cdf(0) - 0.5) < 1e-12 and scipy.stats.entropy([0.5, 0.5]) > 0 and alt.Chart is not None
print("OK")
"""


def test_gx_without_scipy_stats_and_altair_until_used():
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("OK"), done.stdout[-2000:] + done.stderr[-3000:]
