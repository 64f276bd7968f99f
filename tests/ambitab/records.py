"""Hand-built AmbiTab task records (the corpus job's TaskRecord) for protocol tests."""

from pipelines.ambitab.protocol.task import Task
from pipelines.ambitab.record import TaskRecord, make_avt_id, make_record_id


def amb(term, resolution=None, *, kind="critical", aliases=(), concepts=(), amb_id=None, frozen_intent=None):
    return {
        "amb_id": amb_id or f"amb-{term}",
        "term": term,
        "aliases": list(aliases),
        "kind": kind,
        "resolution": resolution or f"By {term} I mean the resolved {term}.",
        "concepts": list(concepts),
        "frozen_intent": frozen_intent,
    }


def record(
    ambiguities=(),
    *,
    query="List the things.",
    db_id="db1",
    db_path=None,
    corpus="ambrosia",
    reference_sql="SELECT 1",
    interp="i0",
    executable=True,
    split="all",
) -> TaskRecord:
    ambiguities = list(ambiguities)
    avt = make_avt_id(corpus, query, db_id, [a["term"] for a in ambiguities])
    return TaskRecord(
        record_id=make_record_id(corpus, avt, interp),
        corpus=corpus,
        split=split,
        avt_id=avt,
        interpretation_id=interp,
        db_id=db_id,
        db_path=db_path,
        spec={
            "user_query": query,
            "sql_engine_name": "SQLite",
            "db_name": db_id,
            "db_schema": "CREATE TABLE t(x INT);",
        },
        ambiguities=ambiguities,
        verifier={
            "reference_sql": [reference_sql],
            "executable": executable,
            "skip_reason": None if executable else "structural record",
        },
    )


def task(*args, **kw) -> Task:
    return Task.from_record(record(*args, **kw))
