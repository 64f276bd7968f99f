"""Pair judging, one entry point (#28 item 1): `quandary aisql compare` (one pair), `quandary aisql
evaluate` and its asset (a file of predictions) assemble the judge layers here, and nowhere else.

:func:`open_judging` builds what judging a scenario needs (the evaluation context, the schema the
autorater sees, the operator runtime to close); :func:`judge_pairs` runs every deterministic layer
(:func:`pipelines.aisql.compare.judge_pair`) and, when ``ours`` is asked for, adds the LLM
autorater's layer, which then decides.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pipelines.aisql.checks import BadPairInput
from pipelines.aisql.compare import JUDGED, UNDECIDED, LayerVerdict, PairJudgement, autorater_layer, judge_pair
from pipelines.aisql.methods import JudgeSettings, autorate
from pipelines.aisql.normal_form import schema_of as schema_of_types
from pipelines.aisql.pipeline import AisqlSettings, make_runtime, schema_text
from pipelines.aisql.scenarios import ScenarioDB, get_scenario, satisfied_keys, visible_columns, visible_types
from pipelines.aisql.split_execution import EvalContext, table_columns_of


@dataclass(frozen=True)
class PairToJudge:
    id: str
    gold_sql: str
    candidate_sql: str
    dialect: str
    question: str = ""


@dataclass
class Judging:
    """What judging one scenario's pairs needs; ``close()`` stops the AI operators' runtime."""

    ctx: EvalContext
    schema_of: Callable[[str], str]
    close: Callable[[], None]


def open_judging(settings: AisqlSettings, db: ScenarioDB, getter: Callable | None = None) -> Judging:
    """The evaluation context for ``db`` under ``settings`` (``getter``: the council factory, e.g.
    the Dagster council resource's; None: the process's registry)."""
    runtime = make_runtime(settings, db, getter=getter)
    keys = get_scenario(db.scenario).key_columns()
    ctx = EvalContext(
        db.path,
        runtime,
        keys,
        table_columns_of(visible_columns(Path(db.path))),
        budget=settings.budget,
        probe_n=settings.probe_n,
        seed=settings.seed,
        timeout_s=settings.timeout_s,
        schema=schema_of_types(visible_types(Path(db.path))),
        # only declared keys the data satisfies (SemBench declares none); a key read off the data is
        # no assumption of a proof (#39)
        unique_keys=satisfied_keys(Path(db.path), get_scenario(db.scenario).key_columns(declared=True)),
    )
    session = runtime.session(db.path)
    if session is not None:
        try:  # the sandbox worker's start is the run's setup, not the first pair's time
            session.start()
        except Exception:  # noqa: BLE001 - the first query records why it cannot run
            pass
    cache: dict[str, str] = {}

    def schema_of(dialect: str) -> str:
        if dialect not in cache:
            cache[dialect] = schema_text(db.path, db.scenario, dialect)
        return cache[dialect]

    return Judging(ctx, schema_of, runtime.close)


def judge_settings(settings: AisqlSettings) -> JudgeSettings:
    return JudgeSettings(
        settings.threshold, settings.decision, settings.relational_gate, settings.judge_member, settings.compact_judge
    )


def judge_pairs(
    judging: Judging,
    pairs: list[PairToJudge],
    methods,
    judges=None,
    settings: JudgeSettings | None = None,
    advance: Callable[[int], None] | None = None,
) -> list[tuple[PairJudgement, float]]:
    """Every layer for each pair, with the seconds its deterministic layers took. With ``ours`` in
    ``methods`` the autorater (``judges``: the judges council) is asked about the pairs the
    deterministic layers leave open, and decides those; what the layers decided is final (the
    relational gate). A failed judge call is a layer that cannot decide, never a verdict."""
    done = []
    for p in pairs:
        start = time.perf_counter()
        try:
            # the split parts' runs are the autorater's evidence only: skipped when it is not asked
            r = judge_pair(judging.ctx, p.gold_sql, p.candidate_sql, p.dialect, parts="ours" in methods)
        except BadPairInput as exc:  # callers check first (one line before a run); kept as a row here
            r = PairJudgement([], UNDECIDED, "input", None, bad_input=str(exc))
        done.append((r, time.perf_counter() - start))
        if advance and "ours" not in methods:
            advance(1)
    if "ours" in methods and pairs:
        # the relational gate (#33 item 4): the autorater is asked only what the layers leave open
        open_ = [(p, r) for p, (r, _) in zip(pairs, done) if r.final == UNDECIDED and not r.bad_input]
        for _, (r, _) in zip(pairs, done):
            if r.final != UNDECIDED or r.bad_input:
                why = f"bad input: {r.bad_input}" if r.bad_input else f"the {r.final_method} layer decided"
                r.layers.append(LayerVerdict("ours", r.final, f"autorater not asked: {why}"))
        if open_:
            items = [(p.id, p.dialect, p.question, {**r.evidence.to_dict(), "question": p.question}) for p, r in open_]
            verdicts = autorate(judges, items, schema_of=judging.schema_of, settings=settings or JudgeSettings())
            for (_, r), v in zip(open_, verdicts):
                layer = autorater_layer(v)
                r.layers.append(layer)
                r.final, r.final_method = layer.verdict, "ours"
                r.verdict_class = JUDGED if layer.verdict != UNDECIDED else r.verdict_class
        if advance:
            advance(len(pairs))
    return done
