"""Each oracle sees exactly the fields the paper's Table 6 (and Appendix G) lists for it (issue 20
item 4): every field of a task carries a sentinel, and every oracle's prompts are checked against
:data:`pipelines.ambitab.protocol.oracles.ORACLE_ACCESS`: a listed field is in the prompt, an
unlisted one is not. The deterministic oracles use no prompt: their replies must not change when
any field outside their list changes."""

import asyncio
import json

import pytest

from pipelines.ambitab.protocol.oracles import ORACLE_ACCESS, make_oracle
from pipelines.ambitab.protocol.task import Task
from pipelines.ambitab.record import Ambiguity, OracleContext, Spec, TaskRecord, VerifierAssets
from resources.llm import Council, call_log
from tests.llm_fakes import scripted_member

SENTINELS = {
    "user_query": "Q-USERQUERY-7",
    "schema": "CREATE TABLE S_SCHEMA_7 (x INT);",
    "column_meanings": "M-MEANING-7",
    "external_knowledge": "K-KNOWLEDGE-7",
    "clear_query": "C-CLEARQUERY-7",
    "withheld_evidence": "E-EVIDENCE-7",
    "reference_sql": "SELECT REFCOL_7 FROM REFTAB_7",
    "sql_segments": "SEGMENT_7 > 3",
    "term": "zeta7",
    "type": "T-TYPE-7",
    "sql_snippet": "SNIPPET_7",
    "aliases": "A-ALIAS-7",
    "concepts": "N-CONCEPT-7",
    "resolution": "R-RESOLUTION-7",
    "frozen_intent": "F-INTENT-7",
    # fields no oracle reads (not in any ORACLE_ACCESS row): identifiers, the spec's engine and
    # database name, and the verifier's private assets besides the reference SQL
    "record_id": "I-RECORDID-7",
    "db_id": "B-DBID-7",
    "db_path": "/P-DBPATH-7.sqlite",
    "sql_engine_name": "G-ENGINE-7",
    "db_name": "D-DBNAME-7",
    "preprocess_sql": "UPDATE PREPROCESS_7 SET x = 1",
    "clean_up_sql": "DELETE FROM CLEANUP_7",
    "test_cases": "V-TESTCASE-7",
}


def sentinel_record(frozen_intent: bool = True) -> TaskRecord:
    s = SENTINELS
    return TaskRecord(
        record_id=s["record_id"],
        corpus="ambrosia",
        avt_id="a1",
        interpretation_id="i0",
        db_id=s["db_id"],
        db_path=s["db_path"],
        engine="sqlite",
        spec=Spec(
            user_query=s["user_query"],
            sql_engine_name=s["sql_engine_name"],
            db_name=s["db_name"],
            db_schema=s["schema"],
            column_meanings={"c": s["column_meanings"]},
            external_knowledge=[s["external_knowledge"]],
        ),
        ambiguities=[
            Ambiguity(
                amb_id="amb1",
                term=s["term"],
                kind="critical",
                aliases=[s["aliases"]],
                resolution=s["resolution"],
                frozen_intent=s["frozen_intent"] if frozen_intent else None,
                sql_snippet=s["sql_snippet"],
                concepts=[s["concepts"]],
                type=s["type"],
            )
        ],
        oracle_context=OracleContext(
            clear_query=s["clear_query"], withheld_evidence=[s["withheld_evidence"]], sql_segments=[s["sql_segments"]]
        ),
        verifier=VerifierAssets(
            reference_sql=[s["reference_sql"]],
            preprocess_sql=[s["preprocess_sql"]],
            clean_up_sql=[s["clean_up_sql"]],
            test_cases=[s["test_cases"]],
        ),
    )


def sentinel_task(frozen_intent: bool = True) -> Task:
    return Task.from_record(sentinel_record(frozen_intent))


def _with(model, **update):
    return model.model_copy(update=update)


class Capture:
    def __init__(self):
        self.prompts: dict[str, str] = {}

    def __call__(self, req):
        text = "\n".join(m["content"] for m in req.messages)
        if "Action Chosen" in text:
            self.prompts["responder"] = text
            return json.dumps({"type": "labeled", "output": "ok"})
        self.prompts["matcher"] = text
        return json.dumps({"action": f'labeled("{SENTINELS["term"]}")', "cot": "-"})


def _fields(text: str) -> set[str]:
    return {f for f, v in SENTINELS.items() if v in text}


QUESTION = "What do you mean?"


@pytest.mark.parametrize(
    "name,kind,grounding,corpus",
    [
        ("llm_scoped", "llm_scoped", False, "ambrosia"),
        ("llm_scoped+sql", "llm_scoped", True, "ambrosia"),
        ("llm_unfiltered", "llm_unfiltered", False, "ew_bird"),
        ("hybrid_scoped", "hybrid_scoped", False, "ambrosia"),
        ("hybrid_unfiltered", "hybrid_unfiltered", False, "ew_bird"),
        ("stress", "stress", False, "ambrosia"),
    ],
)
def test_every_llm_oracle_prompt_holds_exactly_its_table6_fields(scripted, name, kind, grounding, corpus):
    capture = Capture()
    scripted.responder = capture
    council = Council("oracles", [scripted_member("m", max_tokens=256, max_retries=0)], call_log())
    oracle = make_oracle(kind, corpus, council, sql_grounding=grounding)
    asyncio.run(oracle.reply(sentinel_task(), QUESTION, frozenset()))
    access = ORACLE_ACCESS[name]
    for stage in ("matcher", "responder"):
        want = set(access.get(stage, ()))
        if not want:
            assert stage not in capture.prompts, f"{name} has no {stage} prompt"
            continue
        got = _fields(capture.prompts[stage])
        assert got == want, f"{name} {stage}: extra {sorted(got - want)}, missing {sorted(want - got)}"


def test_the_scoped_responder_reads_the_clear_query_when_no_frozen_intent_is_the_resolution(scripted):
    capture = Capture()
    scripted.responder = capture
    council = Council("oracles", [scripted_member("m", max_tokens=256, max_retries=0)], call_log())
    asyncio.run(make_oracle("llm_scoped", "bird_interact", council).reply(sentinel_task(False), QUESTION, frozenset()))
    assert "clear_query" in _fields(capture.prompts["responder"])


@pytest.mark.parametrize("name,corpus", [("det_intent", "ambrosia"), ("det_knowledge", "ew_bird")])
def test_deterministic_oracles_depend_only_on_their_fields(name, corpus):
    oracle = make_oracle(name, corpus)
    record = sentinel_record()
    base = Task.from_record(record)
    allowed = set(ORACLE_ACCESS[name]["matcher"]) | set(ORACLE_ACCESS[name]["responder"])
    questions = [
        QUESTION,
        f"What is {SENTINELS['term']}?",
        f"Do you mean {SENTINELS['aliases']}?",
        f"Is it {SENTINELS['concepts']}?",
    ]
    changed = {  # each changes one field of the record; the task is rebuilt from it
        "user_query": lambda r: _with(r, spec=_with(r.spec, user_query="other")),
        "schema": lambda r: _with(r, spec=_with(r.spec, db_schema="other")),
        "clear_query": lambda r: _with(r, oracle_context=_with(r.oracle_context, clear_query="zeta7")),
        "withheld_evidence": lambda r: _with(
            r, oracle_context=_with(r.oracle_context, withheld_evidence=["zeta7 means x"])
        ),
        "reference_sql": lambda r: _with(r, verifier=_with(r.verifier, reference_sql=["SELECT zeta7"])),
        "frozen_intent": lambda r: _with(r, ambiguities=[_with(r.ambiguities[0], frozen_intent="other")]),
    }
    for field, change in changed.items():
        if field in allowed:
            continue
        for q in questions:
            a = asyncio.run(oracle.reply(base, q, frozenset()))
            b = asyncio.run(oracle.reply(Task.from_record(change(record)), q, frozenset()))
            assert (a.credited, a.response) == (b.credited, b.response), (field, q)
