"""The labelled evaluation set ``(question, gold AI-SQL, candidate AI-SQL, correct?)`` per scenario and
dialect (spec §12).

* Gold = the SemBench dialect file (placeholders filled at run time).
* Controlled variants (:mod:`pipelines.aisql.variants`) carry their label by construction
  (``label_source=constructed``). With ``correct_share`` (default 0.7, the paper's BigQuery mix)
  the incorrect variants are subsampled, seeded, so about that share of labelled pairs is correct.
* Generator candidates from the council's ``generators`` role (question, label-free schema with
  sample rows, few-shot examples from the *other* SemBench scenarios) carry a label only when a
  person gives one (``quandary aisql label``, stored in ``labels/manual.jsonl``); unlabelled pairs
  are judged but not counted.
"""

import json
import random
from pathlib import Path

import polars as pl

from pipelines.aisql.rewrite import find_operator_names
from pipelines.aisql.scenarios import SCENARIOS, GoldQuery, Scenario, scenario_dir, stable_id
from pipelines.aisql.variants import VariantSettings, make_variants

PAIR_SCHEMA = {
    "pair_id": pl.String, "scenario": pl.String, "dialect": pl.String, "question_id": pl.String,
    "question": pl.String, "gold_sql": pl.String, "candidate_sql": pl.String, "label": pl.Boolean,
    "label_source": pl.String, "variant_layer": pl.String, "variant_type": pl.String,
    "generator": pl.String, "notes": pl.String,
}
# Gold queries whose full run exceeds the default call budget (all 14k pairs of one movie): left out
# of the default set; run them on a sampled database (--sample) instead.
DEFAULT_EXCLUDED = {"movie": {"Q7"}}


def variant_pairs(scenario: Scenario, golds: list[GoldQuery], *, correct_share: float | None = 0.7,
                  seed: int = 0, variant_types: tuple[str, ...] | None = None) -> list[dict]:
    settings = VariantSettings(scenario.vocabulary, scenario.wrong_columns, scenario.alternative_literals)
    rows = []
    for g in golds:
        try:
            variants = make_variants(g.sql, g.dialect, settings, scenario.key_columns())
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
        "scenario": g.scenario, "dialect": g.dialect, "question_id": g.question_id, "question": g.question,
        "gold_sql": g.sql, "candidate_sql": cand, "label": label, "label_source": label_source,
        "variant_layer": layer, "variant_type": vtype,
        "generator": json.dumps(generator) if generator else None, "notes": notes,
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


def generator_pairs(council, data_root: Path, scenario: Scenario, golds: list[GoldQuery], schema_of, *,
                    samples: int = 3, temperature: float = 1.0) -> list[dict]:
    """Candidates from the ``generators`` council (the paper's method); unlabelled until a person labels them."""
    from pydantic import BaseModel

    from pipelines.aisql.prompts import generator_messages

    class Generated(BaseModel):
        sql: str

    member = council.member_names[0]
    rows = []
    for g in golds:
        msgs = generator_messages(dialect=g.dialect, schema=schema_of(g.dialect), question=g.question,
                                  examples=few_shot_examples(data_root, scenario.name, g.dialect))
        for k in range(samples):
            res = council.ask(member, msgs, Generated, {"stage": "aisql_generate", "candidate_id": g.question_id},
                              overrides={"temperature": temperature, "seed": k})
            sql = res.parsed.sql if res.ok else (res.raw_text or "")
            gen = {"model": council.member(member).model, "temperature": temperature, "sample_idx": k}
            rows.append(_row(g, sql, None, "none", "generated", gen,
                             notes="" if res.ok else f"generator failed: {res.error}"[:300]))
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
    import csv

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
            out.write(json.dumps({"pair_id": row["pair_id"].strip(), "label": label,
                                  "rationale": (row.get("rationale") or "").strip(),
                                  "label_source": "manual"}) + "\n")
            stored += 1
    return stored, problems


def apply_manual_labels(pairs: pl.DataFrame, labels: dict[str, dict]) -> pl.DataFrame:
    if not labels or pairs.height == 0:
        return pairs
    lab = pl.DataFrame({"pair_id": list(labels), "_m": [bool(v["label"]) for v in labels.values()]},
                       schema={"pair_id": pl.String, "_m": pl.Boolean})
    out = pairs.join(lab, on="pair_id", how="left")
    return out.with_columns(
        pl.when(pl.col("label").is_null() & pl.col("_m").is_not_null()).then(pl.col("_m")).otherwise(pl.col("label")).alias("label"),
        pl.when(pl.col("label").is_null() & pl.col("_m").is_not_null()).then(pl.lit("manual")).otherwise(pl.col("label_source")).alias("label_source"),
    ).drop("_m")


def build_pairs(scenario: str, data_root: Path, golds: list[GoldQuery], *, correct_share: float | None = 0.7,
                seed: int = 0, extra_rows: list[dict] | None = None, manual: dict | None = None,
                variant_types: tuple[str, ...] | None = None) -> pl.DataFrame:
    sc = SCENARIOS[scenario]
    scenario_dir(data_root, sc)
    rows = variant_pairs(sc, golds, correct_share=correct_share, seed=seed, variant_types=variant_types)
    rows += list(extra_rows or [])
    return apply_manual_labels(pairs_frame(rows), manual or {})
