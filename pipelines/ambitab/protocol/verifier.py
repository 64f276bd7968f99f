"""The trusted verifier V(θ, ŝ) of spec §3.5, on the project's safe executor.

- A solver SQL that fails, times out or tries to write scores 0 with the executor's reason.
- Without test cases, ŝ's result is compared with the record's single reference SQL under the
  record's comparison policy:
  * ``mode="set"`` (default, [I] BIRD-style): ``set(rows_pred) == set(rows_gold)``; row order and
    duplicates ignored, column order matters. Cells are canonicalised with the relaxed-equivalence
    module's ``canonical_value`` (1 == 1.0, floats to 7 significant digits), and rounded to
    ``float_decimals`` when the policy sets it.
  * ``mode="relaxed"``: ABISS Appendix A relaxed equivalence (``pipelines.sqltools.equivalence``),
    on rows de-duplicated first when ``distinct`` is set.
  * ``order_sensitive``: rows compared as sequences, only when the reference has a top-level
    ORDER BY.
- Test cases (BIRD-Interact) and PostgreSQL records need the PostgreSQL verifier, which is not
  part of the local build: such episodes get ``verdict=None`` with the reason and are left out of
  SR (the count is reported), never scored 0 or 1 silently.
"""

from dataclasses import dataclass
from pathlib import Path

from pipelines.ambitab.protocol.task import Comparison, Task
from pipelines.sqltools.equivalence import canonical_value, has_top_level_order_by, results_equivalent
from resources.sql_executor import execute_sql

VERIFIER_TIMEOUT_S = 30.0  # [I] spec §3.5


@dataclass(frozen=True)
class Verdict:
    score: int | None  # 1, 0, or None when the record cannot be verified here
    reason: str


def _cell(v, decimals: int | None):
    c = canonical_value(v)
    if decimals is not None and isinstance(c, float):
        c = round(c, int(decimals))
        if c.is_integer():
            c = int(c)
    return c


def rows_agree(gold_rows, pred_rows, comparison: Comparison, *, ordered: bool, mode: str = "set",
               gold_columns=(), pred_columns=()) -> tuple[bool, str]:
    d = comparison.float_decimals
    gold = [tuple(_cell(v, d) for v in r) for r in gold_rows]
    pred = [tuple(_cell(v, d) for v in r) for r in pred_rows]
    if mode == "relaxed":
        if comparison.distinct:
            gold, pred = list(dict.fromkeys(gold)), list(dict.fromkeys(pred))
        v = results_equivalent((list(gold_columns), gold), (list(pred_columns), pred), order_sensitive=ordered)
        return v.equivalent, v.reason
    if ordered:
        if comparison.distinct:
            gold, pred = list(dict.fromkeys(gold)), list(dict.fromkeys(pred))
        same = gold == pred
        return same, "same rows in the same order" if same else "rows differ (order-sensitive)"
    same = set(gold) == set(pred)
    return same, "same row set" if same else f"row sets differ (gold {len(set(gold))}, pred {len(set(pred))} distinct rows)"


class Verifier:
    def __init__(self, timeout_s: float = VERIFIER_TIMEOUT_S, mode: str = "set"):
        if mode not in ("set", "relaxed"):
            raise ValueError(f"verifier mode must be 'set' or 'relaxed', got {mode!r}")
        self.timeout_s = timeout_s
        self.mode = mode
        self._gold_cache: dict[tuple, object] = {}

    def can_verify(self, task: Task) -> str | None:
        """None when verifiable here, else the reason it is not."""
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
        if key not in self._gold_cache:
            self._gold_cache[key] = execute_sql(task.db_path, key[1], timeout_s=self.timeout_s)
        return self._gold_cache[key]

    def score(self, task: Task, sql: str | None) -> Verdict:
        why_not = self.can_verify(task)
        if why_not:
            return Verdict(None, why_not)
        if not sql or not str(sql).strip():
            return Verdict(0, "no SQL submitted")
        gold = self._gold(task)
        if not gold.ok:
            return Verdict(None, f"reference SQL failed: {gold.one_line()}")
        pred = execute_sql(task.db_path, sql, timeout_s=self.timeout_s)
        if not pred.ok:
            return Verdict(0, f"solver SQL failed: {pred.one_line()}")
        comparison = task.verifier.comparison
        mode = getattr(comparison, "mode", None) or self.mode
        ordered = comparison.order_sensitive and has_top_level_order_by(task.verifier.reference_sql[0])
        ok, reason = rows_agree(gold.rows, pred.rows, comparison, ordered=ordered, mode=mode,
                                gold_columns=gold.columns, pred_columns=pred.columns)
        return Verdict(int(ok), reason)
