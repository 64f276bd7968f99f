"""The access boundary on real records of every deterministic corpus, and build determinism.

No asker/solver input can carry a reference SQL, a resolution or withheld evidence: every prompt
is built from ``record.agent_view()`` (the only projection the asker and solver get), so it
suffices that no secret of the record occurs anywhere in that view's serialisation.
"""

import json
import re
from pathlib import Path

import pytest

from pipelines.ambitab import ambiqt, ambrosia, bird_interact, ewbird, taco


def _builds(shared_data, tmp_path_factory):
    return {
        "ambrosia": ambrosia.build(shared_data),
        "ambiqt": ambiqt.build(shared_data, out_dir=tmp_path_factory.mktemp("units"), limit_units=12),
        "taco": taco.build(shared_data),
        "ew_bird": ewbird.build(shared_data),
        "bird_interact": bird_interact.build(shared_data),
    }


@pytest.fixture(scope="module")
def builds(corpus_build, shared_data, tmp_path_factory):
    # the session's builds (tests/ambitab/conftest.py); determinism below rebuilds every corpus
    units = tmp_path_factory.mktemp("units")
    return {
        name: ambiqt.build(shared_data, out_dir=units, limit_units=12) if name == "ambiqt" else corpus_build(name)
        for name in ("ambrosia", "ambiqt", "taco", "ew_bird", "bird_interact")
    }


def _secrets(rec):
    out = list(rec.verifier.reference_sql) + list(rec.oracle_context.withheld_evidence)
    out += [a.resolution for a in rec.ambiguities]
    if rec.oracle_context.clear_query and rec.oracle_context.clear_query != rec.spec.user_query:
        out.append(rec.oracle_context.clear_query)
    return [s for s in out if s and len(s) > 3]


@pytest.mark.parametrize("corpus", ["ambrosia", "ambiqt", "taco", "ew_bird", "bird_interact"])
def test_no_secret_reaches_the_agent_view(builds, corpus):
    records = builds[corpus].records
    assert records
    for rec in records:
        view = rec.agent_view()
        text = view.model_dump_json()
        raw = json.loads(text)
        flat = json.dumps(raw, ensure_ascii=False)
        for secret in _secrets(rec):
            assert secret not in flat, (corpus, rec.record_id, secret[:80])
        assert set(raw) == {"record_id", "corpus", "split", "engine", "db_id", "spec", "max_questions"}


@pytest.mark.parametrize("corpus", ["ambrosia", "ambiqt", "taco", "ew_bird", "bird_interact"])
def test_verifier_view_never_carries_resolutions(builds, corpus):
    for rec in builds[corpus].records[:200]:
        text = rec.verifier_view().model_dump_json()
        for a in rec.ambiguities:
            if a.resolution not in rec.verifier.reference_sql:
                assert json.dumps(a.resolution)[1:-1] not in text


def test_every_build_is_deterministic(builds, shared_data, tmp_path_factory):
    again = _builds(shared_data, tmp_path_factory)
    for corpus, res in builds.items():
        a = [r.model_copy(update={"db_path": None}).to_json_line() for r in res.records]
        b = [r.model_copy(update={"db_path": None}).to_json_line() for r in again[corpus].records]
        assert a == b, corpus
        assert [x.reason for x in res.rejects] == [x.reason for x in again[corpus].rejects], corpus


def _name_tokens(name: str) -> tuple[str, list[str]]:
    low = (name or "").lower()
    return low, [t for t in re.split(r"[^0-9a-z]+", low) if t]


@pytest.mark.parametrize("corpus", ["ambrosia", "ambiqt", "taco", "ew_bird", "bird_interact"])
def test_no_oracle_only_label_or_its_prefix_names_the_asker_view(builds, corpus):
    """Issue 20 item 7: the names the asker reads (database id and name) carry no oracle-only label
    (an ambiguity's type or kind), neither whole, as a prefix, nor as a name token; the original
    name stays in the verifier's view for provenance."""
    for rec in builds[corpus].records:
        view = rec.agent_view()
        labels = {x.lower() for a in rec.ambiguities for x in (a.type, str(a.kind.value)) if x}
        for name in (view.db_id, view.spec.db_name):
            low, tokens = _name_tokens(name)
            for label in labels:
                assert not low.startswith(label) and label not in tokens, (corpus, rec.record_id, name, label)


def test_ambrosia_keeps_the_original_database_name_for_the_verifier(builds):
    for rec in builds["ambrosia"].records[:50]:
        original = Path(rec.provenance.source_ids["db_file"]).stem
        assert original in rec.verifier_view().model_dump_json()
        assert original not in rec.agent_view().model_dump_json()
