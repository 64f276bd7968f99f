"""Hypothesis fuzzing of the conversions' text parsers: no crash, stated invariants hold."""

from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.ambitab import ambiqt, ambrosia, ewbird, taco
from pipelines.ambitab.sources import sql_segments

texty = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=80)
sqlish = st.builds(
    lambda *p: " ".join(p),
    st.sampled_from(["SELECT", "select", "SELECT DISTINCT", "WITH x AS"]),
    st.sampled_from(["a", "t.a", "count(*)", "max(b)", "*", "a, b", "'x'"]),
    st.sampled_from(["FROM t", "from t as t1", "FROM t JOIN u ON t.id = u.id", ""]),
    st.sampled_from(["", "WHERE a = 1", "where b > 'q'", "WHERE a = 1 OR b = 2", "LIMIT 3"]),
    texty,
)


@settings(max_examples=150, deadline=None)
@given(texty)
def test_split_evidence_keeps_only_trimmed_nonempty_pieces(evidence):
    pieces = ewbird.split_evidence(evidence)
    assert all(p and p == p.strip() and ";" not in p for p in pieces)


@settings(max_examples=150, deadline=None)
@given(texty, st.sets(st.text(alphabet="abc_", min_size=1, max_size=5), max_size=4))
def test_parse_hint_term_is_a_prefix_of_the_hint(hint, idents):
    term, kind, concepts = ewbird.parse_hint(hint, idents or None)
    assert kind in ("refers_to", "means", "equals", "colon", "other")
    assert hint.strip().startswith(term) or term == hint.strip()
    assert len(concepts) == len(set(concepts))


@settings(max_examples=150, deadline=None)
@given(st.one_of(sqlish, texty))
def test_ambiqt_normalisation_is_idempotent_and_select_columns_never_crashes(sql):
    norm = ambiqt.normalize_sql(sql) if sql.strip() else ""
    if norm:
        assert ambiqt.normalize_sql(norm) == norm
    try:
        pairs = ambiqt.select_columns(sql)
    except (ValueError, IndexError):
        return  # the build records these as rejects
    assert pairs == sorted(set(pairs))


@settings(max_examples=150, deadline=None)
@given(st.one_of(sqlish, texty))
def test_taco_verbaliser_either_verbalises_or_refuses_cleanly(sql):
    try:
        text, table, withheld = taco.verbalise(sql)
    except taco.Unverbalisable:
        return
    assert text.startswith("Show the ") and text.endswith(".") and taco.TABLE_TERM in text
    assert text.count("a specific value") == len(withheld)  # every literal is withheld, none stated


@settings(max_examples=150, deadline=None)
@given(texty, st.sampled_from(ambrosia.TYPES), st.lists(st.one_of(sqlish, texty), min_size=2, max_size=3))
def test_derive_term_always_returns_a_term(question, kind, readings):
    term, aliases = ambrosia.derive_term(question, kind, readings)
    assert term and term.lower() not in [a.lower() for a in aliases]


@settings(max_examples=100, deadline=None)
@given(st.one_of(sqlish, texty))
def test_sql_segments_never_crash(sql):
    segs = sql_segments(sql) if sql.strip() else []
    assert all(isinstance(s, str) for s in segs)
