"""The trusted verifier V(θ, ŝ) of spec §3.5, on the project's safe executor.

- A solver SQL that fails, times out or tries to write scores 0 with the executor's reason.
- Without test cases, ŝ's result is compared with the record's single reference SQL under the
  record's comparison policy:
  * ``mode="set"`` (default, [I] BIRD-style): the corpus job's comparator
    (:func:`pipelines.ambitab.comparison.results_match`: set of rows, column order significant,
    cells canonicalised like the relaxed-equivalence module, ``order_sensitive`` / ``distinct`` /
    ``float_decimals`` from the policy);
  * ``mode="relaxed"``: ABISS Appendix A relaxed equivalence (``pipelines.sqltools.equivalence``),
    on rows de-duplicated first when ``distinct`` is set (a user option, not the paper's rule).
- Test cases (BIRD-Interact) and PostgreSQL records need the PostgreSQL verifier, which is not
  part of the local build: such episodes get ``verdict=None`` with the reason and are left out of
  SR (the count is reported), never scored 0 or 1 silently.
"""

import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from pipelines.ambitab.comparison import results_match
from pipelines.ambitab.protocol.task import Task
from pipelines.ambitab.record import ComparisonPolicy
from pipelines.sqltools.equivalence import results_equivalent
from resources.sql import execute_sql

VERIFIER_TIMEOUT_S = 30.0  # [I] spec §3.5
GOLD_CACHE_SIZE = 512


@dataclass(frozen=True)
class VerifierVerdict:
    score: int | None  # 1, 0, or None when the record cannot be verified here
    reason: str


def rows_agree(gold, pred, comparison: ComparisonPolicy, *, mode: str = "set") -> tuple[bool, str]:
    if mode == "relaxed":
        g, p = list(gold.rows), list(pred.rows)
        if comparison.distinct:
            g, p = list(dict.fromkeys(g)), list(dict.fromkeys(p))
        v = results_equivalent((gold.columns, g), (pred.columns, p), order_sensitive=comparison.order_sensitive)
        return v.equivalent, v.reason
    if results_match(gold, pred, comparison):
        return True, "same rows" if comparison.order_sensitive else "same row set"
    return False, f"results differ (gold {gold.row_count} rows, pred {pred.row_count} rows)"


class Verifier:
    def __init__(self, timeout_s: float = VERIFIER_TIMEOUT_S, mode: str = "set"):
        if mode not in ("set", "relaxed"):
            raise ValueError(f"verifier mode must be 'set' or 'relaxed', got {mode!r}")
        self.timeout_s = timeout_s
        self.mode = mode
        # Reference results reused across seeds and conditions; bounded (BIRD results can be large).
        self._gold_cache: OrderedDict[tuple, object] = OrderedDict()
        self._lock = threading.Lock()

    def can_verify(self, task: Task) -> str | None:
        """None when verifiable here, else the reason it is not."""
        if not task.verifier.executable:
            return task.verifier.skip_reason or "the record is structural (not executable here)"
        if task.verifier.test_cases:
            return "test cases need the PostgreSQL verifier (not in the local build)"
        if task.engine not in ("sqlite", "duckdb"):
            return f"engine {task.engine!r} is not executable locally"
        if not task.db_path or not Path(task.db_path).is_file():
            return f"database not found: {task.db_path}"
        if len(task.verifier.reference_sql) != 1:
            return f"expected one reference SQL, got {len(task.verifier.reference_sql)}"
        return None

    def _gold(self, task: Task):
        key = (task.db_path, task.verifier.reference_sql[0])
        with self._lock:
            if key in self._gold_cache:
                self._gold_cache.move_to_end(key)
                return self._gold_cache[key]
        result = execute_sql(task.db_path, key[1], timeout_s=self.timeout_s)
        with self._lock:
            self._gold_cache[key] = result
            while len(self._gold_cache) > GOLD_CACHE_SIZE:
                self._gold_cache.popitem(last=False)
        return result

    def score(self, task: Task, sql: str | None) -> VerifierVerdict:
        why_not = self.can_verify(task)
        if why_not:
            return VerifierVerdict(None, why_not)
        if not sql or not str(sql).strip():
            return VerifierVerdict(0, "no SQL submitted")
        gold = self._gold(task)
        if not gold.ok:
            return VerifierVerdict(None, f"reference SQL failed: {gold.one_line()}")
        pred = execute_sql(task.db_path, sql, timeout_s=self.timeout_s)
        if not pred.ok:
            return VerifierVerdict(0, f"solver SQL failed: {pred.one_line()}")
        ok, reason = rows_agree(gold, pred, task.verifier.comparison, mode=self.mode)
        return VerifierVerdict(int(ok), reason)
