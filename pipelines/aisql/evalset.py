"""The labelled evaluation set ``(question, gold AI-SQL, candidate AI-SQL, correct?)`` per scenario and
dialect (spec §12).

* Gold = the SemBench dialect file (placeholders filled at run time).
* Controlled variants (:mod:`pipelines.aisql.variants`) carry their label by construction
  (``label_source=constructed``). With ``correct_share`` (default 0.7, the paper's BigQuery mix)
  the incorrect variants are subsampled, seeded, so about that share of labelled pairs is correct.
* Generator candidates from the council's ``generators`` role (question, label-free schema with
  sample rows, few-shot examples from the *other* SemBench scenarios) are labelled by a procedure
  independent of every judge measured (:func:`execution_labels`, ``label_source=executed``):
  execution under the label oracle at p = 0 plus the structural rules. Where that procedure cannot
  decide, a person can (``quandary aisql label``, stored in ``labels/manual.jsonl``); pairs left
  unlabelled are judged but not counted.
* The two sets are reported separately (:func:`with_set`: ``synthetic`` = variants, ``generated``),
  with the paper's balance figures beside ours (:func:`balance_table`).
"""

import csv
import json
import random
from pathlib import Path

import polars as pl
from pydantic import BaseModel

from pipelines.aisql.diffs import ex_equal
from pipelines.aisql.operators import AIRuntime, LabelOracle
from pipelines.aisql.prompts import generator_messages
from pipelines.aisql.rewrite import find_operator_names
from pipelines.aisql.scenarios import (
    SCENARIOS,
    GoldQuery,
    Scenario,
    get_scenario,
    load_labels,
    scenario_dir,
    stable_id,
    visible_columns,
)
from pipelines.aisql.split_execution import EvalContext, execute_pair, table_columns_of
from pipelines.aisql.variants import VariantSettings, make_variants

PAIR_SCHEMA = {
    "pair_id": pl.String,
    "scenario": pl.String,
    "dialect": pl.String,
    "question_id": pl.String,
    "question": pl.String,
    "gold_sql": pl.String,
    "candidate_sql": pl.String,
    "label": pl.Boolean,
    "label_source": pl.String,
    "variant_layer": pl.String,
    "variant_type": pl.String,
    "generator": pl.String,
    "notes": pl.String,
}
# Gold queries whose full run exceeds the default call budget (all 14k pairs of one movie): left out
# of the default set; run them on a sampled database (--sample) instead.
DEFAULT_EXCLUDED = {"movie": {"Q7"}}


def variant_pairs(
    scenario: Scenario,
    golds: list[GoldQuery],
    *,
    correct_share: float | None = 0.7,
    seed: int = 0,
    variant_types: tuple[str, ...] | None = None,
) -> list[dict]:
    settings = VariantSettings(scenario.vocabulary, scenario.wrong_columns, scenario.alternative_literals)
    rows = []
    for g in golds:
        try:
            # count_key's label (COUNT(*) = COUNT(key)) holds only for a declared, hence NOT NULL, key:
            # an undeclared one may hold NULLs on another database (#39; SemBench declares none)
            variants = make_variants(g.sql, g.dialect, settings, scenario.key_columns(declared=True))
        except Exception as exc:  # noqa: BLE001 - a gold we cannot transform is recorded, the run goes on
            rows.append(_row(g, g.sql, None, "none", "variant_failed", None, notes=f"no variants: {exc}"[:300]))
            continue
        for v in variants:
            if variant_types is not None and v.type not in variant_types:
                continue
            rows.append(_row(g, v.sql, v.label, v.layer, v.type, None, label_source="constructed"))
    if correct_share is not None:  # per dialect, as Table 1 reports per dialect
        balanced = []
        for d in dict.fromkeys(r["dialect"] for r in rows):
            balanced += _balance([r for r in rows if r["dialect"] == d], correct_share, seed)
        rows = balanced
    return rows


def _balance(rows: list[dict], share: float, seed: int) -> list[dict]:
    correct = [r for r in rows if r["label"] is True]
    wrong = [r for r in rows if r["label"] is False]
    other = [r for r in rows if r["label"] is None]
    want = int(round(len(correct) * (1 - share) / share)) if share > 0 else len(wrong)
    if want < len(wrong):
        rng = random.Random(seed)
        # keep every error type represented before filling up at random
        by_type: dict[str, list[dict]] = {}
        for r in wrong:
            by_type.setdefault(r["variant_type"], []).append(r)
        picked = []
        for t in sorted(by_type):
            rng.shuffle(by_type[t])
        while len(picked) < want:
            for t in sorted(by_type):
                if by_type[t] and len(picked) < want:
                    picked.append(by_type[t].pop())
        wrong = picked
    keep = {id(r) for r in correct + wrong + other}
    return [r for r in rows if id(r) in keep]


def _row(g: GoldQuery, cand: str, label, layer, vtype, generator, *, label_source="none", notes="") -> dict:
    return {
        "pair_id": stable_id(g.scenario, g.dialect, g.question_id, cand),
        "scenario": g.scenario,
        "dialect": g.dialect,
        "question_id": g.question_id,
        "question": g.question,
        "gold_sql": g.sql,
        "candidate_sql": cand,
        "label": label,
        "label_source": label_source,
        "variant_layer": layer,
        "variant_type": vtype,
        "generator": json.dumps(generator) if generator else None,
        "notes": notes,
    }


def pairs_frame(rows: list[dict]) -> pl.DataFrame:
    if not rows:
        return pl.DataFrame(schema=PAIR_SCHEMA)
    df = pl.DataFrame(rows, schema=PAIR_SCHEMA)
    return df.unique("pair_id", keep="first", maintain_order=True)


# ----------------------------------------------------------------------------- generators


def few_shot_examples(data_root: Path, scenario: str, dialect: str, k: int = 3) -> list[tuple[str, str]]:
    """Leave-one-scenario-out examples: (question, SQL) from other SemBench scenarios' dialect files."""
    out = []
    for other in ("cars", "animals", "ecomm", "mmqa"):
        if other == scenario:
            continue
        base = Path(data_root) / "sembench" / "files" / other / "query"
        folder = base / ("bigquery" if dialect == "bigquery" else "thalamusdb")
        nl = base / "natural_language"
        if not folder.is_dir():
            continue
        for f in sorted(folder.glob("*.sql")):
            text = f.read_text()
            q = nl / f"{f.stem}.txt"
            if find_operator_names(text) and q.is_file() and len(text) < 1500:
                out.append((q.read_text().strip(), text.strip()))
                break
        if len(out) >= k:
            break
    return out


def generator_pairs(
    council,
    data_root: Path,
    scenario: Scenario,
    golds: list[GoldQuery],
    schema_of,
    *,
    samples: int = 3,
    temperature: float = 1.0,
) -> list[dict]:
    """Candidates from the ``generators`` council (the paper's method); unlabelled until a person labels them."""

    class Generated(BaseModel):
        sql: str

    member = council.member_names[0]
    rows = []
    for g in golds:
        msgs = generator_messages(
            dialect=g.dialect,
            schema=schema_of(g.dialect),
            question=g.question,
            examples=few_shot_examples(data_root, scenario.name, g.dialect),
        )
        for k in range(samples):
            res = council.ask(
                member,
                msgs,
                Generated,
                {"stage": "aisql_generate", "candidate_id": g.question_id},
                overrides={"temperature": temperature, "seed": k},
            )
            sql = res.parsed.sql if res.ok else (res.raw_text or "")
            gen = {"model": council.member(member).model, "temperature": temperature, "sample_idx": k}
            rows.append(
                _row(
                    g,
                    sql,
                    None,
                    "none",
                    "generated",
                    gen,
                    notes="" if res.ok else f"generator failed: {res.error}"[:300],
                )
            )
    return rows


# ----------------------------------------------------------------------------- manual labels


def manual_labels_path(home: Path) -> Path:
    return Path(home) / "aisql" / "labels" / "manual.jsonl"


def read_manual_labels(path: Path) -> dict[str, dict]:
    out: dict[str, dict] = {}
    if not Path(path).is_file():
        return out
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            out[rec["pair_id"]] = rec
        except (json.JSONDecodeError, KeyError) as exc:
            raise ValueError(f"{path}:{i}: not a label record ({exc}); expected JSON with pair_id and label") from None
    return out


def parse_label(text: str) -> bool | None:
    t = (text or "").strip().lower()
    if t in ("1", "true", "yes", "y", "correct", "c"):
        return True
    if t in ("0", "false", "no", "n", "incorrect", "wrong", "i"):
        return False
    return None


def import_label_csv(csv_path: Path, out_path: Path) -> tuple[int, list[str]]:
    """Append labels from a CSV (pair_id,label[,rationale]); returns (stored, problems)."""

    problems, stored = [], 0
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with open(csv_path, newline="") as fh, open(out_path, "a") as out:
        reader = csv.DictReader(fh)
        if not reader.fieldnames or "pair_id" not in reader.fieldnames or "label" not in reader.fieldnames:
            raise ValueError(f"{csv_path}: needs a header with pair_id and label (and optionally rationale)")
        for n, row in enumerate(reader, 2):
            label = parse_label(row.get("label", ""))
            if label is None:
                if (row.get("label") or "").strip():
                    problems.append(f"{csv_path}:{n}: label {row.get('label')!r} is not yes/no; skipped")
                continue
            out.write(
                json.dumps(
                    {
                        "pair_id": row["pair_id"].strip(),
                        "label": label,
                        "rationale": (row.get("rationale") or "").strip(),
                        "label_source": "manual",
                    }
                )
                + "\n"
            )
            stored += 1
    return stored, problems


def apply_manual_labels(pairs: pl.DataFrame, labels: dict[str, dict]) -> pl.DataFrame:
    if not labels or pairs.height == 0:
        return pairs
    lab = pl.DataFrame(
        {"pair_id": list(labels), "_m": [bool(v["label"]) for v in labels.values()]},
        schema={"pair_id": pl.String, "_m": pl.Boolean},
    )
    out = pairs.join(lab, on="pair_id", how="left")
    return out.with_columns(
        pl.when(pl.col("label").is_null() & pl.col("_m").is_not_null())
        .then(pl.col("_m"))
        .otherwise(pl.col("label"))
        .alias("label"),
        pl.when(pl.col("label").is_null() & pl.col("_m").is_not_null())
        .then(pl.lit("manual"))
        .otherwise(pl.col("label_source"))
        .alias("label_source"),
    ).drop("_m")


def build_pairs(
    scenario: str,
    data_root: Path,
    golds: list[GoldQuery],
    *,
    correct_share: float | None = 0.7,
    seed: int = 0,
    extra_rows: list[dict] | None = None,
    manual: dict | None = None,
    variant_types: tuple[str, ...] | None = None,
) -> pl.DataFrame:
    sc = SCENARIOS[scenario]
    scenario_dir(data_root, sc)
    rows = variant_pairs(sc, golds, correct_share=correct_share, seed=seed, variant_types=variant_types)
    rows += list(extra_rows or [])
    return apply_manual_labels(pairs_frame(rows), manual or {})


# ----------------------------------------------------------------------------- independent labels

# The paper's labelled set (manual verification of generator candidates), implied by Table 1.
PAPER_BALANCE = {"bigquery": (25, 11), "thalamusdb": (12, 3)}


def execution_label(ev) -> tuple[bool | None, str]:
    """Label of one generated candidate from its split execution under the label oracle at p = 0
    (no noise: an equivalent query returns exactly the gold's rows) plus the structural rules.

    * correct: the candidate runs, its result equals the gold's as a bag (in order under a gold
      ORDER BY), and the structural layer does not prove the relational parts different;
    * incorrect: the candidate does not run, or its result differs, or the structural layer proves
      the relational parts different (a valuation of the AI calls separates them);
    * none (left to a person): the gold does not run, or the oracle cannot decide a call.
    """

    for side, rec in (("gold", ev.gold), ("candidate", ev.cand)):
        if rec.status == "undecided":
            return None, f"{side}: {rec.error}"[:300]
    if not ev.gold.ok:
        return None, f"the gold query did not run: {ev.gold.status} {ev.gold.error}"[:300]
    if not ev.cand.ok:
        return False, f"the candidate did not run: {ev.cand.status} {ev.cand.error}"[:300]
    if ev.structural is not None and ev.structural.verdict == "differ":
        return False, f"structural parts differ: {ev.structural.reason}"[:300]
    if not ex_equal(ev.gold, ev.cand, ev.ordered):
        return False, f"different result at p = 0 ({ev.gold.row_count} vs {ev.cand.row_count} rows)"
    return True, "same result at p = 0; structural parts not proven different"


def execution_labels(rows: list[dict], db, *, budget: int = 5000, seed: int = 0) -> list[dict]:
    """Label the unlabelled generated rows by :func:`execution_label` (a fresh runtime over the label
    oracle at p = 0, shared by these rows only); other rows are returned unchanged."""

    sc = get_scenario(db.scenario)
    runtime = AIRuntime(
        LabelOracle(load_labels(db.labels_path), sc.vocabulary, p=0.0, seed=seed, score_of=sc.score_of), budget=budget
    )
    ctx = EvalContext(
        db.path, runtime, sc.key_columns(), table_columns_of(visible_columns(db.path)), budget=budget, seed=seed
    )
    out = []
    try:
        for r in rows:
            if r["variant_type"] != "generated" or r["label"] is not None:
                out.append(r)
                continue
            label, why = execution_label(execute_pair(ctx, r["gold_sql"], r["candidate_sql"], r["dialect"]))
            note = (
                f"label oracle p=0 + structural rules: {why}"
                if label is not None
                else f"no independent label (needs `quandary aisql label`): {why}"
            )
            out.append(
                {
                    **r,
                    "label": label,
                    "label_source": "executed" if label is not None else "none",
                    "notes": "; ".join(x for x in (r.get("notes"), note) if x)[:500],
                }
            )
    finally:
        runtime.close()
    return out


def with_set(pairs: pl.DataFrame) -> pl.DataFrame:
    """A ``set`` column: ``generated`` (generator candidates) or ``synthetic`` (controlled variants)."""
    return pairs.with_columns(
        pl.when(pl.col("variant_type") == "generated")
        .then(pl.lit("generated"))
        .otherwise(pl.lit("synthetic"))
        .alias("set")
    )


def balance_table(pairs: pl.DataFrame) -> pl.DataFrame:
    """Correct / incorrect / unlabelled per set and dialect, with the paper's figures as set ``paper``."""
    rows = []
    df = with_set(pairs)
    for (s, d), g in sorted(df.group_by(["set", "dialect"]), key=lambda kv: kv[0]):
        correct, wrong = int(g["label"].eq(True).sum()), int(g["label"].eq(False).sum())
        rows.append(
            {
                "set": s,
                "dialect": d,
                "n": correct + wrong,
                "correct": correct,
                "incorrect": wrong,
                "unlabelled": int(g["label"].is_null().sum()),
                "correct_share": correct / (correct + wrong) if correct + wrong else None,
            }
        )
    for d, (c, w) in PAPER_BALANCE.items():
        rows.append(
            {
                "set": "paper",
                "dialect": d,
                "n": c + w,
                "correct": c,
                "incorrect": w,
                "unlabelled": 0,
                "correct_share": c / (c + w),
            }
        )
    return pl.DataFrame(
        rows,
        schema={
            "set": pl.String,
            "dialect": pl.String,
            "n": pl.Int64,
            "correct": pl.Int64,
            "incorrect": pl.Int64,
            "unlabelled": pl.Int64,
            "correct_share": pl.Float64,
        },
    )


def export_label_csv(pairs: pl.DataFrame, path: Path, all_pairs: bool = False) -> int:
    """Write the pairs to label (every pair with ``all_pairs``) as a CSV with empty ``label`` and
    ``rationale`` columns for :func:`import_label_csv`; returns how many were written."""
    todo = pairs if all_pairs else pairs.filter(pl.col("label").is_null())
    todo.select(
        "pair_id",
        "dialect",
        "question",
        "gold_sql",
        "candidate_sql",
        pl.lit("").alias("label"),
        pl.lit("").alias("rationale"),
    ).write_csv(path)
    return todo.height
