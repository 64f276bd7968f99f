"""A user's own predictions (issue 19 item 9): read and check a JSONL file of
``{id, scenario, question, gold_sql, predicted_sql}`` rows (optional ``label``, ``dialect``), judge
each with :func:`pipelines.aisql.compare.judge_pair` (the engine of ``quandary aisql compare``) and
summarise them in the layout of the paper's Table 1 when labels are given.

Stored verdicts are keyed by (the file's content hash, prediction id, scenario, settings key): a
second file never replaces the first's rows, and the same file under the same settings reuses its
stored verdicts instead of judging again.

Bad input fails with one line naming the file and the line (:class:`PredictionsError`), before
anything runs.
"""

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipelines.aisql.checks import BadPairInput, check_pair
from pipelines.aisql.compare import (
    ACCEPT,
    EQUAL_SUITE_CLASS,
    REJECT,
    UNDECIDED,
    bound_of,
)
from pipelines.aisql.evalset import parse_label
from pipelines.aisql.judging import PairToJudge, judge_pairs, judge_settings
from pipelines.aisql.metrics import (
    CLASS_NOTE,
    CLASS_SCHEMA,
    COVERAGE_SCHEMA,
    class_counts,
    class_markdown,
    confusion,
    coverage,
    coverage_markdown,
)
from pipelines.aisql.rewrite import find_operator_names
from pipelines.aisql.scenarios import SCENARIOS

REQUIRED = ("id", "scenario", "question", "gold_sql", "predicted_sql")
DIALECTS = ("bigquery", "thalamusdb")
METHODS = ("ex", "layers", "ours")  # as `aisql compare --methods`
METHOD_LABELS = {
    "ex": "Execution Accuracy (EX)",
    "layers": "Deterministic layers (stand-in)",
    "ours": "Multilayered Eval Framework (Ours)",
}
LAYERS = ("structural", "ai", "layers", "ex", "ours")
ENGINE_VERSION = "4"  # 4: bound k stored, x / 0 errors on BigQuery, NLjoin swaps (#39); 3: verdict classes
MAX_LINE_BYTES = 1_000_000  # one prediction; a SemBench query is a few kB (#34 item 7)
MAX_NESTING = 32  # JSON depth of one line; a row is a flat object (deeper ends in a RecursionError)  # bump when a layer's rule changes: stored verdicts of another version are judged again


class PredictionsError(ValueError):
    """Bad predictions file; the message is one line naming the file and line."""


@dataclass(frozen=True)
class Prediction:
    id: str
    scenario: str
    question: str
    gold_sql: str
    predicted_sql: str
    label: bool | None
    dialect: str
    line: int


def detect_dialect(sql: str) -> str:
    return "bigquery" if any(n.startswith("AI.") for n in find_operator_names(sql)) else "thalamusdb"


def _label(value, where: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    parsed = parse_label(str(value)) if isinstance(value, (str, int)) else None
    if parsed is None:
        raise PredictionsError(f"{where}: label {value!r} is not true/false (or yes/no)")
    return parsed


def read_predictions(path: Path) -> tuple[list[Prediction], str]:
    """Every prediction of ``path`` and the sha256 of its normalised content (one JSON object per
    non-blank line, keys sorted), or :class:`PredictionsError` on the first problem."""
    path = Path(path)
    if not path.is_file():
        raise PredictionsError(f"{path}: not found")
    preds: list[Prediction] = []
    seen: dict[str, int] = {}
    canonical = []
    for n, raw in enumerate(_lines(path), 1):
        if not raw.strip():
            continue
        where = f"{path}:{n}"
        depth = _nesting(raw)
        if depth > MAX_NESTING:
            raise PredictionsError(f"{where}: JSON nested {depth} deep (at most {MAX_NESTING}); a row is a flat object")
        try:
            rec = json.loads(raw)
        except json.JSONDecodeError as exc:
            hint = " (truncated?)" if exc.pos >= len(raw.rstrip()) - 1 else ""
            raise PredictionsError(f"{where}: not valid JSON{hint}: {exc.msg} at column {exc.colno}") from None
        if not isinstance(rec, dict):
            raise PredictionsError(
                f"{where}: expected a JSON object with {', '.join(REQUIRED)}; got {type(rec).__name__}"
            )
        missing = [k for k in REQUIRED if k not in rec]
        if missing:
            raise PredictionsError(
                f"{where}: missing key {', '.join(repr(k) for k in missing)} (each row needs {', '.join(REQUIRED)})"
            )
        if not isinstance(rec["id"], (str, int)) or isinstance(rec["id"], bool) or str(rec["id"]).strip() == "":
            raise PredictionsError(f"{where}: id must be a non-empty string or a number")
        for k in REQUIRED[1:]:
            if not isinstance(rec[k], str):
                raise PredictionsError(f"{where}: {k} must be a string, not {type(rec[k]).__name__}")
        for k in ("scenario", "gold_sql"):
            if not rec[k].strip():
                raise PredictionsError(f"{where}: {k} is empty")
        if rec["scenario"] not in SCENARIOS:
            raise PredictionsError(
                f"{where}: unknown scenario {rec['scenario']!r} (known: {', '.join(sorted(SCENARIOS))})"
            )
        pid = str(rec["id"])
        if pid in seen:
            raise PredictionsError(f"{where}: duplicate id {pid!r} (first on line {seen[pid]})")
        seen[pid] = n
        dialect = rec.get("dialect") or detect_dialect(rec["gold_sql"])
        if dialect not in DIALECTS:
            raise PredictionsError(f"{where}: dialect {dialect!r} is not one of {', '.join(DIALECTS)}")
        try:
            check_pair(rec["gold_sql"], rec["predicted_sql"], dialect)
        except BadPairInput as exc:
            raise PredictionsError(f"{where}: {exc}") from None
        preds.append(
            Prediction(
                pid,
                rec["scenario"],
                rec["question"],
                rec["gold_sql"],
                rec["predicted_sql"],
                _label(rec.get("label"), where),
                dialect,
                n,
            )
        )
        canonical.append(json.dumps(rec, sort_keys=True, ensure_ascii=False))
    if not preds:
        raise PredictionsError(f"{path}: no predictions (expected one JSON object per line with {', '.join(REQUIRED)})")
    return preds, hashlib.sha256("\n".join(canonical).encode()).hexdigest()


def _lines(path: Path):
    """The file's lines as text, each read with a cap (a 50 MB line is refused before it is held)."""
    with path.open("rb") as f:
        n, offset = 0, 0
        while True:
            raw = f.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            n += 1
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                raise PredictionsError(
                    f"{path}:{n}: line longer than {MAX_LINE_BYTES:,} bytes; one prediction is a few kB"
                )
            try:
                yield raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as exc:
                raise PredictionsError(f"{path}: not UTF-8 text (byte {offset + exc.start})") from None
            offset += len(raw)


def _nesting(text: str) -> int:
    """Deepest [ / { nesting outside JSON strings (checked before json.loads, which would recurse)."""
    depth = deepest = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_NESTING:
                return deepest
        elif ch in "]}":
            depth -= 1
    return deepest


def parse_methods(text: str) -> tuple[str, ...]:
    methods = tuple(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise ValueError(
            f"--methods {text!r}: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(METHODS)}"
        )
    return methods


VERDICT_SCHEMA = {
    "predictions_sha256": pl.String,
    "predictions_file": pl.String,
    "settings_key": pl.String,
    "prediction_id": pl.String,
    "line": pl.Int64,
    "scenario": pl.String,
    "dialect": pl.String,
    "question": pl.String,
    "gold_sql": pl.String,
    "predicted_sql": pl.String,
    "label": pl.Boolean,
    "final": pl.String,
    "final_method": pl.String,
    "verdict_class": pl.String,
    "bound_k": pl.Int64,  # k of "equivalent up to k rows per table" (null for other classes and older rows)
    "accepted": pl.Boolean,
    **{layer: pl.String for layer in LAYERS},
    **{f"{layer}_reason": pl.String for layer in LAYERS},
    "calls": pl.Int64,
    "elapsed_s": pl.Float64,
    "evidence_json": pl.String,
}
KEY = ("predictions_sha256", "prediction_id", "scenario", "settings_key")


def settings_key(settings, methods: tuple[str, ...]) -> str:
    """What a stored verdict depends on besides the prediction itself."""
    return json.dumps(
        {
            "engine": ENGINE_VERSION,
            "backend": settings.backend,
            "flip_rate": settings.flip_rate,
            "seed": settings.seed,
            "budget": settings.budget,
            "sample": settings.sample,
            "sample_groups": list(settings.sample_groups or ()),
            "probe_n": settings.probe_n,
            "timeout_s": settings.timeout_s,
            "threshold": settings.threshold,
            "decision": settings.decision,
            "methods": sorted(methods),
        },
        sort_keys=True,
    )


def verdicts_frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=VERDICT_SCHEMA) if rows else pl.DataFrame(schema=VERDICT_SCHEMA)


@dataclass
class Engine:
    """What judging needs, built once per scenario by the caller (Dagster asset or test)."""

    context_for: Callable  # scenario -> pipelines.aisql.judging.Judging
    judges: object | None = None  # the ``judges`` council, when ``ours`` is asked for


def evaluate(
    preds: list[Prediction],
    digest: str,
    source: str,
    settings,
    methods: tuple[str, ...],
    engine: Engine,
    stored: pl.DataFrame | None = None,
    advance: Callable[[int], None] | None = None,
    journal=None,
) -> tuple[pl.DataFrame, int, int]:
    """(every stored row plus this file's rows, reused, judged). Rows of other files or settings are
    kept as they are; this file's rows under these settings are reused when stored, else judged.
    ``journal`` (storage.journal.RowJournal): rows a killed run finished are reused too, and each
    batch judged here is appended to it as it finishes (#45 item 5)."""
    skey = settings_key(settings, methods)
    stored = stored if stored is not None and stored.height else verdicts_frame([])
    mine = stored.filter((pl.col("predictions_sha256") == digest) & (pl.col("settings_key") == skey))
    have = {(r["prediction_id"], r["scenario"]): r for r in mine.iter_rows(named=True)}
    for r in journal.rows() if journal is not None else ():
        if r.get("predictions_sha256") == digest and r.get("settings_key") == skey:
            have.setdefault((r.get("prediction_id"), r.get("scenario")), r)
    reused = [
        dict(have[(p.id, p.scenario)], predictions_file=source, line=p.line)
        for p in preds
        if (p.id, p.scenario) in have
    ]
    todo = [p for p in preds if (p.id, p.scenario) not in have]
    if advance and reused:
        advance(len(reused))
    fresh: list[dict] = []
    for scenario in dict.fromkeys(p.scenario for p in todo):
        judging = engine.context_for(scenario)
        mine_todo = [q for q in todo if q.scenario == scenario]
        pairs = [PairToJudge(p.id, p.gold_sql, p.predicted_sql, p.dialect, p.question) for p in mine_todo]
        try:
            for at in range(0, len(pairs), JOURNAL_BATCH):  # a batch at a time: each is journaled
                judged = judge_pairs(
                    judging, pairs[at : at + JOURNAL_BATCH], methods, engine.judges, judge_settings(settings), advance
                )
                batch = mine_todo[at : at + JOURNAL_BATCH]
                rows = [_row(p, r, t, digest, source, skey, methods) for p, (r, t) in zip(batch, judged)]
                if journal is not None:
                    journal.append(rows)
                fresh += rows
        finally:
            judging.close()
    others = stored.filter(~((pl.col("predictions_sha256") == digest) & (pl.col("settings_key") == skey)))
    df = pl.concat([others, verdicts_frame(reused + fresh)], how="diagonal_relaxed")
    order = {p.id: i for i, p in enumerate(preds)}
    mine = df.filter((pl.col("predictions_sha256") == digest) & (pl.col("settings_key") == skey))
    mine = (
        mine.with_columns(pl.col("prediction_id").replace_strict(order, default=len(order)).alias("_o"))
        .sort("_o")
        .drop("_o")
    )
    return pl.concat([others, mine], how="diagonal_relaxed"), len(reused), len(fresh)


JOURNAL_BATCH = 16  # pairs judged between two journal writes (the autorater batches within one)


def _row(p: Prediction, r, elapsed: float, digest: str, source: str, skey: str, methods) -> dict:
    layers = {v.layer: v for v in r.layers}
    row = {
        "predictions_sha256": digest,
        "predictions_file": source,
        "settings_key": skey,
        "prediction_id": p.id,
        "line": p.line,
        "scenario": p.scenario,
        "dialect": p.dialect,
        "question": p.question,
        "gold_sql": p.gold_sql,
        "predicted_sql": p.predicted_sql,
        "label": p.label,
        "final": r.final,
        "final_method": r.final_method,
        "verdict_class": r.verdict_class,
        "bound_k": bound_of(r.verdict_class, r.evidence),
        "accepted": r.final == ACCEPT,
        "calls": r.evidence.calls if r.evidence is not None else 0,
        "elapsed_s": round(elapsed, 3),
        "evidence_json": json.dumps(r.evidence.to_dict() if r.evidence is not None else {}, default=str),
    }
    for name in LAYERS:
        v = layers.get(name) if name in ("structural", "ai") or name in methods else None
        row[name] = v.verdict if v is not None else None
        row[f"{name}_reason"] = v.reason if v is not None else None
    return row


METRIC_SCHEMA = {
    "predictions_sha256": pl.String,
    "settings_key": pl.String,
    "dialect": pl.String,
    "method": pl.String,
    "method_label": pl.String,
    "n": pl.Int64,
    "tp": pl.Int64,
    "fn": pl.Int64,
    "tn": pl.Int64,
    "fp": pl.Int64,
    "undecided": pl.Int64,
    "unlabelled": pl.Int64,
    "tpr": pl.Float64,
    "tnr": pl.Float64,
    "accuracy": pl.Float64,
    **COVERAGE_SCHEMA,
    "test_suite_equal": pl.Int64,  # undecided pairs equal on the test suite (counted apart, not a proof)
    **CLASS_SCHEMA,  # the final verdicts per class (#39 item 1), on the final method's row
}


def summary_table(verdicts: pl.DataFrame) -> pl.DataFrame:
    """Table 1 per (file, settings, dialect, method) over labelled predictions; 'cannot decide' counts
    as a rejection (as the paper counts errors) and is also reported on its own."""
    rows = []
    if verdicts.height:
        groups = verdicts.select("predictions_sha256", "settings_key", "dialect").unique(maintain_order=True)
        for g in groups.iter_rows(named=True):
            sub = verdicts.filter(pl.all_horizontal([pl.col(k) == v for k, v in g.items()]))
            labelled = sub.filter(pl.col("label").is_not_null())
            # the verdict class describes the final verdict: the autorater's when it ran, else the layers'
            final_method = "ours" if "ours" in sub.columns and not sub["ours"].is_null().all() else "layers"
            for m in METHODS:
                if labelled.height == 0 or labelled[m].is_null().all():
                    continue
                c = confusion(labelled["label"].to_list(), [v == ACCEPT for v in labelled[m].to_list()])

                cov = coverage(
                    labelled["label"].to_list(),
                    _decided(labelled, m),
                    _decided(labelled, "ex"),
                    _decided(labelled, "ours"),
                )
                rows.append(
                    {
                        **g,
                        "method": m,
                        "method_label": METHOD_LABELS[m],
                        "n": c.n,
                        "tp": c.tp,
                        "fn": c.fn,
                        "tn": c.tn,
                        "fp": c.fp,
                        "undecided": int((labelled[m] == UNDECIDED).sum()),
                        "unlabelled": sub.height - labelled.height,
                        "tpr": c.tpr,
                        "tnr": c.tnr,
                        "accuracy": c.accuracy,
                        **cov,
                        "test_suite_equal": _test_suite_equal(labelled, m),
                        **(class_counts(labelled) if m == final_method else {}),
                    }
                )
    return pl.DataFrame(rows, schema=METRIC_SCHEMA) if rows else pl.DataFrame(schema=METRIC_SCHEMA)


def _decided(rows: pl.DataFrame, col: str) -> list[bool | None] | None:
    """A method's verdicts as accepted True/False, None when undecided; None when it did not run."""
    if col not in rows.columns or rows[col].is_null().all():
        return None
    return [None if v in (UNDECIDED, None) else v == ACCEPT for v in rows[col].to_list()]


def _test_suite_equal(rows: pl.DataFrame, method: str) -> int:
    """Undecided pairs whose structural layer found them equal on the test suite (not a proof)."""
    if method not in ("layers", "structural") or "verdict_class" not in rows.columns:
        return 0
    return int(rows.filter((pl.col(method) == UNDECIDED) & (pl.col("verdict_class") == EQUAL_SUITE_CLASS)).height)


def _pct(v) -> str:
    return "–" if v is None else f"{100 * v:.1f}"


def summary_markdown(metrics: pl.DataFrame) -> str:
    """Table 1's layout: one row per method, TPR / TNR / Acc per dialect, counts in brackets."""
    dialects = [d for d in DIALECTS if metrics.height and d in set(metrics["dialect"].to_list())]
    lines = [
        "| Method | " + " | ".join(f"{d} TPR | {d} TNR | {d} Acc" for d in dialects) + " | cannot decide |",
        "|---|" + "---|" * (3 * len(dialects) + 1),
    ]
    for m in METHODS:
        cells, undecided, seen = [], 0, False
        for d in dialects:
            r = metrics.filter((pl.col("dialect") == d) & (pl.col("method") == m))
            if not r.height:
                cells += ["–"] * 3
                continue
            seen = True
            x = r.row(0, named=True)
            undecided += x["undecided"]
            cells += [
                f"{_pct(x['tpr'])} ({x['tp']}/{x['tp'] + x['fn']})",
                f"{_pct(x['tnr'])} ({x['tn']}/{x['tn'] + x['fp']})",
                f"{_pct(x['accuracy'])} ({x['tp'] + x['tn']}/{x['n']})",
            ]
        if seen:
            lines.append(f"| {METHOD_LABELS[m]} | " + " | ".join(cells) + f" | {undecided} |")
    lines += [
        "",
        "coverage and the score under each policy for undecided pairs (– where that fallback did not run):",
        "",
    ]
    lines.append(coverage_markdown(metrics, METHOD_LABELS))
    classes = class_markdown(metrics, METHOD_LABELS)
    if classes:
        lines += ["", CLASS_NOTE, "", classes]
    return "\n".join(lines)


EXPORT_COLUMNS = (
    "prediction_id",
    "line",
    "scenario",
    "dialect",
    "question",
    "label",
    "final",
    "final_method",
    "verdict_class",
    "accepted",
    *LAYERS,
    *(f"{x}_reason" for x in LAYERS),
    "calls",
    "predictions_sha256",
    "predictions_file",
    "gold_sql",
    "predicted_sql",
)


def export(rows: pl.DataFrame, path: Path) -> Path:
    """Write ``rows`` (one file's verdicts) as JSONL or CSV, by the path's suffix."""
    path = Path(path)
    out = rows.select([c for c in EXPORT_COLUMNS if c in rows.columns])
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".csv":
        out.write_csv(path)
    elif path.suffix.lower() in (".jsonl", ".ndjson"):
        out.write_ndjson(path)
    else:
        raise ValueError(f"{path}: export format unknown; use a .jsonl or .csv name")
    return path


__all__ = [
    "ACCEPT",
    "REJECT",
    "UNDECIDED",
    "Prediction",
    "PredictionsError",
    "evaluate",
    "export",
    "read_predictions",
    "summary_markdown",
    "summary_table",
]


@dataclass
class FileResults:
    """One predictions file's verdicts under the latest settings it was judged with, and its Table 1."""

    verdicts: pl.DataFrame
    counts: dict[str, int]  # final verdict -> count (accept, reject, cannot decide)
    metrics: pl.DataFrame


def file_results(store, digest: str) -> FileResults:
    """The stored verdicts and metrics of the file with content hash ``digest``, for the settings
    of its latest judgement (``store``: the artifact store)."""
    verdicts = store.read_latest("aisql_prediction_verdicts")
    mine = verdicts.filter(pl.col("predictions_sha256") == digest)
    skey = mine["settings_key"][-1] if mine.height else ""
    mine = mine.filter(pl.col("settings_key") == skey) if mine.height else mine  # this run's
    counts = {v: int((mine["final"] == v).sum()) for v in (ACCEPT, REJECT, UNDECIDED)}
    metrics = store.read_latest("aisql_prediction_metrics")
    mine_metrics = metrics.filter((pl.col("predictions_sha256") == digest) & (pl.col("settings_key") == skey))
    return FileResults(mine, counts, mine_metrics)
